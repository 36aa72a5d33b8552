"""The data types that are NumPy's own rather than the Zarr v3 core's: datetimes and timedeltas,
fixed-length byte and text strings, structs; their Zarr v3 names (as zarr-python writes them),
the v2 dtype strings, and their fill values.

Each is shown as flat fixed-size elements: the little-endian form of the NumPy dtype.
Variable-length strings and bytes have no fixed size and are not shown as a flat file.
"""

import base64
import binascii
import re
from collections.abc import Callable

import numpy as np

from zarrfs.errors import MetadataError, UnsupportedError

TIME_UNITS = {"Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic"}
TEXT_TYPES, BYTES_TYPES = {"string", "vlen-utf8"}, {"variable_length_bytes", "vlen-bytes", "bytes"}
# Zarr v2's object dtype, every way NumPy spells it (zarr-python 2 writes "|O", and reads any of
# them). It is no Zarr v3 data type.
V2_OBJECT = ("|O", "O", "<O", ">O", "=O")
VARIABLE_LENGTH = TEXT_TYPES | BYTES_TYPES  # no fixed element size: shown as text (see views/text.py)
MAX_ITEMSIZE = 1 << 16  # bytes per element: wider fixed-length types are refused, not allocated
_V2_DTYPE = re.compile(r"[<>|=]?([biufcSUVMm])([0-9]+)(\[[0-9]*[A-Za-zμ]+\])?")


def little_endian(dtype: np.dtype) -> np.dtype:
    """The dtype with every multi-byte field little-endian (structs too), as the flat view shows it."""
    fields, names = dtype.fields, dtype.names  # both None, or both set (a struct)
    if fields is None or names is None:
        return dtype.newbyteorder("<")
    return np.dtype([(name, little_endian(fields[name][0])) for name in names])


def _length(config: dict, where: str, multiple: int = 1) -> int:
    n = config.get("length_bytes")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n % multiple:
        raise MetadataError(f"{where}.length_bytes must be a positive multiple of {multiple}, not {n!r}")
    if n > MAX_ITEMSIZE:
        raise UnsupportedError(f"{where}.length_bytes: {n} is wider than zarrfs's limit of {MAX_ITEMSIZE} bytes")
    return n


ParseType = Callable[[dict, str], np.dtype]  # (configuration, where) -> the type's NumPy dtype


def _time(kind: str) -> ParseType:
    def parse(config: dict, where: str) -> np.dtype:
        unit, scale = config.get("unit"), config.get("scale_factor", 1)
        if unit not in TIME_UNITS:
            raise MetadataError(f"{where}.unit must be one of {sorted(TIME_UNITS)}, not {unit!r}")
        if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale < 2**31:
            raise MetadataError(f"{where}.scale_factor must be a positive integer, not {scale!r}")
        return np.dtype(f"<{kind}8[{scale if scale > 1 else ''}{unit}]")
    return parse


def _bounded(dtype: np.dtype, where: str) -> np.dtype:
    if not 0 < dtype.itemsize <= MAX_ITEMSIZE:
        raise UnsupportedError(f"{where}: a struct of {dtype.itemsize} bytes (zarrfs takes 1 to {MAX_ITEMSIZE})")
    return dtype


PARAMETRIC: dict[str, ParseType] = {
    "numpy.datetime64": _time("M"),
    "numpy.timedelta64": _time("m"),
    "fixed_length_utf32": lambda c, w: np.dtype(f"<U{_length(c, w, 4) // 4}"),
    "null_terminated_bytes": lambda c, w: np.dtype(f"S{_length(c, w)}"),
    "raw_bytes": lambda c, w: np.dtype(f"V{_length(c, w)}"),
}  # struct and structured: data_types.py, as their fields are Zarr data types


def parse_v2_dtype(value: object, where: str) -> np.dtype:
    """A Zarr v2 `dtype` (a NumPy type string, or a list of [name, type(, shape)] fields) as the
    stored NumPy dtype, byte order kept."""
    if isinstance(value, str):
        match = _V2_DTYPE.fullmatch(value)
        if value in V2_OBJECT:
            raise UnsupportedError(f"{where}: object arrays ({value!r}) have no fixed element size")
        if match is None:
            raise UnsupportedError(f"{where}: unsupported data type {value[:40]!r}")
        if int(match.group(2)) > MAX_ITEMSIZE:
            raise UnsupportedError(f"{where}: {value!r} is wider than zarrfs's limit of {MAX_ITEMSIZE} bytes")
        try:
            dtype = np.dtype(value)
        except (TypeError, ValueError) as e:
            raise UnsupportedError(f"{where}: unsupported data type {value!r} ({e})") from None
        if dtype.kind == "f" and dtype.itemsize not in (2, 4, 8) or dtype.kind == "c" and dtype.itemsize not in (8, 16):
            raise UnsupportedError(f"{where}: unsupported data type {value!r}")
        if dtype.itemsize == 0:
            raise UnsupportedError(f"{where}: {value!r} has elements of no bytes")
        return dtype
    if isinstance(value, list) and value:
        fields = []
        for i, field in enumerate(value):
            if not (isinstance(field, list) and len(field) in (2, 3) and isinstance(field[0], str)):
                raise MetadataError(f"{where}[{i}] must be [name, dtype] or [name, dtype, shape], not {field!r}")
            dt = parse_v2_dtype(field[1], f"{where}[{i}]")
            fields.append((field[0], dt) if len(field) == 2 else (field[0], dt, tuple(field[2])))
        try:
            return _bounded(np.dtype(fields), where)
        except (ValueError, TypeError) as e:
            raise MetadataError(f"{where}: {e}") from None
    raise MetadataError(f"{where}: must be a dtype string or a list of fields, not {value!r}")


def parse_fill_value(dtype: np.dtype, value: object, where: str) -> np.ndarray | np.generic:
    """A fill value of a NumPy-only type: an integer for datetimes (NaT is -2**63), a string for
    text, base64 (or a list of byte values) for bytes and structs."""
    kind = dtype.kind
    if kind in "Mm":
        if value == "NaT":
            value = -(2**63)
        if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
            raise MetadataError(f"{where}: a {dtype} fill value must be a 64-bit integer, not {value!r}")
        return np.array(value, "<i8").view(dtype)
    if kind == "U":
        if not isinstance(value, str) or len(value) > dtype.itemsize // 4:
            raise MetadataError(f"{where}: a {dtype} fill value must be a string of at most "
                                f"{dtype.itemsize // 4} characters, not {value!r}")
        return np.array(value, dtype)
    raw = _bytes(value, where)
    if len(raw) > dtype.itemsize or (dtype.kind != "S" and len(raw) not in (0, dtype.itemsize)):
        raise MetadataError(f"{where}: a {dtype} fill value must have {dtype.itemsize} bytes, not {len(raw)}")
    element: np.generic = np.frombuffer(raw.ljust(dtype.itemsize, b"\0"), dtype)[0]
    return element


def variable_length_fill(name: str, value: object, where: str) -> object:
    """The fill value of a variable-length type: a string, or base64 bytes; of JSON values (v2's
    json2 codec), any JSON value, null for none."""
    if name == "json2":
        return value
    if value is None:
        return b"" if name in BYTES_TYPES else ""
    if name in BYTES_TYPES:
        return _bytes(value, where)
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # zarr v2 wrote 0: read as "0", as zarr-python does
        return str(value)
    if not isinstance(value, str):
        raise MetadataError(f"{where}: a {name} fill value must be a string, not {value!r}")
    return value


def _bytes(value: object, where: str) -> bytes:
    if isinstance(value, str):
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise MetadataError(f"{where}: {value[:40]!r} is not base64") from None
    if isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value):
        return bytes(value)
    raise MetadataError(f"{where}: a byte fill value must be base64 or a list of byte values, not {value!r}")


def fill_value_json(dtype: np.dtype, fill: np.ndarray) -> int | str:
    fill = np.asarray(fill)
    if dtype.kind in "Mm":
        return int(fill.view("<i8"))
    if dtype.kind == "U":
        return str(fill)
    return base64.b64encode(fill.tobytes()).decode("ascii")
