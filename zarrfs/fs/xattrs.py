"""Extended attributes: what an array is, for `getfattr`, GIO and scripts; user.zarr.attr.KEY
sets and removes one attribute of the node (edits/hierarchy_edits.py; the FUSE adapter checks
the name here first).

    user.zarr.shape, user.zarr.dtype, user.zarr.dimension_names, user.zarr.chunk_shape,
    user.zarr.codecs, user.zarr.attributes   JSON, on every file of an array
    user.zarr.attributes                      JSON, on a group's directory and documents
    user.mime_type                            on every file (the freedesktop.org attribute)

Values are the sidecar's own (hierarchy.described), serialized compactly. Names outside user.*
(the security.selinux and system.posix_acl_access that `ls -l` asks of every file) are answered
ENOTSUP, "not supported by this file system": coreutils' ls then stops asking for the rest of
the mount, where ENODATA ("this file has none") made it ask again for each file, two requests
an entry that the kernel does not cache. With -o noxattr every request is answered ENOSYS,
which the kernel remembers: it asks no more and answers ENOTSUP itself.
"""

import errno
import json

from zarrfs.errors import RoutineError
from zarrfs.format.v3 import ArrayMetadata
from zarrfs.fs.hierarchy import (
    DATA,
    DESCRIBED,
    DIR,
    DOCUMENT,
    GROUPFILE,
    HEADER,
    NO_TRASH,
    PREVIEW,
    SIDECAR,
    TEXT,
    Entry,
    Hierarchy,
    described,
)

OCTETS, JSON, TEXT_PLAIN = "application/octet-stream", "application/json", "text/plain"
# the mount's own types (share/mime/packages/zarrfs.xml), kinds of application/octet-stream
DATA_TYPES = {"": "application/x-zarrfs-raw", "npy": "application/x-npy"}  # by view; "" is NAME.bin
HEADER_TYPES = {"envi": TEXT_PLAIN, "mhd": TEXT_PLAIN, "nrrd": TEXT_PLAIN, "vrt": "application/xml",
                "nifti": OCTETS, "tiff": "image/tiff"}  # by view; any other header is bytes to a guesser


def _json(value) -> bytes:
    return json.dumps(value, separators=(", ", ": ")).encode()


def mime_type(entry: Entry) -> str | None:
    if entry.kind == DATA:
        # NAME.bin and NAME.npy have the mount's own types, NAME.tif is an image, NAME.img bytes
        return DATA_TYPES.get(entry.view) or HEADER_TYPES.get(entry.view, OCTETS)
    if entry.kind in (SIDECAR, DOCUMENT):
        return JSON
    if entry.kind == GROUPFILE:  # zarr.h5, zarr.nc, IMAGE.ome.tif
        if entry.stem.endswith(".tif"):
            return "image/tiff"
        return "application/x-netcdf" if entry.stem.endswith(".nc") else "application/x-hdf5"
    if entry.kind == TEXT:
        return TEXT_PLAIN
    if entry.kind == PREVIEW:
        return "image/png"
    if entry.kind == HEADER:
        return HEADER_TYPES.get(entry.view, OCTETS)
    return None  # a directory: file managers know it already


ARRAY_NAMES = tuple(f"user.zarr.{field}" for field in DESCRIBED)


def names(entry: Entry) -> list[str]:
    """The entry's attribute names, without making their values (listxattr)."""
    if entry.kind == NO_TRASH:  # a note, not a node's file: it carries the root's node only to be looked up
        return []
    meta = entry.node.meta
    found = list(ARRAY_NAMES) if _describes_array(entry) else ["user.zarr.attributes"] if meta is not None else []
    return found + ["user.mime_type"] if mime_type(entry) is not None else found


def _describes_array(entry: Entry) -> bool:
    return isinstance(entry.node.meta, ArrayMetadata) and entry.kind != DIR


def extended_attributes(entry: Entry) -> dict[str, bytes]:
    """Name -> value of every attribute of the entry."""
    if entry.kind == NO_TRASH:
        return {}
    found = {}
    meta = entry.node.meta
    if _describes_array(entry):  # the sidecar's own values (hierarchy.described)
        found = {f"user.zarr.{field}": _json(value) for field, value in described(meta).items()}
    elif meta is not None:
        found = {"user.zarr.attributes": _json(meta.attributes)}
    mime = mime_type(entry)
    if mime is not None:
        found["user.mime_type"] = mime.encode()
    return found


class ExtendedAttributes:
    """What listxattr and getxattr answer for a path, and which names setxattr may be asked
    for; knows nothing of FUSE: each refusal is a RoutineError carrying its errno."""

    def __init__(self, hierarchy: Hierarchy, enabled: bool, is_draft=lambda path: False):
        self.hierarchy = hierarchy
        self.enabled = enabled
        self.is_draft = is_draft  # a file being written (drafts.py) has none

    def check(self, name: str | None = None) -> None:
        """ENOSYS when attributes are off (-o noxattr), ENOTSUP for a name outside user.*."""
        if not self.enabled:
            raise RoutineError("extended attributes are off", errno.ENOSYS)
        if name is not None and not name.startswith("user."):
            raise RoutineError(f"{name}: only user.* attributes exist here", errno.ENOTSUP)

    def list(self, path: str) -> list[str]:
        self.check()
        return [] if self.is_draft(path) else names(self._entry(path))

    def get(self, path: str, name: str) -> bytes:
        self.check(name)
        if self.is_draft(path):
            raise RoutineError(f"{path}: no attribute {name}", errno.ENODATA)
        value = extended_attributes(self._entry(path)).get(name)
        if value is None:
            raise RoutineError(f"{path}: no attribute {name}", errno.ENODATA)
        return value

    def _entry(self, path: str) -> Entry:
        entry = self.hierarchy.lookup(path)
        if entry is None:
            raise RoutineError(f"{path}: no such file", errno.ENOENT)
        return entry
