"""What every codec shares: the chunk spec it is bound to and the Codec interface, one class
per kind (array->array, array->bytes, bytes->bytes), each with the encode and decode of its kind."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from zarrfs.codecs.bounded_decode import MAX_RATIO
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError, MetadataError
from zarrfs.format.data_types import DataType


@dataclass(frozen=True)
class ChunkSpec:
    shape: tuple[int, ...]
    data_type: DataType
    fill_value: np.ndarray

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.data_type.itemsize


MAX_CHUNK_NBYTES = 2 << 30  # a chunk decoded whole: past this it is refused, not allocated
MAX_INNER_CHUNKS = 1 << 24  # inner chunks per shard: a 256 MiB index


class Codec:
    kind: str  # "array->array", "array->bytes" or "bytes->bytes"
    # bytes->bytes: the most bytes decode() may produce (set by CodecChain); None for chunks of
    # variable-length elements, whose bound comes from the stored bytes (limit_for)
    decoded_limit: int | None = 0
    stream: str | None = None  # bytes->bytes: the numcodecs id of its format, for MAX_RATIO
    decodes_parts: bool = False  # bytes->bytes: decode_into may decode only the bytes `wanted`
    reads_parts: bool = False  # bytes->bytes: decode_part decodes them from ranges of the stored bytes
    # A codec that holds codecs of its own (conditional, n5_default) is given the chain builder as
    # `build_chain`: it lives above the codecs in chain.py, so they cannot import it.
    nests_chains: bool = False
    # array->bytes: its stored form holds elements of any length (vlen) though its decoded chunk
    # does not (vlen_line_sizes.py): the chunk's shape bounds neither its stored nor its decoded bytes
    variable_length: bool = False

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        self.where = where

    def limit_for(self, data: BytesLike) -> int:
        """The most bytes decode(data) may produce: the chain's bound, or for variable-length
        elements what `data` could decode to at its format's greatest ratio (MAX_RATIO), within
        MAX_CHUNK_NBYTES: real data always fits, and a bomb costs no more than a real chunk."""
        return self.decoded_limit if self.decoded_limit is not None else variable_limit(self.stream, len(data))

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """The spec of the encoded side (array->array codecs change it)."""
        return spec

    def encoded_size(self, nbytes: int) -> int | None:
        """Encoded size for a decoded size, or None when it depends on the data."""
        return None


ReadInto = Callable[[int, np.ndarray], object]  # read_into(offset, view): fill `view` with the stored bytes at offset


class ArrayArrayCodec(Codec):
    kind = "array->array"

    def encode(self, array: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def decode(self, array: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class ArrayBytesCodec(Codec):
    kind = "array->bytes"

    def encode(self, array: np.ndarray) -> BytesLike | None:
        """The stored bytes; None when there is nothing to store (sharding: every inner chunk empty)."""
        raise NotImplementedError

    def decode(self, data: BytesLike) -> np.ndarray:
        raise NotImplementedError


class BytesBytesCodec(Codec):
    kind = "bytes->bytes"

    def encode(self, data: BytesLike) -> BytesLike:
        raise NotImplementedError

    def decode(self, data: BytesLike) -> BytesLike:
        raise NotImplementedError

    def decode_part(self, read_into: ReadInto, stored: np.ndarray, out: np.ndarray, wanted: list[int]) -> bool:
        """With `reads_parts`: decode the bytes `wanted` of `out` from the ranges of the stored
        chunk it reads with `read_into`; False when it cannot (the caller reads the chunk whole)."""
        return False

    def decode_into(self, data: BytesLike, out: np.ndarray, wanted: list[int] | None = None) -> None:
        """bytes->bytes: decode into the uint8 array `out`, which must end up exactly full.
        Codecs that can decode in place override this to skip the copy; those that can decode
        part of a chunk may fill only out[wanted[0]:wanted[1]], when a read wants no more, and
        widen `wanted` (a [start, stop] list) in place to what they decoded."""
        decoded = self.decode(data)
        if len(decoded) != len(out):
            raise CorruptChunkError(f"decoded chunk has {len(decoded)} bytes, expected {len(out)}")
        out[...] = np.frombuffer(decoded, "u1")


class NestedChain(Protocol):
    """What a codec that holds codecs (conditional, n5_default) uses of the chain built for them:
    chain.CodecChain, which lives above the codecs, so they are given its builder (BuildChain)."""

    @property
    def array_array(self) -> list[ArrayArrayCodec]: ...

    @property
    def bytes_bytes(self) -> list[BytesBytesCodec]: ...

    def encode(self, array: np.ndarray) -> BytesLike | None: ...

    def decode(self, data: BytesLike) -> np.ndarray: ...


BuildChain = Callable[[list, ChunkSpec, str], NestedChain]  # (codecs, spec, where) -> the chain


def variable_limit(stream: str | None, stored: int) -> int:
    """The most `stored` bytes of the numcodecs format `stream` can decode to (MAX_RATIO), within
    MAX_CHUNK_NBYTES: the bound of a chunk of variable-length elements."""
    ratio = None if stream is None else MAX_RATIO.get(stream)
    return MAX_CHUNK_NBYTES if ratio is None else min(MAX_CHUNK_NBYTES, ratio * stored)


def config_value(config: dict, name: str, where: str, default: object = ...) -> object:
    if name not in config:
        if default is ...:
            raise MetadataError(f"{where}: missing configuration.{name}")
        return default
    return config[name]


