"""Header views: files beside NAME.bin that let legacy tools open it without typing.

Each format is a small module with one pure function, `header(info) -> bytes | None`, from the
array's description to the bytes of its header, or None when the format cannot express the
data type or shape honestly. `VIEWS` is the registry; `hierarchy` asks it which files an array
has, and nothing here reads a chunk.
"""

from dataclasses import dataclass
from typing import Callable

from zarrfs.views import envi, mhd, nifti, npy, nrrd, vrt
from zarrfs.views.info import ArrayInfo, info_of


@dataclass(frozen=True)
class View:
    name: str  # the word in -o views=...
    suffix: str  # the file name is stem + suffix
    header: Callable[[ArrayInfo], bytes | None]
    prefixed: bool = False  # the file is the header followed by the data (writable past the header)
    alias: str = ""  # suffix of a second file that is the data itself (NIfTI's .img)


VIEWS = {
    "npy": View("npy", ".npy", npy.header, prefixed=True),
    "envi": View("envi", ".bin.hdr", envi.header),
    "mhd": View("mhd", ".mhd", mhd.header),
    "nrrd": View("nrrd", ".nhdr", nrrd.header),
    "vrt": View("vrt", ".vrt", vrt.header),
    "nifti": View("nifti", ".hdr", nifti.header, alias=".img"),
}
DEFAULT_VIEWS = ("npy", "envi", "mhd", "nrrd", "vrt")

__all__ = ["VIEWS", "DEFAULT_VIEWS", "View", "ArrayInfo", "info_of"]
