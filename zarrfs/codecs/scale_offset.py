"""scale_offset (zarr-extensions, codecs/scale_offset): an array->array codec, encode
`(x - offset) * scale`, decode `x / scale + offset`, in the arithmetic of the array's own type.
A value that leaves the type (an integer overflow, a finite float become infinite) fails the
chunk. Integer division truncates toward zero (as Rust's checked_div, which zarrs uses), so a
decode is exact only for values the encode made."""

import numpy as np

from zarrfs.codecs.base import ArrayArrayCodec, ChunkSpec
from zarrfs.codecs.cast_value import LONG, int_range, numeric_kind
from zarrfs.errors import CorruptChunkError, EncodeError, MetadataError, UnsupportedError


class ScaleOffsetCodec(ArrayArrayCodec):

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        if set(config) - {"offset", "scale"}:
            raise MetadataError(f"{where}: unknown configuration members {sorted(set(config) - {'offset', 'scale'})}")
        self.dt = spec.data_type
        self.kind_of = numeric_kind(self.dt)
        if self.kind_of is None:
            raise UnsupportedError(f"{where}: scale_offset takes integer and float types, not {self.dt.name}")
        self.offset = self.dt.fill_value(config.get("offset", 0), f"{where}: offset")
        self.scale = self.dt.fill_value(config.get("scale", 1), f"{where}: scale")
        try:
            self.fill = self._encode(np.asarray(spec.fill_value).reshape(1), ValueError).reshape(())
        except ValueError as e:
            raise MetadataError(f"{where}: the fill value cannot be encoded ({e})") from None

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(spec.shape, spec.data_type, self.fill)

    def encode(self, array: np.ndarray) -> np.ndarray:
        return self._encode(array, EncodeError)

    def decode(self, array: np.ndarray) -> np.ndarray:
        if self.kind_of == "i":
            x = array.astype(LONG)
            scale = LONG(int(self.scale))
            if scale == 0:
                raise CorruptChunkError("scale_offset: an integer scale of 0 cannot be divided by")
            return self._checked(np.trunc(x / scale) + LONG(int(self.offset)), CorruptChunkError)
        with np.errstate(all="ignore"):
            out = (array / self.scale + self.offset).astype(self.dt.numpy)
        return self._finite(array, out, CorruptChunkError)

    def encoded_size(self, nbytes: int) -> int | None:
        return nbytes

    def _encode(self, array: np.ndarray, error: type[Exception]) -> np.ndarray:
        if self.kind_of == "i":
            x = array.astype(LONG)
            return self._checked((x - LONG(int(self.offset))) * LONG(int(self.scale)), error)
        with np.errstate(all="ignore"):
            out = ((array - self.offset) * self.scale).astype(self.dt.numpy)
        return self._finite(array, out, error)

    def _checked(self, x: np.ndarray, error: type[Exception]) -> np.ndarray:
        """Integer results, exact in long doubles, must fit the type."""
        low, high = int_range(self.dt)
        if ((x < low) | (x > high)).any():
            raise error(f"scale_offset: a result outside {self.dt.name}'s range {low}..{high}")
        return x.astype(np.int64 if low < 0 else np.uint64).astype(self.dt.numpy)

    def _finite(self, before: np.ndarray, after: np.ndarray, error: type[Exception]) -> np.ndarray:
        became = np.isfinite(before.astype(np.float64)) & ~np.isfinite(after.astype(np.float64))
        if became.any():
            raise error(f"scale_offset: {before[became].reshape(-1)[0]} leaves {self.dt.name}'s range")
        return after
