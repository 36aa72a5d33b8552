"""bitround (zarr-extensions, codecs/bitround): an array->array codec that rounds each value
to `keepbits` significant bits on encode, so that a compressor after it finds repeats; decoding
is the identity. Floats keep `keepbits` bits of mantissa (ties to even, numcodecs' BitRound);
integers `keepbits` bits from their most significant set bit, their bits taken as unsigned (as
zarrs does, so a negative integer rounds from bit 63). Complex types round each part."""

import numpy as np

from zarrfs.codecs.base import ArrayArrayCodec, ChunkSpec
from zarrfs.errors import MetadataError, UnsupportedError

# mantissa bits of each float type, by the bits' width; bfloat16 has 7 (zarrs uses float16's 10)
_MANTISSA = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
_COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64", "complex_float16": "float16",
                  "complex_bfloat16": "bfloat16", "complex_float32": "float32", "complex_float64": "float64"}
_INTEGERS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


class BitroundCodec(ArrayArrayCodec):

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        keepbits = config.get("keepbits")
        if type(keepbits) is not int or keepbits < 0 or set(config) - {"keepbits"}:
            raise MetadataError(f"{where}: configuration must be {{'keepbits': a non-negative integer}}, not {config!r}")
        name = spec.data_type.name
        name = _COMPLEX_PARTS.get(name, name)
        self.width = spec.data_type.itemsize * 8 // (2 if spec.data_type.name in _COMPLEX_PARTS else 1)
        self.maxbits: int | None
        if name in _MANTISSA:
            self.maxbits = _MANTISSA[name]
        elif name in _INTEGERS or spec.data_type.numpy.kind in "Mm":
            self.maxbits = None  # from each value's most significant set bit
        else:
            raise UnsupportedError(f"{where}: bitround does not take {spec.data_type.name}")
        self.keepbits = keepbits

    def encode(self, array: np.ndarray) -> np.ndarray:
        bits = np.ascontiguousarray(array).reshape(-1).view(f"<u{self.width // 8}")
        return _round(bits.copy(), self.keepbits, self.maxbits, self.width).view(array.dtype).reshape(array.shape)

    def decode(self, array: np.ndarray) -> np.ndarray:
        return array

    def encoded_size(self, nbytes: int) -> int | None:
        return nbytes


def _round(bits: np.ndarray, keepbits: int, maxbits: int | None, width: int) -> np.ndarray:
    """numcodecs' and zarrs' rounding: add half a quantum less one plus the kept lowest bit (ties
    to even), saturating, then clear the dropped bits."""
    dtype = bits.dtype
    if maxbits is None:  # integers: the significant bits of each value
        maskbits = np.maximum(_bit_length(bits) - keepbits, 0).astype(dtype)
    else:
        if keepbits >= maxbits:
            return bits
        maskbits = np.full(bits.shape, maxbits - keepbits, dtype)
    rounding = maskbits > 0
    m = maskbits[rounding]
    b = bits[rounding]
    one = dtype.type(1)
    half_quantum1 = (one << (m - one)) - one
    increment = ((b >> m) & one) + half_quantum1
    total = b + increment
    total[total < b] = np.iinfo(dtype).max  # saturating, as zarrs
    mask = np.iinfo(dtype).max >> m << m
    bits[rounding] = total & mask
    return bits


def _bit_length(values: np.ndarray) -> np.ndarray:
    """Each unsigned value's bit length (0 for 0), by halving: exact for 64-bit values too."""
    length = np.zeros(values.shape, np.int64)
    rest = values.copy()
    for step in (32, 16, 8, 4, 2, 1):
        if step < values.dtype.itemsize * 8:
            big = (rest >> values.dtype.type(step)) != 0
            length[big] += step
            rest[big] >>= values.dtype.type(step)
    length += rest != 0
    return length
