"""n5_default (zarr-extensions, codecs/n5_default): an array->bytes codec for N5 blocks in
"default" mode. A block is a header (mode 0 and the number of dimensions as big-endian uint16,
then each dimension as a big-endian uint32, in N5's order, which the Zarr metadata keeps) and the block encoded by the nested
chain (a full transpose, big-endian bytes, at most one compressor). A block smaller or larger
than the chunk (N5 writers truncate edge blocks, or pad them) is padded with the fill value or
cut to the chunk. Blocks are written whole, as tensorstore and zarr-python 2 do."""

import math
import struct

import numpy as np

from zarrfs.codecs.base import MAX_CHUNK_NBYTES, ArrayBytesCodec, BuildChain, ChunkSpec, NestedChain
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError, EncodeError, MetadataError, UnsupportedError
from zarrfs.format.v3 import normalise_extension


class N5DefaultCodec(ArrayBytesCodec):
    nests_chains = True

    def __init__(self, config: dict, spec: ChunkSpec, where: str, build_chain: BuildChain):
        super().__init__(config, spec, where)
        codecs = config.get("codecs")
        if not isinstance(codecs, list) or not 2 <= len(codecs) <= 3:
            raise MetadataError(f"{where}: configuration.codecs must be transpose, bytes and at most one more codec")
        first, second = (normalise_extension(c, f"{where}.codecs") for c in codecs[:2])
        reverse = list(range(len(spec.shape)))[::-1]
        if first["name"] != "transpose" or first["configuration"].get("order") != reverse:
            raise MetadataError(f"{where}: the first codec must be transpose with order {reverse}")
        endian = second["configuration"].get("endian")
        if second["name"] != "bytes" or (endian != "big" and not (endian is None and spec.data_type.itemsize == 1)):
            raise MetadataError(f"{where}: the second codec must be bytes with endian 'big'")
        if len(spec.shape) >= 1 << 16 or any(s >= 1 << 32 for s in spec.shape):
            raise UnsupportedError(f"{where}: N5 blocks hold at most 65535 dimensions of less than 2**32")
        self.codecs, self.spec, self.chain_where, self.build_chain = codecs, spec, f"{where}.codecs", build_chain
        self._chains: dict[tuple[int, ...], NestedChain] = {}  # block shape -> its chain: the chunk's, and a few truncated edge blocks'
        self.chain = self._chain(spec.shape)

    def _chain(self, shape: tuple[int, ...]) -> NestedChain:
        if shape not in self._chains:
            if len(self._chains) > 64:
                self._chains.clear()
            spec = ChunkSpec(shape, self.spec.data_type, self.spec.fill_value)
            self._chains[shape] = self.build_chain(self.codecs, spec, self.chain_where)
        return self._chains[shape]

    def encode(self, array: np.ndarray) -> bytes:
        header = struct.pack(f">HH{len(self.spec.shape)}I", 0, len(self.spec.shape), *self.spec.shape)
        block = self.chain.encode(array)
        if block is None:  # the nested chain ends in the bytes codec, which always stores
            raise EncodeError(f"{self.chain_where}: the N5 block encodes to nothing")
        return header + bytes(block)

    def decode(self, data: BytesLike) -> np.ndarray:
        data = memoryview(data)
        ndim = len(self.spec.shape)
        if len(data) < 4 + 4 * ndim:
            raise CorruptChunkError(f"N5 block of {len(data)} bytes is shorter than its header")
        mode, dims = struct.unpack(">HH", data[:4])
        if mode != 0 or dims != ndim:
            raise CorruptChunkError(f"N5 block in mode {mode} with {dims} dimensions, expected mode 0 with {ndim}")
        shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
        if math.prod(shape) * self.spec.data_type.itemsize > MAX_CHUNK_NBYTES:
            raise CorruptChunkError(f"N5 block of shape {list(shape)} is larger than zarrfs decodes")
        if tuple(shape) == self.spec.shape:
            return self.chain.decode(data[4 + 4 * ndim:])
        block = self._chain(tuple(shape)).decode(data[4 + 4 * ndim:])
        out = np.full(self.spec.shape, self.spec.fill_value, self.spec.data_type.numpy)
        overlap = tuple(slice(0, min(a, b)) for a, b in zip(shape, self.spec.shape, strict=False))
        out[overlap] = block[overlap]
        return out
