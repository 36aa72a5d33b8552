"""Extended attributes: what an array is, for `getfattr`, GIO and scripts; user.zarr.attr.KEY
sets and removes one attribute of the node (shaping.py).

    user.zarr.shape, user.zarr.dtype, user.zarr.dimension_names, user.zarr.chunk_shape,
    user.zarr.codecs, user.zarr.attributes   JSON, on every file of an array
    user.zarr.attributes                      JSON, on a group's directory and documents
    user.mime_type                            on every file (the freedesktop.org attribute)

Values are made from the parsed metadata alone, as the sidecar is. Names outside user.* (the
security.selinux and system.posix_acl_access that `ls -l` asks of every file) are answered
ENOTSUP, "not supported by this file system": coreutils' ls then stops asking for the rest of
the mount, where ENODATA ("this file has none") made it ask again for each file, two requests
an entry that the kernel does not cache. With -o noxattr every request is answered ENOSYS,
which the kernel remembers: it asks no more and answers ENOTSUP itself.
"""

import errno
import json

from zarrfs.fuse.errno_boundary import errno_boundary, fail
from zarrfs.fs.hierarchy import DATA, DIR, DOCUMENT, GROUPFILE, HEADER, PREVIEW, SIDECAR, TEXT, Entry
from zarrfs.format.v3 import ArrayMetadata

OCTETS, JSON, TEXT_PLAIN = "application/octet-stream", "application/json", "text/plain"
HEADER_TYPES = {"envi": TEXT_PLAIN, "mhd": TEXT_PLAIN, "nrrd": TEXT_PLAIN, "vrt": "application/xml",
                "nifti": OCTETS}  # by view; any other header is bytes to a guesser


def _json(value) -> bytes:
    return json.dumps(value, separators=(", ", ": ")).encode()


def mime_type(entry: Entry) -> str | None:
    if entry.kind == DATA:
        return OCTETS
    if entry.kind in (SIDECAR, DOCUMENT):
        return JSON
    if entry.kind == TEXT:
        return TEXT_PLAIN
    if entry.kind == PREVIEW:
        return "image/png"
    if entry.kind == HEADER:
        return HEADER_TYPES.get(entry.view, OCTETS)
    if entry.kind == GROUPFILE:  # zarr.h5, zarr.nc
        return "application/x-netcdf" if entry.stem.endswith(".nc") else "application/x-hdf5"
    return None  # a directory: file managers know it already


ARRAY_NAMES = ("user.zarr.shape", "user.zarr.dtype", "user.zarr.dimension_names", "user.zarr.chunk_shape",
               "user.zarr.codecs", "user.zarr.attributes")


def names(entry: Entry) -> list[str]:
    """The entry's attribute names, without making their values (listxattr)."""
    meta = entry.node.meta
    found = list(ARRAY_NAMES) if _describes_array(entry) else ["user.zarr.attributes"] if meta is not None else []
    return found + ["user.mime_type"] if mime_type(entry) is not None else found


def _describes_array(entry: Entry) -> bool:
    return isinstance(entry.node.meta, ArrayMetadata) and entry.kind != DIR


def extended_attributes(entry: Entry) -> dict[str, bytes]:
    """Name -> value of every attribute of the entry."""
    found = {}
    meta = entry.node.meta
    if _describes_array(entry):
        names = meta.dimension_names
        if names is None and isinstance(meta.attributes.get("_ARRAY_DIMENSIONS"), list):
            names = meta.attributes["_ARRAY_DIMENSIONS"]
        found = {
            "user.zarr.shape": _json(list(meta.shape)),
            "user.zarr.dtype": _json(None if meta.data_type.numpy.kind == "O" else meta.data_type.array_interface),
            "user.zarr.dimension_names": _json(None if names is None else list(names)),
            "user.zarr.chunk_shape": _json(list(meta.chunk_shape)),
            "user.zarr.codecs": _json(list(meta.codecs)),
            "user.zarr.attributes": _json(meta.attributes),
        }
    elif meta is not None:
        found = {"user.zarr.attributes": _json(meta.attributes)}
    mime = mime_type(entry)
    if mime is not None:
        found["user.mime_type"] = mime.encode()
    return found


class ExtendedAttributes:
    """The extended-attribute methods of Operations (which gives _entry, shaping and options)."""

    def _supported(self, name: str | None = None) -> None:
        if not self.options.xattrs:
            fail(errno.ENOSYS)
        if name is not None and not name.startswith("user."):
            fail(errno.ENOTSUP)

    @errno_boundary
    def listxattr(self, path):
        self._supported()
        return [] if self.shaping.draft_at(path) else names(self._entry(path))

    @errno_boundary
    def getxattr(self, path, name, position=0):
        self._supported(name)
        if self.shaping.draft_at(path):
            fail(errno.ENODATA)
        value = extended_attributes(self._entry(path)).get(name)
        return value if value is not None else fail(errno.ENODATA)

    @errno_boundary
    def setxattr(self, path, name, value, options, position=0):
        """user.zarr.attr.KEY sets one of the node's attributes (shaping.py)."""
        self._supported(name)
        self.shaping.setxattr(path, name, value, options)
        return 0

    @errno_boundary
    def removexattr(self, path, name):
        self._supported(name)
        self.shaping.removexattr(path, name)
        return 0
