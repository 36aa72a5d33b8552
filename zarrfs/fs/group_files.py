"""The mount's side of group files (zarr.h5, zarr.nc: views/hdf5.py; IMAGE.ome.tif:
views/ome_pyramid.py): opening one, and keeping
what the kernel holds of it (size, pages) in step with the hierarchy below its group."""

import errno
import logging
import os
from collections.abc import Iterator

from zarrfs.errors import AlreadyLoggedError, RoutineError, ViewError
from zarrfs.fs.hierarchy import DIR, PYRAMID
from zarrfs.views import hdf5, ome

log = logging.getLogger(__name__)


class GroupFiles:
    """hierarchy: the Hierarchy; siblings: the kernel's caches (filesystem.KernelCaches); raw_of(node): the array's shared
    RawFile; listed_stale(): called when attributes listed before are stale."""

    def __init__(self, hierarchy, siblings, raw_of, listed_stale):
        self.hierarchy, self.siblings, self.raw_of, self.listed_stale = hierarchy, siblings, raw_of, listed_stale
        self._served: dict[str, object] = {}  # file-system path -> the layout the kernel was last shown

    def open(self, entry, path: str) -> hdf5.GroupFile:
        """The file, made (or taken from the header cache) now. When it differs from what the
        kernel was last shown, the kernel's size and pages of it are dropped before the open is
        answered: the kernel may hold pages of an older file, or a size listed before a file
        exceeded its bound (hdf5.size_bound)."""
        try:
            layout = self.hierarchy.group_file_layout(entry)
        except ViewError as e:
            what = "no OME-TIFF pyramid" if entry.view == PYRAMID else "no HDF5 view"
            log.error("%s: %s: %s", path, what, e)
            raise AlreadyLoggedError(f"{path}: {what}: {e}", e.errno) from None
        self.siblings.opened(path)
        if self._served.get(path) is not layout:
            self._served[path] = layout
            self.listed_stale()
            self.siblings.drop([path])
        return hdf5.GroupFile(layout, self._arrays())

    def _arrays(self):
        """store path -> RawFile, each looked up once for the handle."""
        found = {}

        def raw_of(store_path: str):
            if store_path not in found:
                node = self.hierarchy.node(store_path)
                if node is None or node.meta is None:
                    # gone since the file was made: its layout is stale
                    raise RoutineError(f"{store_path}: gone since the group file was made", errno.ESTALE)
                found[store_path] = self.raw_of(node)
            return found[store_path]

        return raw_of

    def above(self, path: str, node) -> list[str]:
        """The group files of every directory above the data file at `path` of the array `node`,
        and the IMAGE.ome.tif files of every image it is a level of: a write to the array changes
        their bytes too."""
        names = self._images_of(os.path.dirname(path), node.path)
        return names + [name for directory in _directories_above(path) for name in self._views_in(directory)]

    def _images_of(self, directory: str, store_path: str) -> list[str]:
        """The IMAGE.ome.tif files whose levels include the array at `store_path`, whose data file
        is in `directory`: in the groups above it (as far up as ome.image_of looks) whose images
        list its path below them (its name, or a nested path like s/0). The groups as last read
        (the lookup of `directory` read them): each open of a level asks again, and reading
        every group above anew cost each open up to four requests a group."""
        names = []
        for group_path, relative in ome.groups_above(store_path):
            group = self.hierarchy.known_node(group_path)
            images = self.hierarchy.pyramids(group) if group is not None else {}
            names += [os.path.join(directory, name) for name, paths in images.items() if relative in paths]
            directory = os.path.dirname(directory)
        return names

    def of_directories_above(self, paths: list[str]) -> list[str]:
        """The group files (zarr.h5, zarr.nc) of every directory above each of `paths`, and the
        IMAGE.ome.tif files of the groups as far up as a level's image may be (ome.MAX_NESTING):
        a node made, deleted or moved there changes their size and bytes (a level moved or
        deleted ends its pyramid there)."""
        found: dict[str, None] = {}
        for path in paths:
            for depth, directory in enumerate(_directories_above(path)):
                found.update(dict.fromkeys(self._views_in(directory)))
                if depth < ome.MAX_NESTING:
                    found.update(dict.fromkeys(self._images_in(directory)))
        return list(found)

    def _views_in(self, directory: str) -> list[str]:
        return [os.path.join(directory, name) for view in self.hierarchy.group_views for name in view.files]

    def _images_in(self, directory: str) -> list[str]:
        """The IMAGE.ome.tif files of the images in the multiscales of the group at `directory`."""
        entry = self.hierarchy.lookup(directory)
        if entry is None or entry.kind != DIR:
            return []
        return [os.path.join(directory, name) for name in self.hierarchy.pyramids(entry.node)]

    def mtime(self, entry, newest: int, last_writes) -> int:
        """The newest mtime of what the file shows: `newest`, Hierarchy.group_file_facts' (the
        documents of every node it describes, the stored values of every array whose bytes it
        holds, the time this mount saw a node below appear or go: a deletion leaves no newer
        time in a store), or the last write through the mount to an array below (last_writes:
        store path -> time). So rsync copies g/zarr.h5 again exactly when something below g
        changed."""
        below = entry.node.path + "/" if entry.node.path else ""
        written = max((t for path, t in last_writes if path.startswith(below)), default=0.0)
        return max(newest, int(written * 1e9))


def _directories_above(path: str) -> Iterator[str]:
    """The directory of the file-system path `path`, then each one above it up to the root."""
    directory = os.path.dirname(path.rstrip("/")) or "/"
    while True:
        yield directory
        if directory == "/":
            return
        directory = os.path.dirname(directory)
