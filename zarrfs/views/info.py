"""What a header says about an array: shape, data type, axis names, attributes, data file."""

import functools
import math
from dataclasses import dataclass

import numpy as np

from zarrfs import names
from zarrfs.format.v3 import ArrayMetadata


@dataclass(frozen=True)
class ArrayInfo:
    name: str  # the array's name, for descriptions
    shape: tuple[int, ...]
    dtype: np.dtype  # of the flat file: little-endian (bool one byte, r* as |V n)
    data_type: str  # see type_name
    dimension_names: tuple[str | None, ...] | None
    attributes: dict
    data_file: str | None  # NAME.bin, relative to the header; None when the name is no UTF-8 text
    georef: object = None  # a views.georef.Georef, where the metadata gives one
    ome: object = None  # a views.ome.Image, where the array is a level of an OME-Zarr image

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def plane(self) -> tuple[int, int]:
        """(lines, samples) of a 2-D raster: the last two axes, a 1-D array as one line."""
        return (self.shape[-2] if len(self.shape) > 1 else 1), self.shape[-1]

    @property
    def bands(self) -> int:
        """Leading axes folded into bands, one per 2-D plane."""
        return math.prod(self.shape[:-2])


def dimension_names(meta: ArrayMetadata) -> tuple[str | None, ...] | None:
    """`dimension_names`, else xarray's `_ARRAY_DIMENSIONS` attribute, else None."""
    if meta.dimension_names is not None:
        return tuple(meta.dimension_names)
    names = meta.attributes.get("_ARRAY_DIMENSIONS")
    if isinstance(names, list) and len(names) == len(meta.shape) and all(isinstance(n, str) for n in names):
        return tuple(names)
    return None


def info_of(meta: ArrayMetadata, name: str, data_file: str, georef=None, ome=None) -> ArrayInfo:
    name = "".join(c if c.isprintable() else "?" for c in name)  # it only goes into descriptions
    return ArrayInfo(name, tuple(meta.shape), meta.data_type.numpy, type_name(meta.data_type.numpy),
                     dimension_names(meta), meta.attributes, names.text(data_file), georef, ome)


@functools.lru_cache(maxsize=256)  # numpy's dtype.name is slow, and a listing asks per array
def type_name(dtype: np.dtype) -> str:
    """The name the formats' tables use, from the flat file's dtype (so v2 arrays, whose stored
    names differ, get the same views): int8..uint64, float16..complex128, bool, raw, or numpy's
    own name (datetime64[s], ...) that no table but npy's knows."""
    if not numpy_own(dtype):  # bfloat16, float8_e4m3..., structs of them: a name no format's table knows
        return dtype.name if dtype.fields is None else "struct of ml_dtypes types"
    return {"b": "bool", "V": "raw"}.get(dtype.kind, dtype.name)


def numpy_own(dtype: np.dtype) -> bool:
    """NumPy itself has the type (and every field's): not ml_dtypes' bfloat16, float8..., whose
    .npy descr would be a raw '<V2' that NumPy reads without ml_dtypes as bytes."""
    if dtype.fields is not None:
        return all(numpy_own(dtype.fields[name][0]) for name in dtype.names)
    return dtype.type.__module__ != "ml_dtypes"


def plain(text: str | None) -> bool:
    """A name a line-based header can hold as a value: UTF-8 text, no whitespace (which would
    start a file-name pattern in MetaImage and NRRD) and no control characters."""
    return text is not None and text.isprintable() and not any(c.isspace() for c in text)


def data_file_field(data_file: str) -> str | None:
    """The data file as MetaImage's ElementDataFile and NRRD's `data file` can name it, None when
    they cannot. Their readers (MetaIO in ITK, SimpleITK and VTK; teem) read white space or a `%`
    as a printf pattern of numbered files, with no escape, and a value starting with LIST as a
    list of files: a LIST name is written ./NAME.bin, which each reads as the file beside the
    header (verified with SimpleITK, pynrrd and teem's unu; see docs/views.md)."""
    if not plain(data_file) or "%" in data_file:
        return None
    return "./" + data_file if data_file.startswith("LIST") else data_file


def raster(info: ArrayInfo) -> bool:
    """Raster formats need at least one element on at least one axis."""
    return len(info.shape) >= 1 and info.size > 0
