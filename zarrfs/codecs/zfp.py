"""zfp (zarr-extensions, codecs/zfp): an array->bytes codec through zfpy, the zfp library's
Python binding, when it is installed: the stream without zfp's header (the configuration says
all it would), fields of up to four dimensions (a 0-d chunk is one value), float32, float64,
int32 and int64. Without zfpy the codec is refused, naming the package."""

import numpy as np

from zarrfs.codecs.base import ArrayBytesCodec, ChunkSpec
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError, EncodeError, MetadataError, UnsupportedError

MODES = {"reversible": (), "fixed_accuracy": ("tolerance",), "fixed_rate": ("rate",),
         "fixed_precision": ("precision",), "expert": ("minbits", "maxbits", "maxprec", "minexp")}
_TYPES = {"float32", "float64", "int32", "int64"}


class ZfpCodec(ArrayBytesCodec):

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        try:
            import zfpy
        except ImportError:
            raise UnsupportedError(f"{where}: codec 'zfp' needs the Python package 'zfpy' (pip install zfpy)") from None
        mode = config.get("mode")
        if mode not in MODES or set(config) != {"mode", *MODES[mode]}:
            raise MetadataError(f"{where}: mode must be one of {sorted(MODES)} with its parameters, not {config!r}")
        if mode == "expert":
            raise UnsupportedError(f"{where}: zfpy has no expert mode")
        if spec.data_type.name not in _TYPES or len(spec.shape) > 4:
            raise UnsupportedError(f"{where}: zfp takes float32, float64, int32 and int64 chunks of up to 4 "
                                   f"dimensions, not {spec.data_type.name} {list(spec.shape)}")
        self.zfpy, self.spec = zfpy, spec
        self.options = {"tolerance": config.get("tolerance", -1), "rate": config.get("rate", -1),
                        "precision": config.get("precision", -1)}

    def encode(self, array: np.ndarray) -> bytes:
        try:
            stream: bytes = self.zfpy.compress_numpy(np.ascontiguousarray(array).reshape(self._field()),
                                                     write_header=False, **self.options)
            return stream
        except Exception as e:  # zfpy raises RuntimeError, TypeError...
            raise EncodeError(f"zfp cannot encode this chunk ({e})") from None

    def decode(self, data: BytesLike) -> np.ndarray:
        ztype = self.zfpy.dtype_to_ztype(self.spec.data_type.numpy)
        try:
            out = self.zfpy._decompress(bytes(data), ztype, list(self._field()), **self.options)
        except Exception as e:
            raise CorruptChunkError(f"undecodable zfp stream ({e})") from None
        return np.asarray(out, self.spec.data_type.numpy).reshape(self.spec.shape)

    def _field(self) -> tuple[int, ...]:
        return self.spec.shape or (1,)
