"""Zarr v3 data types <-> numpy, and fill values in every JSON form the spec allows.

Decoded chunks live in memory as little-endian numpy arrays, the byte order of the flat view,
so a read copies bytes without swapping.
"""

import math
import re
import struct
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from zarrfs.errors import MetadataError, UnsupportedError
from zarrfs.format import ml_types, numpy_types
from zarrfs.format.json_values import JsonValue

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
    fields: tuple[tuple[str, "DataType"], ...] = ()  # a struct's (name, DataType) pairs, when parsed from a v3 document

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def array_interface(self) -> str | list[list[object]]:
        """NumPy array-interface string with explicit byte order, e.g. '<f8', '|u1', '|V3'; the
        ml_dtypes name of a type NumPy lacks ('bfloat16', 'int4'); for a struct its fields,
        [[name, type], ...] (np.dtype([tuple(f) for f in it]) rebuilds a NumPy-only one)."""
        if ml_types.is_ml(self.name):
            return ml_types.TYPES[self.name].spelling
        if self.fields:
            return [[name, field.array_interface] for name, field in self.fields]
        if self.numpy.fields is not None:
            return [list(field) for field in self.numpy.descr]
        return self.numpy.str

    @property
    def needs_cleaning(self) -> bool:
        """Stored bytes carry bits above the values' width (sub-byte types, and structs with
        such fields): decoded chunks go through clean(), so those bits never show."""
        return ml_types.sub_byte(self.name) or any(field.needs_cleaning for _, field in self.fields)

    def clean(self, array: np.ndarray) -> np.ndarray:
        """Decoded elements as NAME.bin shows them (see ml_types.normalise)."""
        if ml_types.sub_byte(self.name):
            return ml_types.normalise(self.name, array)
        array = np.array(array, copy=True)
        for name, field in self.fields:
            if field.needs_cleaning:
                array[name] = field.clean(np.ascontiguousarray(array[name]))
        return array

    def stored(self, array: np.ndarray) -> np.ndarray:
        """Elements as the bytes codec stores them: a sub-byte type's low bits only."""
        if ml_types.sub_byte(self.name):
            return ml_types.stored_bits(self.name, array)
        if not self.needs_cleaning:
            return array
        array = np.array(array, copy=True)
        for name, field in self.fields:
            if field.needs_cleaning:
                array[name] = field.stored(np.ascontiguousarray(array[name]))
        return array

    def check_values(self, elements: np.ndarray, where: str) -> None:
        """A write through NAME.bin: every element must be a value NAME.bin can show (EINVAL)."""
        if ml_types.sub_byte(self.name):
            ml_types.check_values(self.name, elements, where)
        for name, field in self.fields:
            if field.needs_cleaning:
                field.check_values(np.ascontiguousarray(elements[name]), f"{where}, field {name!r}")

    def fill_value(self, value: object, where: str = "fill_value", big_endian: bool = False) -> np.ndarray:
        """The 0-d array a JSON fill value stands for, bit-exact (NaN payloads kept).
        `big_endian`: the bytes codec stores big-endian, which a struct's base64 fill follows."""
        if self.numpy.fields is not None and isinstance(value, str) and big_endian:
            raw = numpy_types.parse_fill_value(self.numpy.newbyteorder(">"), value, where)
            return np.asarray(raw).astype(self.numpy).reshape(())
        if self.fields and isinstance(value, dict):
            return _struct_fill(self, value, where)
        fill = parse_fill_value(self, value, where)
        if self.numpy.kind == "O":  # np.asarray would make a str an array of characters... or not: be explicit
            out = np.empty((), object)
            out[()] = fill
            return out
        return np.asarray(fill, dtype=self.numpy).reshape(())

    def fill_json(self, fill: np.ndarray) -> JsonValue:
        """The Zarr JSON form of a fill value, as zarr-python writes it."""
        return fill_value_json(self, fill)


def parse_data_type(value: object, where: str = "data_type") -> DataType:
    config: dict = {}
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
    if value in ml_types.TYPES:
        return DataType(value, ml_types.TYPES[value].numpy)
    if (alias := ml_types.numpy_alias(value)) is not None:
        return DataType(value, alias)
    if value in ("struct", "structured"):
        return _struct(value, config, f"{where}.configuration")
    if value in numpy_types.PARAMETRIC:
        return DataType(value, numpy_types.PARAMETRIC[value](config, f"{where}.configuration"))
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


def _struct(name: str, config: dict, where: str) -> DataType:
    """`struct`, and its legacy alias `structured` (fields as [name, data_type] pairs)."""
    fields = config.get("fields")
    if not isinstance(fields, list) or not fields:
        raise MetadataError(f"{where}.fields must be a non-empty list of fields")
    parsed: list[tuple[str, DataType]] = []
    for i, field in enumerate(fields):
        if isinstance(field, dict) and isinstance(field.get("name"), str) and "data_type" in field:
            field_name, field_type = field["name"], field["data_type"]
        elif isinstance(field, list) and len(field) == 2 and isinstance(field[0], str):
            field_name, field_type = field
        else:
            raise MetadataError(f"{where}.fields[{i}] must be {{'name', 'data_type'}} or a [name, data_type] pair, "
                                f"not {field!r}")
        if not field_name:
            raise MetadataError(f"{where}.fields[{i}]: a field name must not be empty")
        dt = parse_data_type(field_type, f"{where}.fields[{i}]")
        if dt.numpy.kind == "O":
            raise UnsupportedError(f"{where}.fields[{i}]: a variable-length field has no fixed size")
        parsed.append((field_name, dt))
    names = [field_name for field_name, _ in parsed]
    if len(set(names)) != len(names):
        raise MetadataError(f"{where}.fields: duplicate field names {names}")
    try:
        dtype = np.dtype([(field_name, dt.numpy) for field_name, dt in parsed])
    except (ValueError, TypeError) as e:
        raise MetadataError(f"{where}.fields: {e}") from None
    if not 0 < dtype.itemsize <= numpy_types.MAX_ITEMSIZE:
        raise UnsupportedError(f"{where}: a struct of {dtype.itemsize} bytes (zarrfs takes 1 to "
                               f"{numpy_types.MAX_ITEMSIZE})")
    return DataType(name, dtype, tuple(parsed))


def _struct_fill(dt: DataType, value: dict, where: str) -> np.ndarray:
    """A struct's fill value as an object of field name -> that field's fill value."""
    if set(value) != {name for name, _ in dt.fields}:
        raise MetadataError(f"{where}: a struct fill value must have exactly the fields "
                            f"{[name for name, _ in dt.fields]}, not {sorted(value)}")
    out = np.zeros((), dt.numpy)
    for name, field in dt.fields:
        out[name] = field.fill_value(value[name], f"{where}.{name}")
    return out


def parse_fill_value(dt: DataType, value: object, where: str) -> object:
    """The fill value as a Python or NumPy value that np.asarray makes the 0-d fill of `dt`."""
    if dt.name in ml_types.TYPES:
        return _ml_fill(dt, value, where)
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


def _ml_fill(dt: DataType, value: object, where: str) -> int | np.ndarray:
    """Fill values of the ml_dtypes types: integers in range, floats as the core floats (a
    special value only where the type has it), complex as [real, imaginary] of the part type."""
    name = dt.name
    if name in ml_types.INTS:
        low, high = ml_types.int_range(name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise MetadataError(f"{where}: a {name} fill value must be an integer in {low}..{high}, not {value!r}")
        return value
    if name in ml_types.FLOATS:
        return _float_bits(dt.numpy, value, where, name)
    if not (isinstance(value, list) and len(value) == 2):
        raise MetadataError(f"{where}: a complex fill value must be a [real, imaginary] pair, not {value!r}")
    part_name = name.removeprefix("complex_")
    part = dt.numpy["real"]
    pair = np.array([_float_bits(part, v, where, part_name) for v in value], dtype=part)
    return pair.view("u1").view(dt.numpy).reshape(())


def _float_bits(dtype: np.dtype, value: object, where: str, name: str = "") -> np.ndarray:
    """A float fill value as a 0-d array of `dtype`; hex strings keep their exact bits.
    `name`: an ml_dtypes type's, whose special values and width are checked."""
    if isinstance(value, str):
        if value in _FLOAT_SPECIAL:
            if name in ml_types.FLOATS and not ml_types.has_value(dtype, _FLOAT_SPECIAL[value]):
                raise MetadataError(f"{where}: {name} has no {value}")
            return np.array(_FLOAT_SPECIAL[value], dtype=dtype)
        if value.startswith("0x"):
            try:
                bits = int(value, 16)
            except ValueError:
                raise MetadataError(f"{where}: {value!r} is not a hex bit pattern") from None
            if name in ml_types.FLOATS:
                ml_types.check_fill_bits(name, bits, value, where)
            if bits >= 1 << (8 * dtype.itemsize):
                raise MetadataError(f"{where}: {value!r} is too wide for {dtype.itemsize}-byte floats")
            return np.array(bits, dtype=f"<u{dtype.itemsize}").view(dtype)
        raise MetadataError(f"{where}: {value!r} is not a float fill value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetadataError(f"{where}: {value!r} is not a float fill value")
    if name in ml_types.FLOATS:
        return ml_types.from_number(name, dtype, _exact(value), float(_as_double(value, to_odd=False)))
    with np.errstate(over="ignore"):
        return np.array(_as_double(value, to_odd=dtype.itemsize < 8), dtype=dtype)


def _exact(value: int | float) -> Fraction | None:
    """The exact number of a JSON number: its text (metadata.JsonNumber), or the integer; None
    for a plain float (from elsewhere than a document), taken as it is."""
    text = getattr(value, "text", None)
    if text is not None:
        return Fraction(text)
    return Fraction(value) if isinstance(value, int) else None


def _as_double(value: int | float, to_odd: bool) -> float:
    """A JSON number as a float64: the nearest, or with `to_odd` rounded to odd, from which one
    more rounding (NumPy's and ml_dtypes', to nearest, ties to even) to a narrower type gives
    the value nearest the exact number (float64 rounded to odd keeps what a tie needs; Boldo and
    Melquiond, 2008). The exact number is the JSON text (metadata.JsonNumber) or the integer; a
    plain float is taken as it is. Past float64's range: an infinity."""
    exact = _exact(value)
    if exact is None:
        return float(value)
    if exact == 0:
        return math.copysign(0.0, float(value))
    try:
        nearest = float(exact)  # correctly rounded, ties to even
    except OverflowError:
        return math.inf if exact > 0 else -math.inf
    if not to_odd or Fraction(nearest) == exact:
        return nearest
    truncated = nearest if abs(Fraction(nearest)) < abs(exact) else math.nextafter(nearest, 0.0)
    bits = struct.unpack("<q", struct.pack("<d", truncated))[0]
    return float(struct.unpack("<d", struct.pack("<q", bits | 1))[0])


def fill_value_json(dt: DataType, fill: np.ndarray) -> JsonValue:
    if dt.name in ml_types.TYPES:
        return _ml_fill_json(dt, fill)
    if dt.fields and dt.name == "struct":  # an object of the fields' fill values ("structured": base64)
        return {name: field.fill_json(np.asarray(fill)[name]) for name, field in dt.fields}
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


def _ml_fill_json(dt: DataType, fill: np.ndarray) -> JsonValue:
    fill = np.asarray(fill)
    if dt.name in ml_types.INTS:
        return int(fill.view("u1" if dt.numpy.kind == "u" else "i1"))
    if dt.name in ml_types.FLOATS:
        return _float_json(fill)
    parts = fill.reshape(1).view("u1").view(dt.numpy["real"])
    return [_float_json(parts[0]), _float_json(parts[1])]


def _float_json(value: np.ndarray) -> str | float:
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
