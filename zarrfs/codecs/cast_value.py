"""cast_value (zarr-extensions, codecs/cast_value): an array->array codec that converts each
value to another integer or float type by its numerical value: a scalar_map first, then an exact
value, then rounding (`rounding`) and the out-of-range rule (`out_of_range`); anything else fails
(an encode: EncodeError, the write stays dirty; a decode: CorruptChunkError).

Every supported value is exact in NumPy's 80-bit long double (64-bit significand: int64, uint64
and float64 all fit), so each conversion goes through it and rounds once. ml_dtypes converts to
its types through float32, so the nearest value is given to it rounded to odd at float64 and at
float32, which makes its final rounding the right one (Boldo and Melquiond)."""

import ml_dtypes
import numpy as np

from zarrfs.codecs.base import ArrayArrayCodec, ChunkSpec
from zarrfs.errors import CorruptChunkError, EncodeError, MetadataError, UnsupportedError
from zarrfs.format import ml_types
from zarrfs.format.data_types import DataType, parse_data_type

ROUNDING = ("nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away")
OUT_OF_RANGE = (None, "clamp", "wrap")
_INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", *ml_types.INTS}
_FLOATS = {"float16", "float32", "float64", *ml_types.FLOATS}
LONG = np.longdouble
ScalarMap = list[tuple[np.longdouble, np.ndarray]]  # (key as a long double, value as the target's 0-d array)
Raise = type[Exception]  # what a value that cannot be cast raises: EncodeError, CorruptChunkError, ValueError


def numeric_kind(dt: DataType) -> str | None:
    """'i' for the integer types, 'f' for the float types cast_value takes, else None."""
    return "i" if dt.name in _INTS else "f" if dt.name in _FLOATS else None


def int_range(dt: DataType) -> tuple[int, int]:
    if dt.name in ml_types.INTS:
        return ml_types.int_range(dt.name)
    info = np.iinfo(dt.numpy)
    return int(info.min), int(info.max)


class CastValueCodec(ArrayArrayCodec):

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        unknown = set(config) - {"data_type", "rounding", "out_of_range", "scalar_map"}
        if unknown:
            raise MetadataError(f"{where}: unknown configuration members {sorted(unknown)}")
        if "data_type" not in config:
            raise MetadataError(f"{where}: missing configuration.data_type")
        self.source = spec.data_type
        self.target = parse_data_type(config["data_type"], f"{where}: data_type")
        for dt in (self.source, self.target):
            if numeric_kind(dt) is None:
                raise UnsupportedError(f"{where}: cast_value takes integer and float types, not {dt.name}")
        self.rounding = config.get("rounding", "nearest-even")
        self.out_of_range = config.get("out_of_range")
        if self.rounding not in ROUNDING:
            raise MetadataError(f"{where}: rounding must be one of {list(ROUNDING)}, not {self.rounding!r}")
        if self.out_of_range not in OUT_OF_RANGE:
            raise MetadataError(f"{where}: out_of_range must be 'clamp' or 'wrap', not {self.out_of_range!r}")
        if self.out_of_range == "wrap" and numeric_kind(self.target) != "i":
            raise MetadataError(f"{where}: out_of_range 'wrap' needs an integer data_type, not {self.target.name}")
        scalar_map = config.get("scalar_map") or {}
        if not isinstance(scalar_map, dict) or set(scalar_map) - {"encode", "decode"}:
            raise MetadataError(f"{where}: scalar_map must be an object with 'encode' and 'decode' lists")
        self.encode_map = _scalar_map(scalar_map.get("encode"), self.source, self.target, f"{where}: scalar_map.encode")
        self.decode_map = _scalar_map(scalar_map.get("decode"), self.target, self.source, f"{where}: scalar_map.decode")
        self.spec = spec
        self.target_fill = self._fill(spec.fill_value, where)

    def _fill(self, fill: np.ndarray, where: str) -> np.ndarray:
        """The fill value cast, which must come back as itself (the spec's round-trip rule)."""
        try:
            cast = self._cast(np.asarray(fill).reshape(1), self.source, self.target, self.encode_map, ValueError)
            back = self._cast(cast, self.target, self.source, self.decode_map, ValueError)
        except ValueError as e:
            raise MetadataError(f"{where}: the fill value cannot be cast to {self.target.name} ({e})") from None
        if not _same_values(back, np.asarray(fill).reshape(1), self.source):
            raise MetadataError(f"{where}: the fill value does not survive the cast to {self.target.name} and back")
        return cast.reshape(())

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(spec.shape, self.target, self.target_fill)

    def encode(self, array: np.ndarray) -> np.ndarray:
        return self._cast(array, self.source, self.target, self.encode_map, EncodeError)

    def decode(self, array: np.ndarray) -> np.ndarray:
        return self._cast(array, self.target, self.source, self.decode_map, CorruptChunkError)

    def encoded_size(self, nbytes: int) -> int | None:
        return nbytes // self.source.itemsize * self.target.itemsize

    def _cast(self, array: np.ndarray, source: DataType, target: DataType, scalar_map: ScalarMap,
              error: Raise) -> np.ndarray:
        x = _long(array, source)
        out = np.empty(x.shape, target.numpy)
        mapped = np.zeros(x.shape, bool)
        for key, value in scalar_map:
            hit = ~mapped & (np.isnan(x) if np.isnan(key) else x == key)
            out[hit] = value
            mapped |= hit
        rest = ~mapped
        if rest.any():
            if numeric_kind(target) == "i":
                out[rest] = self._to_int(x[rest], target, error)
            else:
                out[rest] = self._to_float(x[rest], target, error)
        return out

    def _to_int(self, x: np.ndarray, target: DataType, error: Raise) -> np.ndarray:
        if not np.isfinite(x).all():
            raise error(f"cast_value: NaN or infinity has no {target.name} value (no scalar_map entry for it)")
        x = _round_integer(x, self.rounding)
        low, high = int_range(target)
        outside = (x < low) | (x > high)
        if outside.any():
            if self.out_of_range is None:
                raise error(f"cast_value: {x[outside][0]} is outside {target.name}'s range {low}..{high}")
            if self.out_of_range == "clamp":
                x = np.clip(x, LONG(low), LONG(high))
            else:  # two's complement: congruent modulo 2**bits
                span = LONG(high - low + 1)
                x = np.mod(x - LONG(low), span) + LONG(low)
        return x.astype(np.int64 if low < 0 else np.uint64).astype(target.numpy)

    def _to_float(self, x: np.ndarray, target: DataType, error: Raise) -> np.ndarray:
        if target.name in ml_types.FLOATS:
            for special, what in ((np.nan, "NaN"), (np.inf, "infinity")):
                if (np.isnan(x) if what == "NaN" else np.isinf(x)).any() and not ml_types.has_value(target.numpy, special):
                    raise error(f"cast_value: {target.name} has no {what} (no scalar_map entry for it)")
        out = np.empty(x.shape, target.numpy)
        largest = _largest(target)
        big = np.isfinite(x) & (np.abs(x) > largest)
        out[~big] = _directed(x[~big], _nearest(x[~big], target), target, self.rounding)
        if big.any():
            out[big] = self._beyond(x[big], largest, target, error)
        return out

    def _beyond(self, x: np.ndarray, largest: np.longdouble, target: DataType, error: Raise) -> np.ndarray:
        """Values past the largest finite one: rounded to it where the rounding allows (within
        half a step for the nearest roundings, a whole step toward zero), else out of range."""
        ulp = largest - _long(_step(_largest_array(target), target, -1), target)[0]
        positive = x > 0
        limit = largest + (ulp / 2 if self.rounding.startswith("nearest") else ulp)
        away = {"towards-positive": positive, "towards-negative": ~positive}.get(self.rounding, np.zeros(x.shape, bool))
        fits = (np.abs(x) < limit) & ~away
        if not fits.all() and self.out_of_range is None:
            raise error(f"cast_value: {x[~fits][0]} is outside {target.name}'s finite range")
        has_inf = target.name not in ml_types.FLOATS or ml_types.has_value(target.numpy, np.inf)
        bound = np.where(fits | ~np.array(has_inf), largest, LONG(np.inf))
        return np.where(positive, bound, -bound).astype(np.float64).astype(target.numpy)


def _long(array: np.ndarray, dt: DataType) -> np.ndarray:
    """Values as long doubles, exactly (ml_dtypes' floats through float32, which holds them all)."""
    array = np.asarray(array).reshape(-1)
    with np.errstate(invalid="ignore"):  # NaNs stay NaNs
        if dt.name in ml_types.FLOATS:
            return array.astype(np.float32).astype(LONG)
        return array.astype(LONG)


def _round_integer(x: np.ndarray, rounding: str) -> np.ndarray:
    rounded: np.ndarray  # NumPy's ufuncs are typed to return Any
    if rounding == "nearest-even":
        rounded = np.rint(x)
    elif rounding == "towards-zero":
        rounded = np.trunc(x)
    elif rounding == "towards-positive":
        rounded = np.ceil(x)
    elif rounding == "towards-negative":
        rounded = np.floor(x)
    else:
        rounded = np.sign(x) * np.floor(np.abs(x) + LONG(0.5))  # nearest-away
    return rounded


def _to_odd(values: np.ndarray, narrower: np.dtype, bits: str) -> np.ndarray:
    """`values` rounded to odd in `narrower`: truncated toward zero, the last bit set when inexact."""
    with np.errstate(all="ignore"):
        near = values.astype(narrower)
    wide = near.astype(values.dtype)
    inexact = np.isfinite(values) & (wide != values)
    over = inexact & (np.abs(wide) > np.abs(values))
    near[over] = np.nextafter(near[over], narrower.type(0))
    near[inexact] = (near[inexact].view(bits) | 1).view(narrower)
    return near


def _nearest(x: np.ndarray, target: DataType) -> np.ndarray:
    """The nearest value of the target type, ties to even; past the largest, an infinity or NaN."""
    with np.errstate(all="ignore"):
        if target.name not in ml_types.FLOATS:
            return x.astype(target.numpy)
        single = _to_odd(_to_odd(x, np.dtype(np.float64), "u8"), np.dtype(np.float32), "u4")
        return single.astype(target.numpy)


def _directed(x: np.ndarray, nearest: np.ndarray, target: DataType, rounding: str) -> np.ndarray:
    """Nearest-even moved one step where a directed or ties-away rounding wants the neighbour."""
    if rounding == "nearest-even":
        return nearest
    value = _long(nearest, target)
    finite = np.isfinite(x)
    toward_zero = nearest.copy()
    beyond = finite & ((np.abs(value) > np.abs(x)) | ~np.isfinite(value))
    toward_zero[beyond] = _step(nearest[beyond], target, -1)
    tz = _long(toward_zero, target)
    inexact = finite & (tz != x)
    away = toward_zero.copy()
    away[inexact] = _step(toward_zero[inexact], target, +1)
    if rounding == "towards-zero":
        return toward_zero
    if rounding == "towards-positive":
        return np.where(inexact & (x > 0), away, toward_zero)
    if rounding == "towards-negative":
        return np.where(inexact & (x < 0), away, toward_zero)
    aw = _long(away, target)
    return np.where(inexact & (np.abs(aw - x) <= np.abs(x - tz)), away, toward_zero)  # nearest-away


def _step(values: np.ndarray, target: DataType, direction: int) -> np.ndarray:
    """The neighbour of each finite value away from zero (+1) or toward it (-1): floats are sign
    and magnitude, so the magnitude's bits move by one."""
    if values.size == 0:
        return values
    bits = f"u{target.itemsize}"
    raw = values.view(bits).copy()
    width = ml_types.TYPES[target.name].bits if target.name in ml_types.FLOATS else target.itemsize * 8
    sign = raw.dtype.type(1) << raw.dtype.type(width - 1) if target.name != "float8_e8m0fnu" else raw.dtype.type(0)
    magnitude = raw & ~sign if sign else raw
    magnitude = magnitude + 1 if direction > 0 else magnitude - (magnitude > 0)
    return ((raw & sign) | magnitude.astype(raw.dtype)).view(target.numpy) if sign else \
        magnitude.astype(raw.dtype).view(target.numpy)


def _largest_array(target: DataType) -> np.ndarray:
    info = ml_dtypes.finfo(target.numpy) if target.name in ml_types.FLOATS else np.finfo(target.numpy)
    return np.array([info.max], target.numpy)


def _largest(target: DataType) -> np.longdouble:
    largest: np.longdouble = _long(_largest_array(target), target)[0]
    return largest


def _scalar_map(entries: object, source: DataType, target: DataType, where: str) -> ScalarMap:
    """[(key as a long double, value as the target's 0-d array)], first occurrence of a key wins."""
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(e, list) and len(e) == 2 for e in entries):
        raise MetadataError(f"{where}: must be a list of [input, output] pairs")
    out: ScalarMap = []
    seen: list[np.longdouble] = []
    for i, (key, value) in enumerate(entries):
        k = _long(source.fill_value(key, f"{where}[{i}][0]").reshape(1), source)[0]
        if any(np.isnan(k) and np.isnan(s) or k == s for s in seen):
            continue
        seen.append(k)
        out.append((k, target.fill_value(value, f"{where}[{i}][1]")))
    return out


def _same_values(a: np.ndarray, b: np.ndarray, dt: DataType) -> bool:
    la, lb = _long(a, dt), _long(b, dt)
    return bool(np.all((la == lb) | (np.isnan(la) & np.isnan(lb))))
