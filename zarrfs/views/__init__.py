"""Header views: files beside NAME.bin that let legacy tools open it without typing.

Each format is a small module with one pure function, `header(info) -> bytes | None`, from the
array's description to the bytes of its header, or None when the format cannot express the
data type or shape honestly (the TIFF header is bytes-like, made on demand: views/tiff.py).
`VIEWS` is the registry; `hierarchy` asks it which files an array has, and nothing here reads
a chunk.
"""

from dataclasses import dataclass
from typing import Callable

from zarrfs.views import envi, hdf5, mhd, nifti, npy, nrrd, tiff, vrt
from zarrfs.views.info import ArrayInfo, info_of


@dataclass(frozen=True)
class View:
    name: str  # the word in -o views=...
    suffix: str  # the file name is stem + suffix
    header: Callable[[ArrayInfo], bytes | None]
    prefixed: bool = False  # the file is the header followed by the data (writable past the header)
    read_only: bool = False  # a prefixed view none of whose bytes may be written (its header points into the data)
    alias: str = ""  # suffix of a second file that is the data itself (NIfTI's .img)


VIEWS = {
    "npy": View("npy", ".npy", npy.header, prefixed=True),
    "envi": View("envi", ".bin.hdr", envi.header),
    "mhd": View("mhd", ".mhd", mhd.header),
    # NAME.bin.nhdr, not NAME.nhdr: Bio-Formats (Fiji, QuPath) opens any X.ext with an X.nhdr beside it
    # as that NRRD, NAME.tif included; it finds X.ext.nhdr too, so NAME.bin opens as the NRRD
    "nrrd": View("nrrd", ".bin.nhdr", nrrd.header),
    "vrt": View("vrt", ".vrt", vrt.header),
    "nifti": View("nifti", ".hdr", nifti.header, alias=".img"),
    "tiff": View("tiff", ".tif", tiff.header, prefixed=True, read_only=True),
}


@dataclass(frozen=True)
class GroupView:
    """A file in every group directory describing the group and everything below it."""

    name: str
    files: tuple[str, ...]  # its names in the group's directory (the same bytes under each)
    available: Callable[[], bool]  # whether its optional dependency imports
    extra: str  # the pip extra that installs it


GROUP_VIEWS = {
    "hdf5": GroupView("hdf5", hdf5.NAMES, hdf5.available, "hdf5"),
}
DEFAULT_VIEWS = ("npy", "envi", "mhd", "nrrd", "vrt", "tiff", "hdf5")  # group views where their dependency imports
ALL_VIEWS = {**VIEWS, **GROUP_VIEWS}  # the names -o views= accepts

__all__ = ["ALL_VIEWS", "DEFAULT_VIEWS", "GROUP_VIEWS", "VIEWS", "ArrayInfo", "GroupView", "View", "info_of"]
