"""packbits (zarr-extensions, codecs/packbits): an array->bytes codec that stores each
component in `b` bits, from `first_bit` to `last_bit` of its N-bit value, without padding
between elements. Bit order (the README leaves it to "bit i of the sequence"): the least
significant bit first, in each byte and in each value, as zarrs writes it; the bits past the
last element are zero, and a "first_byte"/"last_byte" padding byte counts them. Option names
as the README gives them; the schema's start_bit/end_bit and start_byte/end_byte are read too."""

import math

import numpy as np

from zarrfs.codecs.base import ArrayBytesCodec, ChunkSpec
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError, MetadataError, UnsupportedError
from zarrfs.format import ml_types

PADDING = {"none": "none", "first_byte": "first_byte", "last_byte": "last_byte",
           "start_byte": "first_byte", "end_byte": "last_byte"}  # the schema's spellings
_NUMERIC_BITS = {"bool": 1, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32,
                 "int64": 64, "uint64": 64, "float16": 16, "float32": 32, "float64": 64,
                 "complex64": 32, "complex128": 64}
_SIGNED = {"int2", "int4", "int8", "int16", "int32", "int64"}


def _component_bits(name: str) -> tuple[int, int]:
    """(N, components): the bits of each component and how many an element has."""
    if name in _NUMERIC_BITS:
        return _NUMERIC_BITS[name], 2 if name.startswith("complex") else 1
    if name in ("complex_float32", "complex_float64"):
        return int(name[-2:]), 2
    if name in ml_types.TYPES:
        bits = ml_types.TYPES[name].bits or 16  # complex_float16 / complex_bfloat16: 16-bit parts
        return bits, 2 if name.startswith("complex_") else 1
    raise KeyError(name)


class PackbitsCodec(ArrayBytesCodec):

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        unknown = set(config) - {"padding_encoding", "first_bit", "last_bit", "start_bit", "end_bit"}
        if unknown:
            raise MetadataError(f"{where}: unknown configuration members {sorted(unknown)}")
        try:
            self.n, self.components = _component_bits(spec.data_type.name)
        except KeyError:
            raise UnsupportedError(f"{where}: packbits does not take {spec.data_type.name}") from None
        padding = PADDING.get(config.get("padding_encoding", "none"))
        if padding is None:
            raise MetadataError(f"{where}: padding_encoding must be one of {sorted(PADDING)}, "
                                f"not {config.get('padding_encoding')!r}")
        self.padding = padding
        first = _bit(config, ("first_bit", "start_bit"), 0, self.n, where)
        last = _bit(config, ("last_bit", "end_bit"), self.n - 1, self.n, where)
        if last < first:
            raise MetadataError(f"{where}: last_bit {last} is less than first_bit {first}")
        self.first, self.b = first, last - first + 1
        self.signed = spec.data_type.name in _SIGNED
        self.spec = spec
        self.unit = np.dtype(f"<u{max(1, -(-self.n // 8))}") if self.n > 1 else np.dtype("u1")

    def _elements(self) -> int:
        return math.prod(self.spec.shape) * self.components

    def _packed_size(self) -> int:
        return -(-self._elements() * self.b // 8)

    def encoded_size(self, nbytes: int) -> int | None:
        return self._packed_size() + (self.padding != "none")

    def encode(self, array: np.ndarray) -> bytes:
        stored = self.spec.data_type.stored(np.ascontiguousarray(array))
        values = stored.reshape(-1).view("u1") if self.n == 1 else stored.reshape(-1).view(self.unit)
        values = (values >> self.unit.type(self.first)) if self.first else values
        if self._whole_per_byte:  # 1, 2, 4 or 8 bits of a byte-wide value: whole values per byte
            packed = self._pack_bytes(values)
        else:
            shifts = np.arange(self.b, dtype=self.unit)
            bits = ((values[:, None] >> shifts) & self.unit.type(1)).astype("u1")
            packed = np.packbits(bits.reshape(-1), bitorder="little").tobytes()
        pad = bytes([len(packed) * 8 - self._elements() * self.b])
        return {"none": packed, "first_byte": pad + packed, "last_byte": packed + pad}[self.padding]

    def decode(self, data: BytesLike) -> np.ndarray:
        data = bytes(data)
        if len(data) != self.encoded_size(0):
            raise CorruptChunkError(f"packbits chunk has {len(data)} bytes, expected {self.encoded_size(0)}")
        count = self._elements() * self.b
        if self.padding != "none":
            pad, data = (data[0], data[1:]) if self.padding == "first_byte" else (data[-1], data[:-1])
            if pad != len(data) * 8 - count:  # as zarrs checks it
                raise CorruptChunkError(f"packbits padding byte says {pad} bits, the chunk has {len(data) * 8 - count}")
        if self._whole_per_byte:
            values = self._unpack_bytes(np.frombuffer(data, "u1"), count // self.b)
        else:
            bits = np.unpackbits(np.frombuffer(data, "u1"), count=count, bitorder="little")
            bits = bits.reshape(-1, self.b).astype(self.unit)
            values = (bits << np.arange(self.b, dtype=self.unit)).sum(axis=1, dtype=self.unit)
        if self.signed and self.first + self.b < self.n:  # copy the top bit kept into the bits above it
            top = self.first + self.b - 1
            values = values << self.unit.type(self.first)
            negative = (values >> self.unit.type(top)) & self.unit.type(1) == 1
            values[negative] |= np.iinfo(self.unit).max >> self.unit.type(top) << self.unit.type(top)
        elif self.first:
            values = values << self.unit.type(self.first)
        return self._typed(values)

    @property
    def _whole_per_byte(self) -> bool:
        return self.unit.itemsize == 1 and 8 % self.b == 0

    def _pack_bytes(self, values: np.ndarray) -> bytes:
        """Values of 1, 2, 4 or 8 bits, whole values per byte, the first in the lowest bits."""
        per, mask = 8 // self.b, np.uint8((1 << self.b) - 1)
        padded = np.zeros(-(-len(values) // per) * per, "u1")
        padded[:len(values)] = values & mask
        packed = padded[::per].copy()
        for k in range(1, per):  # a strided pass per position in the byte: faster than a reduce
            packed |= padded[k::per] << np.uint8(k * self.b)
        return packed.tobytes()

    def _unpack_bytes(self, raw: np.ndarray, count: int) -> np.ndarray:
        per, mask = 8 // self.b, np.uint8((1 << self.b) - 1)
        out = np.empty(len(raw) * per, "u1")
        for k in range(per):
            out[k::per] = (raw >> np.uint8(k * self.b)) & mask
        return out[:count]

    def _typed(self, values: np.ndarray) -> np.ndarray:
        dt = self.spec.data_type
        if dt.name == "bool":
            truth: np.ndarray = values != 0  # NumPy types `!=` as Any
            return truth.reshape(self.spec.shape)
        if self.n < 8:  # one byte per component; the sign of int2/int4 spread to int8 (NAME.bin)
            values = values.astype("u1") & ((1 << self.n) - 1)
        raw = np.ascontiguousarray(values).view("u1")
        out = raw.view(dt.numpy).reshape(self.spec.shape)
        return dt.clean(out) if dt.needs_cleaning else out


def _bit(config: dict, names: tuple[str, str], default: int, n: int, where: str) -> int:
    value = next((config[name] for name in names if config.get(name) is not None), default)
    if type(value) is not int or not 0 <= value < n:
        raise MetadataError(f"{where}: {names[0]} must be an integer in 0..{n - 1}, not {value!r}")
    return value
