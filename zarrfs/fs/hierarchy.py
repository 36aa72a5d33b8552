"""The naming scheme: which file-system path stands for which Zarr node, and sidecars.

    group           -> directory (holding the group's documents as stored: `zarr.json`, or
                       `.zgroup` and `.zattrs` for Zarr v2)
    array NAME      -> NAME.bin (flat bytes) + NAME.json (sidecar) + the header views chosen
                       (NAME.npy, NAME.bin.hdr, NAME.mhd, ...; see zarrfs.views) that can
                       express the array
    group view      -> zarr.h5 and zarr.nc in each group's directory (views/hdf5.py), unless a
                       child group has that name
    multiscale image -> IMAGE.ome.tif in its group's directory, with the tiff view: its levels as
                       one pyramidal OME-TIFF (views/ome_pyramid.py)

Collision rule: the group's documents and child groups keep their names; an array any of
whose file names (with every view chosen) would collide with one of them or with a file of an
array before it in name order (an array called `zarr`, a group called `x.bin`, an array `x.bin`
whose NIfTI header would be the ENVI header of `x`) is shown with `.array` added to its name
(`NAME.array.bin`, `NAME.array.json`, ...) instead, and a warning is logged. The rule hides
nothing (a file is hidden only when a person deletes it alone: hidden_files.py). Names are
bytes, held as os.fsdecode's str (names.py, docs/names.md).
"""

import errno
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from zarrfs.codecs.chain import ChunkSpec, CodecChain
from zarrfs.engine.consolidated_copy import ConsolidatedCopy
from zarrfs.errors import MetadataError, StoreError, UnsupportedError, ViewError, ZarrfsError
from zarrfs.format.v3 import ArrayMetadata, GroupMetadata
from zarrfs.fs.hidden_files import HiddenFiles
from zarrfs.geometry import grid_shape, largest_chunk, regular, size_of
from zarrfs.names import to_json as json_name
from zarrfs.nodes import consolidated
from zarrfs.nodes import documents as nodes
from zarrfs.stores.contract import Store
from zarrfs.views import DEFAULT_VIEWS, GROUP_VIEWS, VIEWS, hdf5, info_of, ome, ome_pyramid, preview
from zarrfs.views import text as textview
from zarrfs.views.georeferencing import Georeferencer
from zarrfs.views.header_cache import HeaderCache

log = logging.getLogger(__name__)

DIR, DATA, SIDECAR, DOCUMENT, HEADER, TEXT = "dir", "data", "sidecar", "document", "header", "text"
PREVIEW = "preview"  # NAME.png, made from the data when opened (views/preview.py)
GROUPFILE = "groupfile"  # zarr.h5: a group and what is below it, made when opened (views/hdf5.py); IMAGE.ome.tif
PYRAMID = "pyramid"  # the view word of a GROUPFILE that is a multiscale image's OME-TIFF (views/ome_pyramid.py)
# `.Trash-UID` at the root: a file, never listed, so that the freedesktop.org trash is not used
# here (a trash directory would become a Zarr group). GIO then reports access::can-trash FALSE,
# so Thunar and Nautilus ask to delete permanently and delete a folder file by file, and
# g_file_trash fails at once instead of trying mkdir (a folder moved to no trash was then
# removed with one rmdir, which a group holding arrays refuses).
NO_TRASH = "notrash"
NO_TRASH_NAME = re.compile(r"^\.Trash-\d+$")
NO_TRASH_TEXT = b"No trash on a zarrfs mount: a trash folder would become a Zarr group. Deleting deletes.\n"


@dataclass(frozen=True)
class Node:
    """A Zarr node as found in the store: parsed metadata, or the error that stopped parsing."""

    path: str  # store path, '' for the root
    kind: str  # "array" or "group"
    documents: dict[str, bytes]  # the node's documents as stored, by name (zarr.json, .zgroup...)
    stat: os.stat_result
    meta: ArrayMetadata | GroupMetadata | None
    error: ZarrfsError | None
    version: tuple = ()
    zarr_format: int = 3

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Entry:
    """One file-system entry: what it is and which node it shows."""

    kind: str  # DIR, DATA, TEXT, SIDECAR, DOCUMENT or HEADER
    node: Node
    stem: str = ""  # for an array's files: the name before .bin / .txt / .json / a view's suffix; for DOCUMENT its name
    view: str = ""  # HEADER: its format; DATA: "" for NAME.bin, else the view it belongs to


SUBTREE_LIFETIME = 30.0  # seconds a group's Subtree is trusted, as the kernel keeps attributes (stored_usage.LIFETIME)


class Subtree(NamedTuple):
    """What a group's HDF5 view's size and mtime depend on, summed over the group and every node
    below it: a group file's stat adds up its children's Subtrees, not the whole hierarchy below."""

    node: Node  # the group's node it was made from
    shape: tuple  # the group's node and its children's: when it differs, something was made, deleted or moved
    cost: int  # hdf5.size_bound's share of the group and everything below (hdf5.group_bound added up)
    count: int  # nodes: beyond hdf5.MAX_NODES the view is refused
    newest: int  # ns: the newest mtime of the documents and stored values below, or of a change seen
    changed: int  # ns: when this mount last saw the group's children change, 0 if never
    expires: float  # time.monotonic() past which it is made again (changes by other programs)


class Hierarchy:
    def __init__(self, store: Store, views=DEFAULT_VIEWS, header_cache_bytes: int = 32 << 20,
                 previews: bool = False):
        self.store = store
        self.views = [VIEWS[name] for name in views if name in VIEWS]
        self.group_views = _group_views(views, views is DEFAULT_VIEWS)
        self._headers = HeaderCache(header_cache_bytes)
        georeferenced = previews or any(view.name in ("vrt", "envi") for view in self.views)
        self._georeferencer = Georeferencer(store, self.sibling) if georeferenced else None
        self._ome = any(view.name == "tiff" for view in self.views)  # OME-TIFF for OME-Zarr images
        self.previews = preview.Plans(self.node, self._north_up) if previews else None
        self._nodes: dict[str, Node] = {}
        self._listings: dict[str, tuple[int, dict[str, Entry]]] = {}
        self._sidecars: dict[tuple[str, str], tuple[Node, bytes]] = {}
        self._directories: dict[str, Entry] = {}  # file-system path -> DIR entry, while listings hold
        self._group_versions: dict[object, tuple] = {}  # group path (or pyramid key) -> the nodes its view was made of
        self._subtrees: dict[str, Subtree] = {}  # group path -> what its HDF5 view's size and mtime depend on
        self._expiries = 0  # how often Subtrees were expired: a walk keeps what it made only if none came meanwhile
        # group path -> (size listed, size made) of an HDF5 view made larger than its bound: listings
        # show the size made while the bound stays that one (a kernel reads no further than the size)
        self._exceeded: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self.hidden = HiddenFiles()  # files deleted alone from nodes that stay: neither looked up nor listed
        root = self._check_root()
        self.consolidated = _consolidated(root)
        # this mount's rewrites of that copy: the arrays' growth (one entry's shape) and the
        # hierarchy edits, which take its lock too (each is a read-modify-write of one document)
        self.copy = ConsolidatedCopy(store, root.zarr_format)
        self._verified: set[str] = set()  # nodes from consolidated metadata checked against their own documents
        self._nodes[""] = _parse_node("", root)  # an unsupported root is served like any unsupported node
        if self._nodes[""].kind == "group" and self.consolidated is None and not store.capabilities.listing:
            raise StoreError(f"{store.root}: this store cannot list (plain HTTP), so a group needs consolidated "
                             f"metadata (zarr.consolidate_metadata), and this one has none", errno.EOPNOTSUPP)

    def _check_root(self) -> nodes.Documents:
        """The root's documents, read once. Refuse to mount a directory that is no Zarr node, or
        whose root document is malformed, with one message that says which (and, for v2, that
        the store is v2)."""
        docs = nodes.read_documents(self.store, "")
        if docs is None:
            raise MetadataError(f"{self.store.root}: not a Zarr hierarchy: neither zarr.json (v3) nor .zgroup or "
                                f".zarray (v2)")
        try:
            nodes.parse("", docs)
        except UnsupportedError:
            pass
        except ZarrfsError as e:
            if docs.zarr_format == 2:
                raise type(e)(f"{self.store.root}: a Zarr v2 store that cannot be served: {e}", e.errno) from None
            raise
        return docs

    def _north_up(self, node: Node) -> bool:
        """Whether the array's rows go north, as its georeference says (dy > 0, no rotation):
        its preview is then drawn bottom up, north up as a map is."""
        if not isinstance(node.meta, ArrayMetadata):
            return False
        try:
            georef = self._georeferencer.of(node)
        except ZarrfsError:  # logged where it was found; the preview is drawn as stored
            return False
        if georef is None:
            return False
        _, _, rx, _, ry, dy = georef.transform
        return rx == 0 and ry == 0 and dy > 0

    def node(self, path: str) -> Node | None:
        """The node at store path `path`, None if there is none; cached while its documents are
        unchanged. A document that cannot be read (a symlink out of the store, a FIFO, a
        directory) makes a broken node, listed but failing to open. A node that consolidated
        metadata has is made from it, with no read (see verify)."""
        if path and self.consolidated is not None and path in self.consolidated.entries:
            cached = self._nodes.get(path)
            if cached is None:
                cached = self._nodes[path] = _parse_node(path, self.consolidated.entries[path])
            return cached
        key = nodes.key_of(path, nodes.ZARR_JSON)
        try:
            found = nodes.locate(self.store, path)
            if found is None:
                return None
            key = nodes.key_of(path, found[0])
            cached = self._nodes.get(path)
            if cached is not None and cached.version == nodes.version_of(self.store, path, found):
                return cached
            docs = nodes.read_documents(self.store, path, found)
        except StoreError as e:
            return self._unreadable(path, key, e)
        node = _parse_node(path, docs)
        self._nodes[path] = node
        return node

    def sibling(self, path: str) -> Node | None:
        """The node at `path` as a node beside another names it (a coordinate array named like a
        dimension, a grid mapping): where consolidated metadata lists the hierarchy, a path
        that neither it nor the parent's listing (kept from the lookup that led to the array)
        has is no node, with no request. A probe of each name (three GETs for the documents of
        either format) cost the first read of an array as long again on a server that does not
        answer."""
        if self.consolidated is not None and path not in self.consolidated.entries:
            parent, _, name = path.rpartition("/")
            if not self.store.capabilities.listing or name not in self.store.list_dir(parent):
                return None
        return self.node(path)

    def _unreadable(self, path: str, key: str, error: StoreError) -> Node:
        cached = self._nodes.get(path)
        if cached is not None and cached.meta is None and str(cached.error) == f"{key}: {error}":
            return cached  # logged already
        error = type(error)(f"{key}: {error}", error.errno)
        log.error("%s", error)
        zarr_format = 3 if key.endswith(nodes.ZARR_JSON) else 2
        node = self._nodes[path] = Node(path, "array", {}, self.store.stat(""), None, error, (), zarr_format)
        return node

    def verify(self, entry: Entry) -> Entry:
        """The entry with its node's own documents, where they differ from the consolidated copy
        it was listed from: a node's own documents win. Read once per node, when it is opened."""
        node = entry.node
        if node.version != consolidated.CONSOLIDATED or node.path in self._verified:
            return entry
        try:
            own = nodes.read_documents(self.store, node.path)
        except StoreError as e:
            return replace(entry, node=self._unreadable(node.path, node.path, e))
        self._verified.add(node.path)
        if own is None or consolidated.same_documents(own, self.consolidated.entries[node.path]):
            return entry
        log.warning("%s: consolidated metadata (%s) is stale; the node's own %s wins", node.path,
                    self.consolidated.source, own.main)
        fresh = self._nodes[node.path] = _parse_node(node.path, own)
        with self._lock:
            self._listings.pop(node.path.rpartition("/")[0], None)
            self._directories.clear()
        return replace(entry, node=fresh) if fresh.kind == node.kind else entry

    def reread(self, path: str) -> Node | None:
        """The node at `path` from its own documents, kept as verified: the mount has just stored
        them (a growth), and the consolidated copy may not follow yet (engine/consolidated_copy.py
        follows at full write-backs, and a failure leaves it behind): no stale copy to warn of."""
        try:
            own = nodes.read_documents(self.store, path)
        except StoreError as e:
            return self._unreadable(path, path, e)
        if own is None:
            return None
        node = self._nodes[path] = _parse_node(path, own)
        self._verified.add(path)
        return node

    def changed(self, *paths: str) -> None:
        """The mount changed these nodes (each with everything below it): forget what was read
        of them and of their parents' listings. The root changing means reading it again."""
        if "" in paths:
            self.reload_root()
        with self._lock:
            for path in paths:
                def below(p, path=path):
                    return p == path or p.startswith(path + "/") or not path
                for p in [p for p in self._nodes if below(p) and p]:
                    del self._nodes[p]
                for p in [p for p in self._listings if below(p) or p == path.rpartition("/")[0]]:
                    del self._listings[p]
                for key in [key for key in self._sidecars if below(key[0])]:
                    del self._sidecars[key]
                self._expire_subtrees(path, gone=True)  # the group files above the node show it too
                self._verified = {p for p in self._verified if not below(p)}
            self._directories.clear()

    def reload_root(self) -> None:
        """Read the root's documents (and its consolidated metadata) again."""
        root = nodes.read_documents(self.store, "")
        consolidated = _consolidated(root)
        with self._lock:
            self.consolidated = consolidated
            self._nodes[""] = _parse_node("", root)
            self._listings.clear()

    def listing(self, dir_path: str) -> dict[str, Entry]:
        """Name -> entry for the directory of the group at store path `dir_path`."""
        st = self.store.stat(dir_path)
        version = st.st_mtime_ns if st else 0
        cached = self._listings.get(dir_path)
        if cached is not None and cached[0] == version:
            return cached[1]
        entries = self._build_listing(dir_path)
        with self._lock:
            self._listings[dir_path] = (version, entries)
            if cached is not None:  # a listing changed: some remembered path may now lead elsewhere
                self._directories.clear()
        return entries

    def _build_listing(self, dir_path: str) -> dict[str, Entry]:
        listed_at = self.hidden.version  # what was hidden before this snapshot began (hidden_files.py)
        group = self.node(dir_path)
        entries = {name: Entry(DOCUMENT, group, name) for name in group.documents}
        arrays = []
        listed = self.consolidated.children.get(dir_path, []) if self.consolidated else []
        for name in sorted({*listed, *self.store.list_dir(dir_path)} - nodes.DOCUMENT_NAMES):
            if name.startswith("__") and group.zarr_format == 3:
                continue  # reserved by Zarr v3.1 (node names): extensions' data, never a node
            child = self.node(f"{dir_path}/{name}" if dir_path else name)
            if child is None:
                continue  # a chunk directory or anything else that is not a node
            if child.kind == "group":
                entries[name] = Entry(DIR, child)
            else:
                arrays.append(child)
        if group.meta is not None:  # before the arrays, which give way to them
            for view in self.group_views:
                entries.update({name: Entry(GROUPFILE, group, name, view.name) for name in view.files
                                if name not in entries})
            for name in self.pyramids(group):
                if name not in entries and self._pyramid_or_none(group, name) is not None:
                    entries[name] = Entry(GROUPFILE, group, name, PYRAMID)
        for child in arrays:
            stem = child.name
            while any(name in entries for name in self.file_names(stem)):
                stem = f"{stem}.array"
            if stem != child.name:
                log.warning("%s: array %r collides with another entry; shown as %s.bin, %s.json, ...",
                            dir_path or "/", child.name, stem, stem)
            entries.update(self._array_entries(child, stem))
        self.hidden.keep_present(dir_path, {entry.node.path for entry in entries.values()}, listed_at)
        return entries

    def file_names(self, stem: str) -> list[str]:
        """Every name an array may take: the collision rule does not depend on its data type."""
        names = [f"{stem}.bin", f"{stem}.txt", f"{stem}.json"]
        if self.previews is not None:
            names.append(stem + preview.SUFFIX)
        for view in self.views:
            names += [stem + view.suffix] + ([stem + view.alias] if view.alias else [])
        return names

    def _array_entries(self, node: Node, stem: str) -> dict[str, Entry]:
        if is_text(node):  # no flat file, so no header views: text made from the data (views/text.py)
            return {f"{stem}.txt": Entry(TEXT, node, stem), f"{stem}.json": Entry(SIDECAR, node, stem)}
        entries = {f"{stem}.bin": Entry(DATA, node, stem), f"{stem}.json": Entry(SIDECAR, node, stem)}
        headers = self.headers(node, stem)
        for view in self.views:
            if view.name in headers:
                entries[stem + view.suffix] = Entry(DATA if view.prefixed else HEADER, node, stem, view.name)
                if view.alias:
                    entries[stem + view.alias] = Entry(DATA, node, stem, view.name)
        if self.previews is not None and self.previews.of(node) is not None:
            entries[stem + preview.SUFFIX] = Entry(PREVIEW, node, stem, "preview")
        return entries

    def headers(self, node: Node, stem: str) -> dict[str, bytes]:
        """View name -> header bytes, for the views that can express the array; made from the
        metadata alone, once per node version while the bounded cache keeps them."""
        if node.meta is None or is_text(node):
            return {}

        def make():
            georef = self._georeferencer.of(node) if self._georeferencer and isinstance(node.meta, ArrayMetadata) \
                else None
            image = ome.image_of(node.path, self.known_node) if self._ome else None
            info = info_of(node.meta, node.name or stem, f"{stem}.bin", georef, image)
            made = {view.name: _header(view, info, node) for view in self.views}
            return {name: header for name, header in made.items() if header is not None}

        return self._headers.get((node.path, stem), node, make)

    def known_node(self, path: str) -> Node | None:
        """The node at `path` as last read (a listing reads its group first), else read: on an
        object store, a parent looked up again for each of its arrays would cost a request each."""
        return self._nodes.get(path) or self.node(path)

    def prefix(self, entry: Entry) -> bytes:
        """The bytes a data view shows before the array's bytes (the .npy header), else b''."""
        if not entry.view or not VIEWS[entry.view].prefixed:
            return b""
        return self.headers(entry.node, entry.stem).get(entry.view, b"")

    def data_names(self, entry: Entry) -> list[str]:
        """The names, in the entry's directory, of every file showing the data of its array."""
        names = [f"{entry.stem}.bin"]
        headers = self.headers(entry.node, entry.stem)
        for view in self.views:
            if view.name in headers and (view.prefixed or view.alias):
                names.append(entry.stem + (view.alias or view.suffix))
        return names

    def lookup(self, fs_path: str) -> Entry | None:
        """The entry at an absolute file-system path ('/', '/raw/frames.bin', ...). The cost is
        linear in the depth: directories on the way are remembered while no listing changes."""
        parts = [p for p in fs_path.split("/") if p]
        if not parts:
            return Entry(DIR, self.node(""))
        directory = self._directory(parts[:-1])
        if directory is None:
            return None
        entry = self.entries_of(directory).get(parts[-1])
        if entry is not None and self.hidden.hidden(entry.node.path, parts[-1]):
            return None
        if entry is None and len(parts) == 1 and NO_TRASH_NAME.match(parts[0]) and directory.node.kind == "group":
            return Entry(NO_TRASH, directory.node, parts[0])
        if entry is not None and entry.node.kind == "array" and entry.node.path and \
                self.store.capabilities.metadata_ttl is not None:
            entry = self._current(entry)
        return entry

    def _current(self, entry: Entry) -> Entry:
        """On a store other machines write, an array's entry with its documents as stored now (as
        fresh as metadata_ttl): another mount may have grown it, and its group's listing, made
        from the group's own keys, does not change for that."""
        fresh = self.node(entry.node.path)
        if fresh is None or fresh is entry.node or fresh.kind != "array":
            return entry
        with self._lock:
            self._listings.pop(entry.node.path.rpartition("/")[0], None)
        return replace(entry, node=fresh)

    def shown(self, directory: Entry) -> dict[str, Entry]:
        """The entries of `directory` that are listed: all but the hidden files."""
        return {name: entry for name, entry in self.entries_of(directory).items()
                if not self.hidden.hidden(entry.node.path, name)}

    def _directory(self, parts: list[str]) -> Entry | None:
        """The DIR entry at the file-system path made of `parts`, None if there is none. The
        kernel looks paths up parent first, so the parent is nearly always remembered."""
        depth, key = len(parts), "/".join(parts)
        while depth and key not in self._directories:
            depth, key = depth - 1, key[:key.rfind("/")] if depth > 1 else ""
        entry = self._directories[key] if depth else Entry(DIR, self.node(""))
        for name in parts[depth:]:
            entry = self.entries_of(entry).get(name)
            if entry is None or entry.kind != DIR:
                return None
            key = f"{key}/{name}" if key else name
            with self._lock:
                self._directories[key] = entry
        return entry

    def content(self, entry: Entry) -> bytes:
        """The bytes of a document or sidecar entry; a sidecar is made once per node version,
        since getattr and readdir ask for its size on every listing."""
        if entry.kind == DOCUMENT:
            return entry.node.documents.get(entry.stem, b"")
        if entry.kind == NO_TRASH:
            return NO_TRASH_TEXT
        if entry.node.meta is None:
            return b""
        if entry.kind == HEADER:
            return self.headers(entry.node, entry.stem).get(entry.view, b"")
        key = (entry.node.path, entry.stem)
        cached = self._sidecars.get(key)
        if cached is None or cached[0] is not entry.node:
            views = {name: entry.stem + VIEWS[name].suffix for name in self.headers(entry.node, entry.stem)}
            listed = text_listed(self.store, entry.node) if is_text(entry.node) else None
            cached = self._sidecars[key] = (entry.node, sidecar(entry.node.meta, f"{entry.stem}.bin", views, listed))
        return cached[1]

    def group_file_facts(self, entry: Entry, stored_times) -> tuple[int, int]:
        """(size, newest mtime in ns) of a group file, from metadata and listings alone.
        zarr.h5: its size bound (hdf5.size_bound: the file made when it is opened is padded to
        it; a listing never makes it) and the newest time of what it shows, added up a group at
        a time (Subtree); a group beyond the view's bounds shows size 0 (opening it says why).
        IMAGE.ome.tif: its size from its levels' metadata (the listing made its layout), and the
        newest time of its group and levels. stored_times(paths): store path -> the newest mtime
        of that array's stored values."""
        group = entry.node
        if entry.view == PYRAMID:
            layout, levels = self._pyramid_or_none(group, entry.stem), self._levels(group, entry.stem)
            newest = max([group.stat.st_mtime_ns, *(node.stat.st_mtime_ns for node in levels),
                          *stored_times([node.path for node in levels]).values()])
            return (layout.size if layout is not None else 0), newest
        subtree = self._subtree(group, stored_times)
        size = hdf5.BOUND_BASE + subtree.cost if subtree.count <= hdf5.MAX_NODES else 0
        listed, made = self._exceeded.get(group.path, (None, 0))
        return (made if listed == size else size), subtree.newest

    def _subtree(self, group: Node, stored_times) -> "Subtree":
        """The group's Subtree, each group below made once (post-order, no recursion: a store
        may be thousands of groups deep) and kept for SUBTREE_LIFETIME, or until the mount
        changes a node below it (changed). The walk stops once it met more nodes than the view
        describes; the stored times of every array below come from one call (one listing)."""
        now, expiries = time.monotonic(), self._expiries
        done: dict[str, Subtree] = {}
        walk: list[tuple[Node, list, list, Subtree | None]] = []  # (group, children, groups walked, memo), post-order
        stack: list[tuple[Node, list | None]] = [(group, None)]  # (group, its children once they were looked at)
        met = 1  # nodes met so far, as Subtree.count counts them
        while stack:
            if met > hdf5.MAX_NODES:  # shown as size 0: what is below no longer matters
                return self._kept({group.path: self._beyond_bound(group, met, now)}, expiries)[group.path]
            node, children = stack.pop()
            memo = self._subtrees.get(node.path)
            if children is None and memo is not None and memo.node is node and memo.expires > now:
                done[node.path] = memo
                met += memo.count - (node is not group)  # its group was met among its parent's children
                continue
            first = children is None
            children = self._child_nodes(node.path) if first and node.meta is not None else children or []
            walked = [child for name, child in children if hdf5.walked(name, child)]
            if first:
                met += len(children)
                stack.append((node, children))
                stack.extend((child, None) for child in walked if child.path not in done)
            else:
                walk.append((node, children, walked, memo))
        arrays = [child.path for _, children, _, _ in walk for _, child in children
                  if child.kind == "array" and child.meta is not None]
        times = stored_times(arrays) if arrays else {}
        made = {}
        for node, children, walked, memo in walk:
            done[node.path] = made[node.path] = self._summed(node, children, [done[child.path] for child in walked],
                                                            memo, times)
        self._kept(made, expiries)
        return done[group.path]

    def _kept(self, made: dict[str, "Subtree"], expiries: int) -> dict[str, "Subtree"]:
        """`made`, kept unless Subtrees were expired since the walk that made them began: it may
        have listed a group before an edit, and kept with a fresh lifetime, what it made would
        undo the edit's expiry for SUBTREE_LIFETIME."""
        with self._lock:
            if self._expiries == expiries:
                self._subtrees.update(made)
        return made

    def _beyond_bound(self, group: Node, met: int, now: float) -> "Subtree":
        """The Subtree of a group with more than hdf5.MAX_NODES nodes below it: counted, not summed."""
        memo = self._subtrees.get(group.path)
        changed = memo.changed if memo is not None else 0
        return Subtree(group, (), 0, met, max(group.stat.st_mtime_ns, changed), changed, now + SUBTREE_LIFETIME)

    def _summed(self, group: Node, children: list, below: list, memo, times: dict) -> "Subtree":
        """One group's Subtree, from its children and the Subtrees of the groups among them;
        times: store path -> the newest mtime of an array's stored values."""
        cost = hdf5.group_bound(group, children) + sum(sub.cost for sub in below)
        count = 1 + sum(not hdf5.walked(name, child) for name, child in children) + sum(sub.count for sub in below)
        arrays = [child.path for _, child in children if child.kind == "array" and child.meta is not None]
        shape = (group, *(child for _, child in children))  # a node made, deleted or moved here changes it
        changed = memo.changed if memo is not None else 0
        if memo is not None and not hdf5.same(memo.shape, shape):
            changed = time.time_ns()  # a deletion leaves no newer time in a store
        newest = max([group.stat.st_mtime_ns, changed, *(times.get(path, 0) for path in arrays),
                      *(child.stat.st_mtime_ns for _, child in children), *(sub.newest for sub in below)])
        return Subtree(group, shape, cost, count, newest, changed, time.monotonic() + SUBTREE_LIFETIME)

    def _group_version(self, path: str, members: list) -> tuple:
        """The nodes the group's HDF5 view is made of: the tuple known before when they are the
        same (the header cache compares versions by identity), else this one, and the size and
        mtime kept for the groups it shows are made again at the next stat."""
        version = hdf5.version_of(members)
        with self._lock:
            known = self._group_versions.get(path)
            if known is not None and hdf5.same(known, version):
                return known
            self._group_versions[path] = version
            # made anew: the Subtrees of the group, below and above it may be of older nodes (another
            # program's change, within SUBTREE_LIFETIME), and stats must show the size of the file made
            self._expire_subtrees(path, gone=False)
            return version

    def _expire_subtrees(self, path: str, gone: bool) -> None:
        """The Subtrees that show the node at `path` are made again at the next stat. Each is
        kept, expired, for its shape: a group whose children differ from it gets a new `changed`
        time (a node moved or deleted leaves no newer time in a store). Those of the node and
        below it go when the node may be `gone`. Called with the lock held."""
        self._expiries += 1
        for p, memo in list(self._subtrees.items()):
            inside = not path or p == path or p.startswith(path + "/")
            if gone and inside and path:
                del self._subtrees[p]
            elif inside or not p or path.startswith(p + "/"):
                self._subtrees[p] = memo._replace(expires=0.0)

    def group_file_layout(self, entry: Entry) -> "hdf5.Layout":
        """The layout of a group file: zarr.h5's, or an IMAGE.ome.tif's. Raises ViewError."""
        if entry.view != PYRAMID:
            return self.group_layout(entry.node)
        layout = self.pyramid_layout(entry.node, entry.stem)
        if layout is None:
            raise ViewError("its image's first level is gone, or cannot be an OME-TIFF now")
        return layout

    def pyramids(self, group: Node) -> dict[str, list[str]]:
        """IMAGE.ome.tif -> its levels' dataset paths, for the multiscale images in the group's
        attributes (with the tiff view, which shows OME-Zarr as OME-TIFF)."""
        if not self._ome or not isinstance(group.meta, GroupMetadata):
            return {}
        return ome_pyramid.images(group.meta.attributes, group.name)

    def _pyramid_or_none(self, group: Node, name: str) -> "hdf5.Layout | None":
        try:
            return self.pyramid_layout(group, name)
        except ViewError as e:
            log.warning("%s/%s: no OME-TIFF pyramid: %s", group.path, name, e)
            return None

    def pyramid_layout(self, group: Node, name: str) -> "hdf5.Layout | None":
        """IMAGE.ome.tif's layout, None where the image's first level cannot be an OME-TIFF;
        made once per version of the group and its levels while the header cache keeps it."""
        arrays = self._levels(group, name)
        if not arrays:
            return None
        paths = self.pyramids(group)[name]
        version = self._same_version(("pyramid", group.path, name), (group, *arrays))
        return self._headers.get(("pyramid", group.path, name), version,
                                 lambda: self._make_pyramid(group, paths[0], arrays))["pyramid"]

    def _levels(self, group: Node, name: str) -> list[Node]:
        """The arrays of IMAGE.ome.tif's levels, up to the first that is none, as last read (a
        listing of the group read them): an array's own files show it as their listing read
        it too, and reading each again cost a stat each, three times a stat of the file."""
        arrays = []
        for path in self.pyramids(group).get(name, []):
            node = self.known_node(f"{group.path}/{path}" if group.path else path)
            if node is None or not isinstance(node.meta, ArrayMetadata) or is_text(node):
                break
            arrays.append(node)
        return arrays

    def _make_pyramid(self, group: Node, first_path: str, arrays: list[Node]) -> dict:
        """The layout of the image of `group` whose first dataset is `first_path`: described by
        that group's multiscales (image_of would take the group nearest the level, which for a
        nested level may be another image's)."""
        first = arrays[0]
        image = ome.image_in(group, first_path)
        info = info_of(first.meta, first.name, f"{first.name}.bin", None, image)
        description = ome.xml(info, image) if image is not None else None
        levels = ome_pyramid.pyramid([_level(node) for node in arrays])
        if description is None or not levels:
            return {"pyramid": None}
        layout = ome_pyramid.build(levels, description, self._headers.max_bytes)
        return {"pyramid": layout}  # the header cache counts what the layout holds (Layout.__sizeof__)

    def _same_version(self, key, version: tuple) -> tuple:
        """`version`, or the equal tuple known before (the header cache compares by identity)."""
        with self._lock:
            known = self._group_versions.get(key)
            if known is not None and hdf5.same(known, version):
                return known
            self._group_versions[key] = version
            return version

    def group_layout(self, group: Node) -> "hdf5.Layout":
        """The HDF5 view of `group` (zarr.h5), made once per version of the nodes below it while
        the header cache keeps it, padded to the size listings show. Raises hdf5.TooLargeError
        for a hierarchy beyond the bounds."""
        members = hdf5.members_of(group, self._child_nodes)
        version = self._group_version(group.path, members)
        cap = self._headers.max_bytes
        layout = self._headers.get(("hdf5", group.path), version,
                                   lambda: {"hdf5": hdf5.build(members, lambda m: m.node.path, cap)})["hdf5"]
        if layout.size > layout.listed:  # the bound did not hold: later stats show the file whole
            with self._lock:
                self._exceeded[group.path] = (layout.listed, layout.size)
        return layout

    def _child_nodes(self, path: str) -> list[tuple[str, Node]]:
        """(name, node) of the groups and arrays in the group at `path`, in name order."""
        found = {}
        for entry in self.listing(path).values():
            if entry.kind == DIR or (entry.kind in (DATA, TEXT) and not entry.view):
                found[entry.node.path] = entry.node
        return sorted((node.name, node) for node in found.values())

    def entries_of(self, directory: Entry) -> dict[str, Entry]:
        if directory.node.kind == "array":  # SOURCE is an array: the root holds just its files
            stem = os.path.basename(self.store.root.rstrip("/")) or "array"
            return self._array_entries(directory.node, stem)
        return self.listing(directory.node.path)


def read_only_view(entry: Entry) -> bool:
    """A data view none of whose bytes may be written, even on a writable mount (NAME.tif)."""
    return entry.kind == DATA and bool(entry.view) and VIEWS[entry.view].read_only


def _level(node: Node) -> ome_pyramid.Level:
    info = info_of(node.meta, node.name, "")
    chunk = tuple(preview.decoded_chunk_shape(node.meta)[-2:]) if len(info.shape) > 1 else (1, 1)
    return ome_pyramid.Level(node.path, info.shape, info.data_type, info.dtype.itemsize, chunk)


def _group_views(views, by_default: bool) -> list:
    """The group views chosen; one chosen by default whose dependency is missing is left out, with
    one line saying which extra brings it (one asked for by name was refused by the command line)."""
    chosen = []
    for name in views:
        view = GROUP_VIEWS.get(name)
        if view is None:
            continue
        if view.available():
            chosen.append(view)
        elif by_default:
            log.info("the %s view (%s) is off: pip install 'zarrfs[%s]' turns it on", name, ", ".join(view.files),
                     view.extra)
    return chosen


def _parse_node(path: str, docs: nodes.Documents) -> Node:
    key = nodes.key_of(path, docs.main)
    try:
        meta = nodes.parse(path, docs)
        if isinstance(meta, ArrayMetadata):
            check_codecs(meta, key)
    except ZarrfsError as e:
        log.log(logging.WARNING if isinstance(e, UnsupportedError) else logging.ERROR, "%s", e)
        return Node(path, docs.kind or _guess_kind(docs.documents[docs.main]), docs.documents, docs.stat, None, e,
                    docs.version, docs.zarr_format)
    except Exception as e:  # a bug: the parser should have named the field; the node stays listed
        log.exception("%s: cannot parse", key)
        return Node(path, docs.kind or _guess_kind(docs.documents[docs.main]), docs.documents, docs.stat, None,
                    MetadataError(f"{key}: cannot parse ({e!r})"), docs.version, docs.zarr_format)
    kind = "array" if isinstance(meta, ArrayMetadata) else "group"
    return Node(path, kind, docs.documents, docs.stat, meta, None, docs.version, docs.zarr_format)


def _header(view, info, node: Node) -> bytes | None:
    """The view's header, None when the format cannot express the array. A text header holding
    a string that is no Unicode text (a lone surrogate: a \\uDCxx escape in a dimension name or
    an attribute of the document) cannot be written as UTF-8: that view alone is left out."""
    try:
        return view.header(info)
    except UnicodeEncodeError:
        log.warning("%s: no %s view: its metadata holds a string that is not Unicode text (a \\uDCxx escape)",
                    node.path or "/", view.name)
        return None


def _consolidated(root: nodes.Documents) -> consolidated.Consolidated | None:
    """The root's consolidated metadata, if it has any that can be used."""
    try:
        return consolidated.load(root)
    except ZarrfsError as e:  # a broken cache: every node is read from its own documents
        log.warning("consolidated metadata not used: %s", e)
        return None


def check_codecs(meta: ArrayMetadata, where: str) -> None:
    """Build the array's codec chain once, so that an unsupported codec is found when the node
    is listed, as an unsupported data type is, not when it is opened."""
    spec = ChunkSpec(largest_chunk(meta.chunk_shape), meta.data_type, meta.fill_value)
    CodecChain(list(meta.codecs), spec, f"{where}: codecs").check_grid(meta.chunk_shape, where)


def _guess_kind(document: bytes) -> str:
    """A broken node is still listed: as a group if it says so, else as an array."""
    try:
        return "group" if json.loads(document).get("node_type") == "group" else "array"
    except (ValueError, RecursionError, AttributeError):
        return "array"


def is_text(node: Node) -> bool:
    """Variable-length elements have no fixed size: the array is shown as text, not flat bytes."""
    return node.meta is not None and node.meta.data_type.numpy.kind == "O"


DESCRIBED = ("shape", "dtype", "dimension_names", "chunk_shape", "codecs", "attributes")  # described()'s fields


def described(meta: ArrayMetadata) -> dict:
    """The facts the sidecar and the extended attributes (xattrs.py) both give, made here once so
    that each is the same JSON value in both. The codecs are the stored document's (a v2 array's:
    the chain its documents become), which a user can check against zarr.json."""
    names = meta.dimension_names
    if names is None and isinstance(meta.attributes.get("_ARRAY_DIMENSIONS"), list):
        names = meta.attributes["_ARRAY_DIMENSIONS"]
    return {
        "shape": list(meta.shape),
        "dtype": None if meta.data_type.numpy.kind == "O" else meta.data_type.array_interface,
        "dimension_names": None if names is None else list(names),
        "chunk_shape": list(meta.chunk_shape) if regular(meta.chunk_shape) else None,  # rectilinear: chunk_shapes
        "codecs": list(meta.codecs) if meta.zarr_format == 2 else meta.document["codecs"],
        "attributes": meta.attributes,
    }


def text_listed(store, node: Node) -> str:
    """When a listing shows the array's NAME.txt (views/text.py), in words, from its metadata
    alone: the sidecar's size must not change when the text's size becomes known."""
    try:
        unlisted = textview.unlisted(store, node)
    except ZarrfsError as e:  # no codec chain: the open refuses it the same way
        return f"never: {e}"
    if unlisted is not None and unlisted.never:
        return f"never: {unlisted.why}; a stat or open by name says so"
    if unlisted is not None:
        return f"once a stat or open by name has counted its size: {unlisted.why}"
    return ("when a listing counts its size; left out while it cannot (a chunk that cannot be read or decoded, "
            "more to decode one by one than a listing may, -o timeout) until a stat or open by name counts it "
            "or says why not")


def sidecar(meta: ArrayMetadata, data_file: str, views: dict[str, str] | None = None,
            text_listed: str | None = None) -> bytes:
    """The JSON sidecar: everything a reader needs to interpret the .bin (or .txt) file;
    `text_listed`, for a text, when a listing shows it (text_listed())."""
    doc = meta.document
    v2 = meta.zarr_format == 2
    sharding = next((c for c in meta.codecs if c["name"] == "sharding_indexed"), None)
    facts = described(meta)
    body = {
        "shape": facts["shape"],
        "dtype": facts["dtype"],
        "data_type": doc["dtype"] if v2 else meta.data_type.name,
        "itemsize": meta.data_type.itemsize,
        "nbytes": meta.nbytes,
        "order": "C",
        "byte_order": "little",
        "fill_value": doc["fill_value"],
        "dimension_names": facts["dimension_names"],
        "chunk_shape": facts["chunk_shape"],
        "inner_chunk_shape": sharding["configuration"].get("chunk_shape") if sharding else None,
        "codecs": facts["codecs"],
        "attributes": facts["attributes"],
        "data_file": json_name(data_file),  # a string, or byte values for a name that is not UTF-8
        "zarr_format": meta.zarr_format,
        "views": {view: json_name(name) for view, name in (views or {}).items()},  # format -> its file
    }
    if not regular(meta.chunk_shape):  # each dimension's chunk lengths, as many chunks as hold elements
        body.update(chunk_grid="rectilinear", chunk_shapes=[
            [size_of(c, g) for g in range(count)] for c, count in zip(meta.chunk_shape, grid_shape(meta.shape,
                                                                                                  meta.chunk_shape), strict=False)])
    if meta.data_type.numpy.kind == "O":  # shown as text (see views/text.py)
        body.update(itemsize=None, nbytes=None, byte_order=None, data_file=None,
                    text_file=json_name(data_file.removesuffix(".bin") + ".txt"),
                    text_format=textview.lines_of(meta.data_type.name)[1], text_listed=text_listed)
    if meta.data_type.numpy.kind in "Mm":
        unit, count = np.datetime_data(meta.data_type.numpy)
        body["datetime_unit"] = unit if count == 1 else f"{count}{unit}"
    return (json.dumps(body, indent=2) + "\n").encode()
