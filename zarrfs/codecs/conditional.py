"""conditional (zarr-extensions, codecs/conditional): a bytes->bytes codec that wraps a list of
bytes->bytes codecs, each applied to a chunk or not as a bit of a header says (bit i of the
header, least significant bit of byte 0 first, for codec i). Reading honours any header;
writing uses the README's "compress_if_smaller" rule: a codec is applied when its output is
smaller than its input. Set bits past the list are a corrupt chunk."""

from zarrfs.codecs.base import BuildChain, BytesBytesCodec, ChunkSpec
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError, MetadataError


class ConditionalCodec(BytesBytesCodec):
    nests_chains = True

    def __init__(self, config: dict, spec: ChunkSpec, where: str, build_chain: BuildChain):
        super().__init__(config, spec, where)

        codecs = config.get("codecs")
        if not isinstance(codecs, list) or not codecs:
            raise MetadataError(f"{where}: configuration.codecs must be a non-empty list of bytes->bytes codecs")
        bits = config.get("header_bits", -(-len(codecs) // 8) * 8)
        if type(bits) is not int or bits % 8 or bits < len(codecs):
            raise MetadataError(f"{where}: header_bits must be a multiple of 8 of at least {len(codecs)}, not {bits!r}")
        # a chain of [bytes, *codecs] binds each nested codec to the spec; only its bytes->bytes part is used
        chain = build_chain([{"name": "bytes", "configuration": {"endian": "little"}}, *codecs], spec, f"{where}.codecs")
        if chain.array_array or len(chain.bytes_bytes) != len(codecs):
            raise MetadataError(f"{where}: the nested codecs must all be bytes->bytes")
        self.codecs = chain.bytes_bytes
        self.header = bits // 8

    def encode(self, data: BytesLike) -> bytes:
        mask = 0
        for i, codec in enumerate(self.codecs):
            trial = codec.encode(data)
            if len(trial) < len(data):
                data, mask = trial, mask | 1 << i
        return mask.to_bytes(self.header, "little") + bytes(data)

    def decode(self, data: BytesLike) -> BytesLike:
        if len(data) < self.header:
            raise CorruptChunkError(f"conditional: {len(data)} bytes, shorter than the {self.header}-byte header")
        mask = int.from_bytes(bytes(data[:self.header]), "little")
        if mask >> len(self.codecs):
            raise CorruptChunkError(f"conditional: header {mask:#x} sets bits past the {len(self.codecs)} codecs")
        data = memoryview(data)[self.header:]
        for i in reversed(range(len(self.codecs))):
            if mask >> i & 1:
                # the chunk's own bound for the last decode; a stage between may be a little larger
                applied_below = mask & ((1 << i) - 1)
                limit = self.decoded_limit
                self.codecs[i].decoded_limit = 2 * limit + (1 << 20) if applied_below and limit is not None else limit
                data = self.codecs[i].decode(data)
        return data
