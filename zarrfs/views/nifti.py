"""NAME.hdr (+ NAME.img, the data itself): a NIfTI-1 pair. dim[1] is the fastest axis, so a
C-order (t, z, y, x) array is x, y, z, t. Only shapes NIfTI-1 holds: 1 to 7 dimensions, each at
most 32767. No float16 or raw types."""

import struct

from zarrfs.views.info import ArrayInfo, raster

DATATYPES = {"bool": 2, "uint8": 2, "int16": 4, "int32": 8, "float32": 16, "complex64": 32, "float64": 64,
             "int8": 256, "uint16": 512, "uint32": 768, "int64": 1024, "uint64": 1280, "complex128": 1792}
HEADER = struct.Struct("<i10s18sihbb8h3fhhhh8ffffhbbffffii80s24shh6f4f4f4f16s4s")  # nifti_1_header, 348 bytes
MAX_DIM = 32767


def header(info: ArrayInfo) -> bytes | None:
    code = DATATYPES.get(info.data_type)
    if code is None or not raster(info) or len(info.shape) > 7 or max(info.shape) > MAX_DIM:
        return None
    sizes = list(reversed(info.shape))
    dim = [len(sizes), *sizes] + [1] * (7 - len(sizes))
    pixdim = [1.0] * 8  # pixdim[0] is qfac
    description = f"zarrfs view of {info.name}".encode()[:79]
    return HEADER.pack(
        HEADER.size, b"", b"", 0, 0, b"r"[0], 0, *dim,
        0.0, 0.0, 0.0, 0,  # intent
        code, info.dtype.itemsize * 8, 0, *pixdim,
        0.0,  # vox_offset: the .img holds only the data
        0.0, 0.0,  # scl_slope 0: values as stored
        0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0,
        description, b"", 0, 0,  # no qform, no sform: voxel coordinates
        *([0.0] * 6), *([0.0] * 12), b"", b"ni1\0")
