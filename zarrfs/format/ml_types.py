"""The registered data types NumPy itself lacks: bfloat16, the float8/float6/float4 family,
int2/int4/uint2/uint4 and the complex_* variants (zarr-extensions, data-types/), through
ml_dtypes, the library tensorstore and JAX use.

How each shows in NAME.bin (docs/data-types.md): its natural width, never packed. A sub-byte
type takes one byte: floats and unsigned integers with the upper bits zero, signed integers
sign-extended to int8. So int2/int4 live in memory as int8 and uint2/uint4 as uint8 (NumPy's
own types, which the npy view can name); the floats are ml_dtypes' types, whose sub-byte
values ml_dtypes keeps in the low bits of a byte with the upper bits zero.
"""

import math
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np

from zarrfs.errors import InvalidValueError, MetadataError


@dataclass(frozen=True)
class MlType:
    numpy: np.dtype  # the in-memory (and NAME.bin) element type
    bits: int  # the width the stored value carries; below 8 the upper bits of its byte are ignored
    spelling: str | list  # the sidecar's `dtype`: NumPy's or ml_dtypes' name for it


def _float(name: str) -> MlType:
    dtype = np.dtype(getattr(ml_dtypes, name))
    return MlType(dtype, ml_dtypes.finfo(dtype).bits, name)


def _int(name: str, bits: int, signed: bool) -> MlType:
    return MlType(np.dtype("i1" if signed else "u1"), bits, name)


def _complex(part_name: str) -> MlType:
    """Real then imaginary, each as the part type: in memory a struct of two parts, which NumPy
    byte-swaps part by part (ml_dtypes' complex32 swaps all four bytes as one). The sidecar names
    ml_dtypes' complex32 and bcomplex32, whose bytes are the same; the others have no name."""
    part = FLOATS[part_name] if part_name in FLOATS else MlType(np.dtype("<f2"), 16, "<f2")
    dtype = np.dtype([("real", part.numpy), ("imag", part.numpy)])
    own = {"float16": "complex32", "bfloat16": "bcomplex32"}.get(part_name)
    return MlType(dtype, part.bits, own or [["real", part.spelling], ["imag", part.spelling]])


FLOATS = {name: _float(name) for name in (  # float8_e4m3fn: unregistered, but tensorstore writes it
    "bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")}
INTS = {"int2": _int("int2", 2, True), "int4": _int("int4", 4, True),
        "uint2": _int("uint2", 2, False), "uint4": _int("uint4", 4, False)}
_COMPLEX_NUMPY: dict[str, np.dtype] = {"complex_float32": np.dtype("<c8"), "complex_float64": np.dtype("<c16")}
COMPLEX = {f"complex_{name}": _complex(name) for name in ("float16", *FLOATS)}
TYPES = {**FLOATS, **INTS, **COMPLEX}


def numpy_alias(name: str) -> np.dtype | None:
    """complex_float32 and complex_float64 are NumPy's complex64 and complex128 under another name."""
    return _COMPLEX_NUMPY.get(name)


def is_ml(name: str) -> bool:
    return name in TYPES


def sub_byte(name: str) -> bool:
    """Stored in a byte whose upper bits are ignored: decoded values must be cleaned of them."""
    return name in TYPES and 0 < TYPES[name].bits < 8


def int_range(name: str) -> tuple[int, int]:
    bits = INTS[name].bits
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if name.startswith("int") else (0, (1 << bits) - 1)


def normalise(name: str, array: np.ndarray) -> np.ndarray:
    """Stored bytes of a sub-byte type as NAME.bin shows them: the upper bits dropped (zero),
    or for int2/int4 the sign bit copied into them. Returns a new array."""
    bits = TYPES[name].bits
    raw = np.ascontiguousarray(array).view("u1")
    if name in INTS and name.startswith("int"):
        shift = 8 - bits
        signed: np.ndarray = np.left_shift(raw, shift).view("i1") >> shift
        return signed.view(array.dtype)
    return (raw & ((1 << bits) - 1)).view(array.dtype)


def check_values(name: str, elements: np.ndarray, where: str) -> None:
    """A write through NAME.bin of a sub-byte type: every byte must be a value of the type as
    NAME.bin shows it (upper bits zero, or the sign copied); anything else is invalid."""
    if not sub_byte(name):
        return
    if (normalise(name, elements).view("u1") != np.ascontiguousarray(elements).view("u1")).any():
        if name in INTS:
            low, high = int_range(name)
            raise InvalidValueError(f"{where}: a value outside {name}'s range {low}..{high}")
        raise InvalidValueError(f"{where}: a {name} byte with bits set above its {TYPES[name].bits} bits")


def stored_bits(name: str, array: np.ndarray) -> np.ndarray:
    """What the bytes codec stores for a sub-byte type: the low bits, upper bits zero (as
    ml_dtypes and tensorstore write them; the spec recommends a consistent value)."""
    bits = TYPES[name].bits
    return (np.ascontiguousarray(array).view("u1") & ((1 << bits) - 1)).view(array.dtype)


def from_number(name: str, dtype: np.dtype, exact: Fraction | None, double: float) -> np.ndarray:
    """A JSON number as the type's nearest value (ties to even), from its exact value when known
    (`double`: the nearest float64, else the value itself). ml_dtypes converts through float32,
    so it is given float32 rounded to odd, which one more rounding turns into the nearest value
    (Boldo and Melquiond). Past the largest finite value of a type without infinities: that
    largest value, the nearest there is (ml_dtypes would answer NaN for some). float8_e8m0fnu
    has no zero and no sign: at or below its smallest value, that value (0x00), as tensorstore."""
    if name == "float8_e8m0fnu" and double <= float(ml_dtypes.finfo(dtype).tiny):
        return np.zeros((), "u1").view(dtype)
    single = _odd_float32(exact) if exact is not None and math.isfinite(double) else np.float32(double)
    with np.errstate(all="ignore"):
        out = np.array(single, np.float32).astype(dtype)
    if math.isfinite(double) and not np.isfinite(out.astype(np.float64)) and not has_value(dtype, math.inf):
        largest = ml_dtypes.finfo(dtype).max
        out = np.array(largest if double > 0 else -largest, dtype)
    return out


def _odd_float32(exact: Fraction) -> np.float32:
    """The float32 nearest `exact` rounded to odd: truncated toward zero, its last bit set when
    inexact."""
    with np.errstate(all="ignore"):
        near = np.float32(float(exact)) if abs(exact) < 2**128 else np.float32(math.copysign(math.inf, exact))
    if not np.isfinite(near) or Fraction(float(near)) == exact:
        return near
    if abs(Fraction(float(near))) > abs(exact):
        near = np.nextafter(near, np.float32(0))
    return np.float32(np.array(near).view("u4").__or__(1).view(np.float32))


def has_value(dtype: np.dtype, value: float) -> bool:
    """The type represents this special value (NaN, +-Infinity) rather than saturating or
    turning it into another value: float4_e2m1fn has neither, the fnuz types no infinity."""
    with np.errstate(all="ignore"):
        converted = np.array(value).astype(dtype).astype(np.float64)
    return bool(np.isnan(converted)) if np.isnan(value) else bool(converted == value)


def check_fill_bits(name: str, bits: int, text: str, where: str) -> None:
    width = TYPES[name].bits if name in FLOATS else 0
    if width and bits >> width:
        raise MetadataError(f"{where}: {text!r} is wider than {name}'s {width} bits")
