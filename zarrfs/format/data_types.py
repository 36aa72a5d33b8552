"""Zarr v3 data types <-> numpy, and fill values in every JSON form the spec allows.

Decoded chunks live in memory as little-endian numpy arrays, the byte order of the flat view,
so a read copies bytes without swapping.
"""

import math
import re
from dataclasses import dataclass

import numpy as np

from zarrfs.format import numpy_types
from zarrfs.errors import MetadataError, UnsupportedError

_NUMERIC = {
    "bool": "|b1",
    "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
    "complex64": "<c8", "complex128": "<c16",
}
_RAW = re.compile(r"r([0-9]+)")  # ASCII digits only: "r²" is not a raw type
MAX_RAW_BITS = 8 << 16  # 64 KiB elements: numpy's void types go no further sensibly
_FLOAT_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass(frozen=True)
class DataType:
    """A Zarr data type: its name and the little-endian numpy dtype of the flat view."""

    name: str
    numpy: np.dtype

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def array_interface(self):
        """NumPy array-interface string with explicit byte order, e.g. '<f8', '|u1', '|V3'; for a
        struct its fields, [[name, type], ...] (np.dtype([tuple(f) for f in it]) rebuilds it)."""
        if self.numpy.fields is not None:
            return [list(field) for field in self.numpy.descr]
        return self.numpy.str

    def fill_value(self, value, where: str = "fill_value") -> np.ndarray:
        """The 0-d array a JSON fill value stands for, bit-exact (NaN payloads kept)."""
        fill = parse_fill_value(self, value, where)
        if self.numpy.kind == "O":  # np.asarray would make a str an array of characters... or not: be explicit
            out = np.empty((), object)
            out[()] = fill
            return out
        return np.asarray(fill, dtype=self.numpy).reshape(())

    def fill_json(self, fill: np.ndarray):
        """The Zarr JSON form of a fill value, as zarr-python writes it."""
        return fill_value_json(self, fill)


def parse_data_type(value, where: str = "data_type") -> DataType:
    config = {}
    if isinstance(value, dict):
        if set(value) - {"name", "configuration", "must_understand"}:
            raise MetadataError(f"{where}: unexpected members {sorted(set(value) - {'name', 'configuration'})}")
        config = value.get("configuration", {})
        value = value.get("name")
        if not isinstance(config, dict):
            raise MetadataError(f"{where}: configuration must be an object")
    if not isinstance(value, str):
        raise MetadataError(f"{where}: must be a string, not {value!r}")
    if value in _NUMERIC:
        return DataType(value, np.dtype(_NUMERIC[value]))
    if value in numpy_types.PARAMETRIC:
        return DataType(value, numpy_types.PARAMETRIC[value](config, f"{where}.configuration", _field_type))
    if value in numpy_types.V2_OBJECT:
        raise MetadataError(f"{where}: {value!r} is a Zarr v2 dtype, not a v3 data type (variable-length text "
                            f"is 'string', bytes 'variable_length_bytes')")
    if value in numpy_types.VARIABLE_LENGTH:
        return DataType(value, np.dtype(object))
    raw = _RAW.fullmatch(value)
    value = value if len(value) < 40 else value[:30] + "..."  # for messages
    if raw is not None:
        digits = raw.group(1)
        bits = int(digits) if len(digits) < 10 else MAX_RAW_BITS + 8
        if bits == 0 or bits % 8:
            raise MetadataError(f"{where}: raw data type {value!r} must be a positive multiple of 8 bits")
        if bits > MAX_RAW_BITS:
            raise UnsupportedError(f"{where}: raw data type {value!r} is wider than zarrfs's limit r{MAX_RAW_BITS}")
        return DataType(value, np.dtype(f"V{bits // 8}"))
    raise UnsupportedError(f"{where}: unsupported data type {value!r}")


def parse_fill_value(dt: DataType, value, where: str):
    kind = dt.numpy.kind
    if kind == "b":
        if value in (0, 1) and not isinstance(value, float):  # zarr-python reads 0 and 1 too
            return bool(value)
        raise MetadataError(f"{where}: a bool fill value must be true or false, not {value!r}")
    if kind == "O":
        return numpy_types.variable_length_fill(dt.name, value, where)
    if kind in "SUMm" or dt.numpy.fields is not None or (kind == "V" and isinstance(value, str)):
        return numpy_types.parse_fill_value(dt.numpy, value, where)
    if kind in "iu":
        if isinstance(value, bool) or not isinstance(value, int):
            raise MetadataError(f"{where}: an integer fill value must be a JSON integer, not {value!r}")
        info = np.iinfo(dt.numpy)
        if not info.min <= value <= info.max:
            raise MetadataError(f"{where}: {value} is out of range for {dt.name}")
        return value
    if kind == "f":
        return _float_bits(dt.numpy, value, where)
    if kind == "c":
        if not (isinstance(value, list) and len(value) == 2):
            raise MetadataError(f"{where}: a complex fill value must be a [real, imaginary] pair, not {value!r}")
        part = np.dtype(f"<f{dt.itemsize // 2}")
        pair = np.array([_float_bits(part, v, where) for v in value], dtype=part)
        return pair.view(dt.numpy)[0]
    if kind == "V":
        if not (isinstance(value, list) and len(value) == dt.itemsize
                and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value)):
            raise MetadataError(f"{where}: a {dt.name} fill value must be a list of {dt.itemsize} bytes, not {value!r}")
        return np.frombuffer(bytes(value), dtype=dt.numpy)[0]
    raise UnsupportedError(f"{where}: no fill value rule for {dt.name}")


def _float_bits(dtype: np.dtype, value, where: str):
    """A float fill value as a 0-d array of `dtype`; hex strings keep their exact bits."""
    if isinstance(value, str):
        if value in _FLOAT_SPECIAL:
            return np.array(_FLOAT_SPECIAL[value], dtype=dtype)
        if value.startswith("0x"):
            try:
                bits = int(value, 16)
            except ValueError:
                raise MetadataError(f"{where}: {value!r} is not a hex bit pattern") from None
            if bits >= 1 << (8 * dtype.itemsize):
                raise MetadataError(f"{where}: {value!r} is too wide for {dtype.itemsize}-byte floats")
            return np.array(bits, dtype=f"<u{dtype.itemsize}").view(dtype)
        raise MetadataError(f"{where}: {value!r} is not a float fill value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetadataError(f"{where}: {value!r} is not a float fill value")
    with np.errstate(over="ignore"):
        return np.array(value, dtype=dtype)


def fill_value_json(dt: DataType, fill: np.ndarray):
    kind = dt.numpy.kind
    if kind in "SUMm" or dt.numpy.fields is not None:
        return numpy_types.fill_value_json(dt.numpy, fill)
    if kind == "b":
        return bool(fill)
    if kind in "iu":
        return int(fill)
    if kind == "f":
        return _float_json(fill)
    if kind == "c":
        parts = np.asarray(fill).reshape(1).view(f"<f{dt.itemsize // 2}")
        return [_float_json(parts[0]), _float_json(parts[1])]
    return list(bytes(np.asarray(fill).tobytes()))


def _float_json(value: np.ndarray):
    value = np.asarray(value)
    if np.isnan(value):
        canonical = np.array(np.nan, dtype=value.dtype)
        if value.tobytes() == canonical.tobytes():
            return "NaN"
        return "0x" + value.tobytes()[::-1].hex()
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float(value)


def fill_is_all(data: np.ndarray, fill: np.ndarray) -> bool:
    """True when every element of `data` has the fill value's exact bytes (NaN == NaN, NaT == NaT)."""
    if _an_end_differs(data, fill):  # most chunks written: no pass over the whole chunk
        return False
    if data.dtype.kind not in "biu":
        width = {1: "u1", 2: "u2", 4: "u4", 8: "u8"}.get(data.dtype.itemsize)
        if width is None:
            raw = data.reshape(-1).view("u1").reshape(-1, data.dtype.itemsize)
            return bool((raw == np.frombuffer(fill.tobytes(), "u1")).all())
        return bool((data.view(width) == fill.view(width)).all())
    return bool((data == fill).all())




def _an_end_differs(data: np.ndarray, fill: np.ndarray) -> bool:
    """The first or the last element of `data` has bytes other than the fill value's."""
    if not data.size:
        return False
    want = fill.tobytes()
    for index in ((0,) * data.ndim, tuple(n - 1 for n in data.shape)):
        if data[tuple(slice(i, i + 1) for i in index)].tobytes() != want:
            return True
    return False


def _field_type(document, where: str) -> np.dtype:
    return parse_data_type(document, where).numpy
