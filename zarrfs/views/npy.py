"""NAME.npy: NumPy's format, version 1.0 (2.0 past 64 KiB of header): the header, then the same
bytes as NAME.bin. Every NumPy data type fits, float16 and raw `|V n` included; ml_dtypes' (bfloat16,
float8...) do not: NumPy without ml_dtypes would read them as raw bytes."""

import functools
import io

import numpy as np

from zarrfs.views.info import ArrayInfo, numpy_own


def header(info: ArrayInfo) -> bytes | None:
    if not numpy_own(info.dtype):
        return None
    return _header(info.dtype, info.shape)


@functools.lru_cache(maxsize=1024)  # arrays of one listing often share type and shape
def _header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    fields = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    out = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(out, fields)
    except ValueError:  # a header of more than 65535 bytes (thousands of dimensions)
        out = io.BytesIO()
        np.lib.format.write_array_header_2_0(out, fields)
    return out.getvalue()
