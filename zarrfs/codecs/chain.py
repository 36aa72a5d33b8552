"""Zarr v3 codecs, one class each, and CodecChain: a codec list bound to one chunk spec.

Decoded chunks are little-endian C-order numpy arrays of the chunk shape; whatever the stored
byte order or transpose, the chain turns them into that and back.
"""

import functools
import math

import google_crc32c
import numcodecs
import numcodecs.abc
import numcodecs.blosc
import numcodecs.zstd
import numpy as np
import zstandard

from zarrfs.codecs import numcodecs_adapter as numcodecs_codecs
from zarrfs.codecs import shard_format as sharding
from zarrfs.codecs.base import (
    MAX_CHUNK_NBYTES,
    MAX_INNER_CHUNKS,
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
    ReadInto,
)
from zarrfs.codecs.base import config_value as _config
from zarrfs.codecs.bitround import BitroundCodec
from zarrfs.codecs.blosc_blocks import PREFIX as BLOSC_PREFIX
from zarrfs.codecs.blosc_blocks import blosc_blocks, decode_stored_blocks, stored_ranges
from zarrfs.codecs.bounded_decode import check_blosc_header, gzip_decode, zstd_decode
from zarrfs.codecs.cast_value import CastValueCodec
from zarrfs.codecs.conditional import ConditionalCodec
from zarrfs.codecs.n5_default import N5DefaultCodec
from zarrfs.codecs.packbits import PackbitsCodec
from zarrfs.codecs.reshape import ReshapeCodec
from zarrfs.codecs.scale_offset import ScaleOffsetCodec
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.codecs.vlen_line_sizes import NAME as VLEN_LINE_SIZES
from zarrfs.codecs.vlen_line_sizes import VlenLineSizesCodec
from zarrfs.codecs.zfp import ZfpCodec
from zarrfs.errors import CorruptChunkError, MetadataError, UnsupportedError
from zarrfs.format import ml_types
from zarrfs.format.data_types import DataType, fill_is_all
from zarrfs.format.v3 import normalise_extension
from zarrfs.geometry import ChunkShape

STORED_SLACK = 1 << 10  # bytes a compressor's header and framing may add to a tiny chunk (zstd: 18, gzip: 18, blosc: 16)


class TransposeCodec(ArrayArrayCodec):
    kind = "array->array"

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        order = _config(config, "order", where)
        if (not isinstance(order, list) or not all(type(i) is int for i in order)  # not bool, not null
                or sorted(order) != list(range(len(spec.shape)))):
            raise MetadataError(f"{where}: order must be a permutation of 0..{len(spec.shape) - 1}, not {order!r}")
        self.order = tuple(order)
        self.inverse = tuple(int(i) for i in np.argsort(order))

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(tuple(spec.shape[i] for i in self.order), spec.data_type, spec.fill_value)

    def encode(self, array: np.ndarray) -> np.ndarray:
        return array.transpose(self.order)

    def decode(self, array: np.ndarray) -> np.ndarray:
        return array.transpose(self.inverse)

    def encoded_size(self, nbytes: int) -> int:
        return nbytes


class BytesCodec(ArrayBytesCodec):
    kind = "array->bytes"

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        endian = config.get("endian")
        multibyte = spec.data_type.numpy.kind in "iufcMmU" or ml_types.is_ml(spec.data_type.name)
        if endian is None and spec.data_type.itemsize > 1 and multibyte:
            raise MetadataError(f"{where}: missing configuration.endian for {spec.data_type.name}")
        if endian not in (None, "little", "big"):
            raise MetadataError(f"{where}: endian must be 'little' or 'big', not {endian!r}")
        self.spec = spec
        self.stored = spec.data_type.numpy.newbyteorder(">" if endian == "big" else "<")

    def encode(self, array: np.ndarray) -> np.ndarray:
        """The stored bytes as a uint8 array: a view when no conversion is needed (flushes
        never change a chunk they are encoding), so a 1 MiB chunk is not copied to compress it."""
        array = self.spec.data_type.stored(array)
        return np.ascontiguousarray(array, dtype=self.stored).reshape(-1).view("u1")

    def decode(self, data: BytesLike) -> np.ndarray:
        if len(data) != self.spec.nbytes:
            raise CorruptChunkError(f"decoded chunk has {len(data)} bytes, expected {self.spec.nbytes}")
        array = np.frombuffer(data, dtype=self.stored).reshape(self.spec.shape)
        if self.stored.kind == "b":  # any nonzero byte is true; the flat view shows 0 or 1
            return array.view("u1") != 0
        if self.spec.data_type.needs_cleaning:  # bits above a sub-byte type's width never show
            return self.spec.data_type.clean(array.astype(self.spec.data_type.numpy))
        return array.astype(self.spec.data_type.numpy, copy=False)

    def encoded_size(self, nbytes: int) -> int:
        return nbytes


class _NumcodecsCodec(BytesBytesCodec):
    """A bytes->bytes codec that numcodecs implements; errors become CorruptChunkError."""

    kind = "bytes->bytes"
    label = ""
    impl: numcodecs.abc.Codec  # made by each codec's __init__

    def encode(self, data: BytesLike) -> bytes:
        return bytes(self.impl.encode(data))

    def decode(self, data: BytesLike) -> BytesLike:
        try:
            return self.impl.decode(data)
        except Exception as e:  # numcodecs raises RuntimeError, ValueError, zlib.error...
            raise CorruptChunkError(f"undecodable {self.label} stream ({e})") from None


class GzipCodec(_NumcodecsCodec):
    """gzip, decoded whole for any read, as zstd (ZstdCodec)."""

    label = stream = "gzip"

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        level = _config(config, "level", where)
        if not isinstance(level, int) or not 0 <= level <= 9:
            raise MetadataError(f"{where}: level must be an integer 0..9, not {level!r}")
        self.impl = numcodecs.GZip(level)

    def decode(self, data):
        return gzip_decode(data, self.limit_for(data))


class ZstdCodec(_NumcodecsCodec):
    """zstd, decoded whole even for a read that wants its first bytes: a prefix decode would
    answer from a frame that a whole decode refuses (cut short, garbled further on, longer
    than it says), and checking the rest costs what decoding it does."""

    label = stream = "zstd"

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        level = _config(config, "level", where, 0)
        checksum = _config(config, "checksum", where, False)
        if not isinstance(level, int) or not isinstance(checksum, bool):
            raise MetadataError(f"{where}: level must be an integer and checksum a boolean")
        self.impl = numcodecs.Zstd(level=level, checksum=checksum)

    def decode(self, data: BytesLike) -> BytesLike:
        """numcodecs decodes a frame that declares its size in one call; any other frame goes
        through a decoder bounded by the size expected (numcodecs may spin on those)."""
        declared, limit = zstd_content_size(data), self.limit_for(data)
        if declared is None or declared > limit:
            return zstd_decode(data, limit)
        return super().decode(data)

    def decode_into(self, data, out, wanted=None):
        if zstd_content_size(data) != len(out):  # unknown or wrong: numcodecs would not notice a short frame
            return super().decode_into(data, out)
        try:
            numcodecs.zstd.decompress(data, out)
        except Exception as e:
            raise CorruptChunkError(f"undecodable zstd stream ({e})") from None


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def zstd_content_size(data: BytesLike) -> int | None:
    """The decoded size a zstd frame header declares (RFC 8878, 3.1.1.1), None when it has none
    or is no frame header. (zstandard answers 0 for a skippable frame, whose size says nothing
    of the frame after it: a hostile chunk would then decode without a bound.)"""
    if bytes(data[:4]) != ZSTD_MAGIC:
        return None
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        return None
    return None if size < 0 else size


class BloscCodec(_NumcodecsCodec):
    label = stream = "blosc"
    decodes_parts = True  # the blocks that hold the bytes wanted (blosc_blocks.py)
    reads_parts = True  # and only their stored bytes (decode_part)
    SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        cname = _config(config, "cname", where)
        if cname not in numcodecs.blosc.list_compressors():
            raise UnsupportedError(f"{where}: cname {cname!r} is not one of {numcodecs.blosc.list_compressors()}")
        shuffle = _config(config, "shuffle", where)
        if shuffle not in self.SHUFFLES:
            raise MetadataError(f"{where}: shuffle must be one of {sorted(self.SHUFFLES)}, not {shuffle!r}")
        typesize = config.get("typesize")
        if typesize is None and shuffle != "noshuffle":
            raise MetadataError(f"{where}: missing configuration.typesize (required with {shuffle})")
        self.impl = numcodecs.Blosc(cname=cname, clevel=_config(config, "clevel", where),
                                    shuffle=self.SHUFFLES[shuffle], blocksize=config.get("blocksize", 0),
                                    typesize=typesize or 1)

    def decode(self, data):
        check_blosc_header(data, self.limit_for(data))
        return super().decode(data)

    def decode_into(self, data: BytesLike, out: np.ndarray, wanted: list[int] | None = None) -> None:
        # bytes 4..8 of the blosc header: the decoded size; numcodecs only checks that `out` is not smaller
        check_blosc_header(data, self.limit_for(data))
        if int.from_bytes(bytes(data[4:8]), "little") != len(out):
            return super().decode_into(data, out)
        if wanted is not None and wanted[1] - wanted[0] <= len(out) // 4 and blosc_blocks(data, out, wanted):
            return
        try:
            numcodecs.blosc.decompress(data, out)
        except Exception as e:
            raise CorruptChunkError(f"undecodable blosc stream ({e})") from None

    def decode_part(self, read_into: ReadInto, stored: np.ndarray, out: np.ndarray, wanted: list[int]) -> bool:
        """Decode the bytes `wanted` of `out` (widening `wanted` to whole blocks) reading only
        the ranges of the stored chunk that hold them: `read_into(offset, view)` fills `view`
        with the stored bytes at `offset`, `stored` is a uint8 array as long as the stored chunk,
        of which only the ranges read are filled. False when it cannot (read the chunk whole)."""
        if wanted[1] - wanted[0] > len(out) // 4:
            return False
        prefix = stored[:min(BLOSC_PREFIX, len(stored))]
        read_into(0, prefix)
        ranges = stored_ranges(prefix, len(stored), len(out), wanted)
        if ranges is None:
            return False
        for start, stop in ranges:
            start = max(start, len(prefix))
            if start < stop:
                read_into(start, stored[start:stop])
        return decode_stored_blocks(stored, out, wanted) or blosc_blocks(stored, out, wanted)


def _crc32c(data: BytesLike) -> int:
    """google-crc32c takes bytes and numpy arrays, not memoryviews: a uint8 array over the same memory."""
    return google_crc32c.value(np.frombuffer(data, "u1"))


class Crc32cCodec(BytesBytesCodec):
    kind = "bytes->bytes"

    def encode(self, data: BytesLike) -> bytes:
        return bytes(data) + _crc32c(data).to_bytes(4, "little")

    def decode(self, data: BytesLike) -> BytesLike:
        if len(data) < 4:
            raise CorruptChunkError("crc32c: fewer than 4 bytes")
        body = memoryview(data)[:-4]
        stored = int.from_bytes(bytes(data[-4:]), "little")
        actual = _crc32c(body)
        if stored != actual:
            raise CorruptChunkError(f"crc32c mismatch (stored {stored:#010x}, computed {actual:#010x})")
        return body

    def encoded_size(self, nbytes: int) -> int:
        return nbytes + 4


class ShardingCodec(ArrayBytesCodec):
    """sharding_indexed: the whole-shard encode and decode; Array reads shards partially."""

    kind = "array->bytes"

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        inner = _config(config, "chunk_shape", where)
        if not isinstance(inner, list):
            raise MetadataError(f"{where}: chunk_shape must be a list of integers, not {inner!r}")
        inner = tuple(inner)
        if len(inner) != len(spec.shape) or any(not isinstance(c, int) or c < 1 for c in inner):
            raise MetadataError(f"{where}: chunk_shape {list(inner)} does not fit shard shape {list(spec.shape)}")
        if any(s % c for s, c in zip(spec.shape, inner, strict=False)):
            raise MetadataError(f"{where}: chunk_shape {list(inner)} does not divide shard shape {list(spec.shape)}")
        location = config.get("index_location", "end")
        if location not in ("start", "end"):
            raise MetadataError(f"{where}: index_location must be 'start' or 'end', not {location!r}")
        self.spec = spec
        self.index_location = location
        self.chunks_per_shard = tuple(s // c for s, c in zip(spec.shape, inner, strict=False))
        if math.prod(self.chunks_per_shard) > MAX_INNER_CHUNKS:
            raise UnsupportedError(f"{where}: chunk_shape {list(inner)} makes {math.prod(self.chunks_per_shard)} inner "
                                   f"chunks per shard, more than zarrfs's limit of {MAX_INNER_CHUNKS}")
        self.inner_chain = CodecChain(_config(config, "codecs", where),
                                      ChunkSpec(inner, spec.data_type, spec.fill_value), f"{where}.codecs")
        n = math.prod(self.chunks_per_shard)
        index_spec = ChunkSpec((*self.chunks_per_shard, 2), DataType("uint64", np.dtype("<u8")), np.array(0, "<u8"))
        self.index_chain = CodecChain(_little_endian_index(_config(config, "index_codecs", where)), index_spec,
                                      f"{where}.index_codecs")
        self.index_nbytes = self.index_chain.encoded_size(16 * n)
        if self.index_nbytes is None:
            raise MetadataError(f"{where}: index_codecs must have a fixed encoded size (no compression)")

    @property
    def inner_chunk_shape(self) -> tuple[int, ...]:
        return self.inner_chain.spec.shape

    def decode_index(self, raw: BytesLike) -> np.ndarray:
        """The index as an (n, 2) array of (offset, nbytes), inner chunks in C order."""
        if len(raw) != self.index_nbytes:
            raise CorruptChunkError(f"truncated shard: index has {len(raw)} bytes, expected {self.index_nbytes}")
        return sharding.check_index(self.index_chain.decode(raw).reshape(-1, 2))

    def assemble(self, chunks: list[BytesLike | None]) -> bytes | None:
        """A shard from encoded inner chunks in C order (None for empty), None if all are empty."""
        return sharding.assemble(chunks, self.index_nbytes, self.index_location,
                                 lambda index: self.index_chain.encode(index.reshape(*self.chunks_per_shard, 2)))

    def split(self, shard: BytesLike) -> list[memoryview | None]:
        """Encoded inner chunks, C order, None for empty: the inverse of assemble."""
        index = self.decode_index(sharding.index_bytes(shard, self.index_nbytes, self.index_location))
        return [sharding.slice_chunk(shard, entry) for entry in index]

    def decode(self, shard: BytesLike) -> np.ndarray:
        out = np.empty(self.spec.shape, self.spec.data_type.numpy)
        inner = self.inner_chunk_shape
        for coords, data in zip(np.ndindex(*self.chunks_per_shard), self.split(shard), strict=False):
            region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, inner, strict=False))
            out[(*region, ...)] = self.spec.fill_value if data is None else self.inner_chain.decode(data)
        return out

    def encode(self, array: np.ndarray) -> bytes | None:
        inner = self.inner_chunk_shape
        chunks: list[BytesLike | None] = []
        for coords in np.ndindex(*self.chunks_per_shard):
            region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, inner, strict=False))
            chunks.append(self.inner_chain.encode_or_none(np.ascontiguousarray(array[region])))
        return self.assemble(chunks)


def _little_endian_index(codecs: object) -> object:
    """The shard index's codecs, a `bytes` without `endian` (the short-hand "bytes", as zarr-python
    reads it) taken as little-endian. Data of unstated byte order is refused, as wrong bytes
    would pass unseen; an index of the wrong order could not: its offsets fall outside the shard."""
    if not isinstance(codecs, list):
        return codecs
    def unstated(codec: object) -> bool:
        return codec == "bytes" or (isinstance(codec, dict) and codec.get("name") == "bytes"
                                    and codec.get("configuration", {}) == {})
    return [{**({} if codec == "bytes" else codec), "name": "bytes", "configuration": {"endian": "little"}}
            if unstated(codec) else codec for codec in codecs]


CODECS: dict[str, type[Codec]] = {
    "transpose": TransposeCodec,
    "bytes": BytesCodec,
    "sharding_indexed": ShardingCodec,
    "gzip": GzipCodec,
    "zstd": ZstdCodec,
    "blosc": BloscCodec,
    "crc32c": Crc32cCodec,
    "bitround": BitroundCodec,
    "packbits": PackbitsCodec,
    "cast_value": CastValueCodec,
    "scale_offset": ScaleOffsetCodec,
    "reshape": ReshapeCodec,
    "conditional": ConditionalCodec,
    "n5_default": N5DefaultCodec,
    "zfp": ZfpCodec,
    VLEN_LINE_SIZES: VlenLineSizesCodec,
}
_ORDER = {"array->array": 0, "array->bytes": 1, "bytes->bytes": 2}


class CodecChain:
    """A codec list bound to one chunk spec: decode(bytes) -> array and encode(array) -> bytes."""

    def __init__(self, codecs: object, spec: ChunkSpec, where: str):
        if not isinstance(codecs, (list, tuple)) or not codecs:
            raise MetadataError(f"{where}: must be a non-empty list of codecs")
        self.spec = spec
        self.codecs, self.where = list(codecs), where
        self.array_array: list[ArrayArrayCodec] = []
        self.array_bytes: ArrayBytesCodec | None = None
        self.bytes_bytes: list[BytesBytesCodec] = []
        for i, entry in enumerate(codecs):
            self._add(normalise_extension(entry, f"{where}[{i}]"), f"{where}[{i}]")
        if self.array_bytes is None:
            raise MetadataError(f"{where}: needs exactly one array->bytes codec (bytes or sharding_indexed)")
        if self.sharding is None and spec.nbytes > MAX_CHUNK_NBYTES:
            raise UnsupportedError(f"{where}: a chunk of {list(spec.shape)} {spec.data_type.name} is {spec.nbytes} "
                                   f"bytes decoded, more than zarrfs's limit of {MAX_CHUNK_NBYTES}")
        self._bound_decoders()

    def _bound_decoders(self) -> None:
        """Tell each bytes->bytes codec the most its decode may produce: the exact encoded size of
        the codecs before it when that is fixed, else a bound no real compressor output reaches;
        none for variable-length elements (strings, bytes), whose size only the stored bytes
        bound (Codec.limit_for): 4 bytes and the value each, which the shape says nothing of."""
        nbytes = self.spec.nbytes
        for codec in self.array_array:  # numcodecs' astype and delta may widen the elements
            nbytes = codec.encoded_size(nbytes) or nbytes
        exact = self.array_bytes.encoded_size(nbytes)
        bound = None if self.variable_length else 2 * nbytes + (1 << 20)
        for codec in self.bytes_bytes:
            codec.decoded_limit = exact if exact is not None else bound
            exact = None if exact is None else codec.encoded_size(exact)
            bound = None if bound is None else bound + bound // 4

    def stored_limit(self) -> int | None:
        """The most bytes a stored chunk of this chain can hold, for the store to refuse more
        before taking it into memory (stores/bounded_get.py); None for variable-length elements,
        whose size the shape does not tell. The exact encoded size where it is fixed; a shard's
        index and every inner chunk at their most; else what _bound_decoders gives the
        compressors, and a quarter more (plus STORED_SLACK) for what each bytes->bytes codec
        may add: no real compressor grows incompressible data by that much."""
        if self.variable_length:
            return None
        nbytes = self.spec.nbytes
        for codec in self.array_array:
            nbytes = codec.encoded_size(nbytes) or nbytes
        if self.sharding is not None:
            inner = self.sharding.inner_chain.stored_limit()
            if inner is None:
                return None
            size = self.sharding.index_nbytes + math.prod(self.sharding.chunks_per_shard) * inner
        else:
            size = self.array_bytes.encoded_size(nbytes) or 2 * nbytes + (1 << 20)
        for codec in self.bytes_bytes:
            size = codec.encoded_size(size) or size + size // 4 + STORED_SLACK
        return size

    def _add(self, entry: dict, where: str) -> None:
        cls = CODECS.get(entry["name"]) or numcodecs_codecs.codec_class(entry["name"], f"{where} ({entry['name']})")
        where = f"{where} ({entry['name']})"
        if cls is None:
            if entry.get("must_understand") is False:
                return
            raise UnsupportedError(f"{where}: unsupported codec")
        stage = _ORDER[cls.kind]
        last = 2 if self.bytes_bytes else 1 if self.array_bytes else 0
        if stage < last or (stage == 1 and self.array_bytes is not None):
            raise MetadataError(f"{where}: codecs must be array->array, then one array->bytes, then bytes->bytes")
        spec = self.spec
        for codec in self.array_array:
            spec = codec.resolve(spec)
        nested = {"build_chain": CodecChain} if cls.nests_chains else {}
        codec = cls(entry["configuration"], spec, where, **nested)
        if stage == 0:
            self.array_array.append(codec)
        elif stage == 1:
            self.array_bytes = codec
        else:
            self.bytes_bytes.append(codec)

    def check_grid(self, chunk_shape: ChunkShape, where: str) -> None:
        """Every chunk shape of a rectilinear grid binds this chain (a shard's inner chunks must
        divide it): checked when the array is listed and opened, so no read fails on it later.
        A shape is one length per dimension, so the lengths are checked dimension by dimension."""
        if self.sharding is None:
            return
        for k, (c, n) in enumerate(zip(chunk_shape, self.sharding.inner_chunk_shape, strict=False)):
            for length in sorted(set([c] if isinstance(c, int) else c)):
                if length % n:
                    raise MetadataError(f"{where}: chunk_grid: a chunk of length {length} along dimension {k} is "
                                        f"not a multiple of the sharding codec's inner chunk length {n}")

    def rebound(self, shape: tuple[int, ...]) -> "CodecChain":
        """The same codecs bound to chunks of another shape (a rectilinear grid's chunks)."""
        return CodecChain(self.codecs, ChunkSpec(tuple(shape), self.spec.data_type, self.spec.fill_value), self.where)

    @property
    def variable_length(self) -> bool:
        """Elements of any length are stored (strings, bytes), which the chunk's shape does not bound."""
        return self.spec.data_type.numpy.kind == "O" or self.array_bytes.variable_length

    @property
    def sharding(self) -> ShardingCodec | None:
        """The sharding codec when the chain is sharding alone, so shards can be read partially."""
        if isinstance(self.array_bytes, ShardingCodec) and not self.array_array and not self.bytes_bytes:
            return self.array_bytes
        return None

    def decode(self, data: BytesLike) -> np.ndarray:
        for codec in reversed(self.bytes_bytes):
            data = codec.decode(data)
        array = self.array_bytes.decode(data)
        for codec in reversed(self.array_array):
            array = codec.decode(array)
        return np.ascontiguousarray(array)

    def decode_into(self, data: BytesLike, out: np.ndarray, wanted: list[int] | None = None) -> None:
        """Decode into `out`, a C-contiguous array of the chunk's shape and dtype. When the stored
        bytes are already the decoded layout, the last codec writes straight into `out`, and may
        decode only the bytes `wanted` [start, stop) (a read that wants no more)."""
        if not self._stored_as_decoded:
            out[...] = self.decode(data)
            return
        for codec in reversed(self.bytes_bytes[1:]):
            data = codec.decode(data)
        flat = out.reshape(-1).view("u1")
        if self.bytes_bytes:
            self.bytes_bytes[0].decode_into(data, flat, wanted)
            return
        if len(data) != len(flat):
            raise CorruptChunkError(f"decoded chunk has {len(data)} bytes, expected {len(flat)}")
        flat[...] = np.frombuffer(data, "u1")

    @functools.cached_property
    def decodes_parts(self) -> bool:
        """decode_into may decode only the bytes `wanted` (blosc: the blocks that hold them),
        leaving the rest of `out` undefined. Streams (zstd, gzip, zlib) never do: a prefix
        would answer from a chunk whose whole decode fails."""
        return self._stored_as_decoded and bool(self.bytes_bytes) and self.bytes_bytes[0].decodes_parts

    @functools.cached_property
    def reads_parts(self) -> bool:
        """decode_part may decode the bytes wanted from a few ranges of the stored chunk (a
        blosc chunk's header and the blocks that hold them) instead of all of it."""
        return self._stored_as_decoded and len(self.bytes_bytes) == 1 and self.bytes_bytes[0].reads_parts

    def decode_part(self, read_into: ReadInto, stored: np.ndarray, out: np.ndarray, wanted: list[int]) -> bool:
        """As decode_into(..., wanted) from the ranges of the stored chunk it needs (BloscCodec.
        decode_part); False when it cannot: the caller reads the chunk whole."""
        return self.reads_parts and self.bytes_bytes[0].decode_part(read_into, stored, out.reshape(-1).view("u1"), wanted)

    @functools.cached_property
    def _stored_as_decoded(self) -> bool:
        """No transpose, and the bytes codec stores the in-memory dtype (little-endian, not bool)."""
        codec = self.array_bytes
        return (not self.array_array and isinstance(codec, BytesCodec) and codec.stored == self.spec.data_type.numpy
                and codec.stored.kind != "b" and not self.spec.data_type.needs_cleaning)

    def encode(self, array: np.ndarray) -> BytesLike | None:
        """The stored value: bytes-like (bytes, or a uint8 array from the bytes codec)."""
        for codec in self.array_array:
            array = codec.encode(array)
        data = self.array_bytes.encode(array)
        if data is None:  # an all-empty shard
            return None
        for codec in self.bytes_bytes:
            data = codec.encode(data)
        return data

    def encode_or_none(self, array: np.ndarray) -> BytesLike | None:
        """Encoded bytes, or None when the chunk is all fill value and need not be stored."""
        if fill_is_all(array, self.spec.fill_value):
            return None
        return self.encode(array)

    def encoded_size(self, nbytes: int) -> int | None:
        for codec in [*self.array_array, self.array_bytes, *self.bytes_bytes]:
            nbytes = codec.encoded_size(nbytes)
            if nbytes is None:
                return None
        return nbytes
