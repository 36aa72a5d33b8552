"""numcodecs' codecs as Zarr codecs, through one adapter over numcodecs' registry.

v3 names them `numcodecs.<id>` with the numcodecs configuration (as zarr-python writes them);
KINDS says which role each id plays. Array->array codecs (delta, fixedscaleoffset, quantize,
bitround, astype) change the element representation, and packbits packs bools into bits;
bytes->bytes codecs (zlib, bz2, lzma, lz4, the checksums) pass bytes through; pcodec and zfpy
turn arrays into bytes. OWN_ADAPTERS holds the codecs the three generic adapters cannot describe.

A Zarr v2 array's `filters` run as v2 runs them, on the stored dtype, in one array->bytes codec
(V2_FILTERS), so that any filter chain reads and writes as the v2 writer made it.
"""

import json
import math

import numcodecs
import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray, ensure_ndarray

from zarrfs.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec, variable_limit
from zarrfs.codecs.bounded_decode import bounded_decoder
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError, EncodeError, MetadataError, UnsupportedError
from zarrfs.format.data_types import DataType
from zarrfs.format.numpy_types import V2_OBJECT, little_endian, parse_v2_dtype

PREFIX = "numcodecs."
V2_FILTERS = "zarrfs.v2_filters"  # made only by the v2 reader: {"dtype": stored dtype, "filters": [...]},
# and "compressor": {...} when the compressor is array->bytes (pcodec): it runs after the filters
KINDS = {
    **dict.fromkeys(["delta", "fixedscaleoffset", "quantize", "bitround", "astype", "packbits"], "array->array"),
    **dict.fromkeys(["pcodec", "zfpy", "vlen-utf8", "vlen-bytes"], "array->bytes"),
    **dict.fromkeys(["zlib", "gzip", "bz2", "lzma", "lz4", "zstd", "blosc", "shuffle", "adler32", "fletcher32",
                     "crc32", "crc32c", "jenkins_lookup3"], "bytes->bytes"),
}
DTYPE_CHANGES = {"delta": "astype", "fixedscaleoffset": "astype", "astype": "encode_dtype"}  # config member
OPTIONAL_PACKAGES = {"pcodec": "pcodec", "zfpy": "zfpy"}
NEEDS_DTYPE = {"delta", "quantize", "fixedscaleoffset"}
UNSAFE = {"pickle"}  # numcodecs' Pickle unpickles the chunk: a store could make it run anything
VLEN = {"vlen-utf8", "vlen-bytes"}  # v3 names zarr-python gives them, without the prefix
OBJECT_FILTERS = VLEN | {"json2"}  # the first filters of the v2 object arrays shown as text


def get_codec(config: dict, where: str) -> numcodecs.abc.Codec:
    """numcodecs' codec for a configuration with an `id`; errors name the codec and, for codecs
    that need an optional package, the package."""
    codec_id = config.get("id")
    if codec_id in UNSAFE:
        raise UnsupportedError(f"{where}: codec {codec_id!r} is refused: decoding it would run code from the store")
    try:
        return numcodecs.get_codec(dict(config))
    except numcodecs.errors.UnknownCodecError:
        if codec_id in OPTIONAL_PACKAGES:
            raise UnsupportedError(f"{where}: codec {codec_id!r} needs the Python package "
                                   f"{OPTIONAL_PACKAGES[codec_id]!r} (pip install {OPTIONAL_PACKAGES[codec_id]})") from None
        raise UnsupportedError(f"{where}: unsupported codec {codec_id!r}") from None
    except Exception as e:  # a configuration numcodecs refuses: TypeError, ValueError...
        raise MetadataError(f"{where}: bad configuration for {codec_id!r} ({e})") from None


def codec_class(name: str, where: str) -> type[Codec] | None:
    """The adapter class for a codec name, None when the name is not numcodecs'."""
    if name == V2_FILTERS:
        return V2FiltersCodec
    if not name.startswith(PREFIX) and name not in VLEN:
        return None
    codec_id = name.removeprefix(PREFIX)
    kind = KINDS.get(codec_id)
    if kind is None:
        raise UnsupportedError(f"{where}: unsupported codec")
    if codec_id in OWN_ADAPTERS:
        return OWN_ADAPTERS[codec_id]
    if codec_id not in _classes:
        base = {"array->array": NumcodecsArrayCodec, "array->bytes": NumcodecsArrayBytesCodec,
                "bytes->bytes": NumcodecsBytesCodec}[kind]
        _classes[codec_id] = type(base.__name__, (base,), {"id": codec_id})
    return _classes[codec_id]


_classes: dict[str, type[Codec]] = {}  # numcodecs id -> its adapter class


class _Numcodec:
    """numcodecs' codec `codec_id` made from a configuration, a component of each adapter: its
    errors become typed ones naming it."""

    def __init__(self, codec_id: str, config: dict, where: str):
        self.id = codec_id
        self.impl = get_codec({**config, "id": codec_id}, where)

    def decode(self, data: BytesLike) -> BytesLike:
        """numcodecs' decode: bytes, or an array (filters, the codecs of object arrays)."""
        try:
            return self.impl.decode(data)
        except (CorruptChunkError, UnsupportedError):
            raise
        except Exception as e:  # numcodecs raises RuntimeError, ValueError, zlib.error...
            raise CorruptChunkError(f"undecodable {self.id} data ({e})") from None

    def encode(self, data: BytesLike) -> BytesLike:
        return encode_with(self.impl, data, self.id)


class NumcodecsBytesCodec(BytesBytesCodec):
    id: str  # the numcodecs id, set by codec_class

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        self.spec, self.numcodec = spec, _Numcodec(self.id, config, where)
        self.bounded = bounded_decoder(self.id)
        self.stream = self.id

    def encode(self, data: BytesLike) -> bytes:
        return ensure_contiguous_ndarray(self.numcodec.encode(data)).tobytes()

    def decode(self, data: BytesLike) -> BytesLike:
        if self.bounded is not None:  # decoders that could be told to produce a lot
            return self.bounded(data, self.limit_for(data))
        return self.numcodec.decode(data)


class NumcodecsArrayCodec(ArrayArrayCodec):
    id: str  # the numcodecs id, set by codec_class

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        if self.id in NEEDS_DTYPE and "dtype" not in config:  # zarr-python fills it in from the array
            config = {**config, "dtype": spec.data_type.numpy.str}
        super().__init__(config, spec, where)
        self.spec, self.numcodec = spec, _Numcodec(self.id, config, where)
        member = DTYPE_CHANGES.get(self.id)
        encoded = np.dtype(config[member]) if member and config.get(member) else spec.data_type.numpy
        if encoded.kind not in "biufc" or encoded.fields is not None:
            raise UnsupportedError(f"{where}: encodes to {encoded}, which zarrfs cannot store")
        self.encoded = DataType(encoded.str, little_endian(encoded))

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(spec.shape, self.encoded, np.zeros((), self.encoded.numpy))

    def encode(self, array: np.ndarray) -> np.ndarray:
        out = ensure_ndarray(self.numcodec.encode(np.ascontiguousarray(array)))
        encoded = self.encoded.numpy
        if out.dtype.kind != encoded.kind and out.dtype.itemsize == encoded.itemsize:  # bits, not values (bitround)
            out = out.astype(out.dtype.newbyteorder("<"), copy=False).view(encoded)
        return out.reshape(array.shape).astype(encoded, copy=False)

    def decode(self, array: np.ndarray) -> np.ndarray:
        out = ensure_ndarray(self.numcodec.decode(np.ascontiguousarray(array)))
        if out.size != array.size:
            raise CorruptChunkError(f"{self.id} decoded {out.size} elements, expected {array.size}")
        return out.reshape(self.spec.shape).astype(self.spec.data_type.numpy, copy=False)

    def encoded_size(self, nbytes: int) -> int | None:
        return nbytes // self.spec.data_type.itemsize * self.encoded.itemsize if self.spec.data_type.itemsize else 0


class NumcodecsPackBitsCodec(ArrayArrayCodec):
    """numcodecs' packbits: a bool chunk becomes one byte saying how many bits pad the last byte,
    then the bits, eight to a byte; the encoded side is that 1-D uint8 array, as zarr-python
    resolves it."""

    id = "packbits"
    encoded = DataType("uint8", np.dtype("u1"))

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        if spec.data_type.numpy.kind != "b":
            raise MetadataError(f"{where}: packbits packs bool arrays, not {spec.data_type.name}")
        super().__init__(config, spec, where)
        self.spec, self.numcodec = spec, _Numcodec(self.id, config, where)
        self.count = math.prod(spec.shape)

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec((self.encoded_size(self.count),), self.encoded, np.zeros((), "u1"))

    def encode(self, array: np.ndarray) -> np.ndarray:
        return ensure_ndarray(self.numcodec.encode(np.ascontiguousarray(array)))

    def decode(self, array: np.ndarray) -> np.ndarray:
        out = ensure_ndarray(self.numcodec.decode(np.ascontiguousarray(array)))
        if out.size != self.count:  # the first byte may claim any padding
            raise CorruptChunkError(f"packbits decoded {out.size} elements, expected {self.count}")
        return out.reshape(self.spec.shape)

    def encoded_size(self, nbytes: int) -> int:
        return 1 + -(-nbytes // 8)  # a bool is one byte: nbytes elements


class NumcodecsArrayBytesCodec(ArrayBytesCodec):
    id: str  # the numcodecs id, set by codec_class

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        self.spec, self.numcodec = spec, _Numcodec(self.id, config, where)

    def encode(self, array: np.ndarray) -> bytes:
        return ensure_contiguous_ndarray(self.numcodec.encode(np.ascontiguousarray(array))).tobytes()

    def decode(self, data: BytesLike) -> np.ndarray:
        if self.id in VLEN:
            check_vlen_header(data, self.spec.shape)
        out = ensure_ndarray(self.numcodec.decode(bytes(data)))
        if out.size != np.prod(self.spec.shape, dtype=object):
            raise CorruptChunkError(f"{self.id} decoded {out.size} elements, expected {list(self.spec.shape)}")
        return out.reshape(self.spec.shape).astype(self.spec.data_type.numpy, copy=False)


OWN_ADAPTERS = {"packbits": NumcodecsPackBitsCodec}  # codecs the generic adapters cannot describe


def encode_with(codec: numcodecs.abc.Codec, data: BytesLike, codec_id: str) -> BytesLike:
    """numcodecs' encode; a value it cannot encode (a shuffle of the wrong size, text a vlen
    codec refuses) is a typed error naming the codec, and the written data stays dirty."""
    try:
        return codec.encode(data)
    except Exception as e:
        raise EncodeError(f"{codec_id} cannot encode this chunk ({e})") from None


def check_vlen_header(data: BytesLike, shape: tuple[int, ...]) -> None:
    """A vlen chunk starts with its element count (4 bytes, little-endian): refuse a chunk that
    claims another count before numcodecs allocates for it."""
    count = int(np.prod(shape, dtype=object))
    if len(data) < 4 or int.from_bytes(bytes(data[:4]), "little") != count:
        raise CorruptChunkError(f"vlen chunk does not hold the {count} elements expected")


def check_json_chunk(data: BytesLike, shape: tuple[int, ...]) -> None:
    """A json2 chunk is a JSON list of the elements, then their dtype and shape: refuse one that
    claims another shape or dtype before numcodecs allocates for it."""
    try:
        items = json.loads(bytes(data))
    except (ValueError, RecursionError) as e:
        raise CorruptChunkError(f"json2 chunk is not JSON ({e})") from None
    if not (isinstance(items, list) and len(items) >= 2 and items[-1] == list(shape) and items[-2] in V2_OBJECT):
        raise CorruptChunkError(f"json2 chunk does not end with the object dtype and the shape {list(shape)}")


OBJECT_CHECKS = {"vlen-utf8": check_vlen_header, "vlen-bytes": check_vlen_header, "json2": check_json_chunk}


class V2FiltersCodec(ArrayBytesCodec):
    """A v2 chunk's array side: the stored dtype (byte order kept), then the filters in order,
    each given the previous one's output, as zarr v2 does."""

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        self.spec = spec
        filters = config.get("filters") or []
        text = config.get("dtype") in V2_OBJECT and filters and filters[0].get("id") in OBJECT_FILTERS
        self.stored = np.dtype(object) if text else parse_v2_dtype(config.get("dtype"), f"{where}: dtype")
        self.filters = [get_codec(f, f"{where}: filters[{i}]") for i, f in enumerate(filters)]
        if config.get("compressor"):  # one that takes arrays (pcodec): it encodes the filters' output
            self.filters.append(get_codec(config["compressor"], f"{where}: compressor"))

    def encode(self, array: np.ndarray) -> np.ndarray:
        data: BytesLike = np.ascontiguousarray(array, dtype=self.stored)
        for codec in self.filters:
            data = encode_with(codec, data, codec.codec_id)
        return ensure_contiguous_ndarray(data).reshape(-1).view("u1")

    def decode(self, data: BytesLike) -> np.ndarray:
        # a filter may widen the elements (astype): not this much; variable-length elements have
        # no size the shape says, only what the stored bytes could hold (base.variable_limit)
        limit = None if self.stored.kind == "O" else 2 * self.spec.nbytes + (1 << 20)
        try:
            for codec in reversed(self.filters):
                if self.stored.kind == "O" and codec is self.filters[0]:
                    OBJECT_CHECKS[codec.codec_id](data, self.spec.shape)
                bounded = bounded_decoder(codec.codec_id)  # a compressor used as a filter
                if bounded:
                    data = bounded(data, variable_limit(codec.codec_id, len(data)) if limit is None else limit)
                else:
                    data = codec.decode(data)
            if self.stored.kind == "O":  # variable-length: the first filter made the elements
                return _elements(data, self.spec.shape)
            flat = ensure_contiguous_ndarray(data).reshape(-1).view("u1")
        except CorruptChunkError:
            raise
        except Exception as e:
            raise CorruptChunkError(f"undecodable v2 filter data ({e})") from None
        if len(flat) != self.spec.nbytes:
            raise CorruptChunkError(f"decoded chunk has {len(flat)} bytes, expected {self.spec.nbytes}")
        array = flat.view(self.stored).reshape(self.spec.shape)
        if self.stored.kind == "b":
            truth: np.ndarray = array.view("u1") != 0  # any nonzero byte is true (NumPy types `!=` as Any)
            return truth
        return array.astype(self.spec.data_type.numpy, copy=False)

    def encoded_size(self, nbytes: int) -> int | None:
        return None if self.filters else nbytes


def _elements(data: BytesLike, shape: tuple[int, ...]) -> np.ndarray:
    out = np.asarray(data, dtype=object)
    if out.size != int(np.prod(shape, dtype=object)):
        raise CorruptChunkError(f"decoded chunk has {out.size} elements, expected {list(shape)}")
    return out.reshape(shape)
