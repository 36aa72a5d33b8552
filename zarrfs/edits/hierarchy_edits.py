"""The FUSE side of hierarchy editing: mkdir, rmdir, create, unlink, rename and attribute edits,
each checked here (names, collisions, what may be removed alone) and done by editor.py.

    mkdir G / rmdir G          a group; rmdir only of a group with nothing in it (ENOTEMPTY)
    create NAME.npy            an array from an .npy copied in (drafts.NpyDraft)
    create NAME.json           an empty array from a written sidecar (drafts.TextDraft)
    write NAME.json, zarr.json attributes, applied at close (only attributes may change)
    setfattr user.zarr.attr.K  one attribute, as JSON
    unlink                     one file hidden; an array deleted with its last file
    rename                     an array through any of its files (the suffix stays), a group
    editors' temporary files   kept in memory, applied when renamed over NAME.json

A target that exists gets EEXIST. After each change the kernel's cached attributes and pages
of the files that changed are dropped (the `invalidate` callback it is given), so nothing stale is seen.
"""

import errno
import json
import logging
import os
import posixpath
import re
import threading
import time
from collections.abc import Callable

from zarrfs.edits import new_nodes as newnode
from zarrfs.edits.drafts import NpyDraft, TextDraft
from zarrfs.edits.editor import Editor
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.writeback import CONFLICT_RETRIES
from zarrfs.errors import ReadOnlyError, RefusedError
from zarrfs.fs.filesystem import BLKSIZE, Attributes
from zarrfs.fs.hierarchy import DIR, DOCUMENT, GROUPFILE, NO_TRASH, SIDECAR, Entry, Hierarchy
from zarrfs.fs.inodes import inode_number
from zarrfs.fs.open_arrays import OpenArrays
from zarrfs.fs.ownership import Ownership
from zarrfs.names import printable
from zarrfs.names import text as name_text
from zarrfs.nodes import documents as nodes
from zarrfs.stores.contract import Capabilities, Store

log = logging.getLogger(__name__)

# names editors and tools give their temporary files (gedit, sed -i, vim's probe and backups, ...)
SCRATCH = re.compile(r"^(\..+|.+~|4913|sed[A-Za-z0-9]{6}|.+\.(swp|swx|tmp))$")
TRASH = re.compile(r"^\.Trash(-\d+)?$")  # freedesktop.org trash directories
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
ATTRIBUTE = "user.zarr.attr."
XATTR_CREATE, XATTR_REPLACE = 1, 2
FLUSH_WAIT = 30.0  # seconds an unlink or rename waits for a write-back in progress (local stores)


class HierarchyEdits:
    """Given what it uses: the store and its Hierarchy, the open-array table (OpenArrays: arrays
    deleted or moved stop serving), the chunk cache new arrays write through, and `invalidate`,
    called with the paths whose cached attributes and pages the kernel must drop."""

    def __init__(self, store: Store, hierarchy: Hierarchy, arrays: OpenArrays, cache: ChunkCache,
                 invalidate: Callable[[list[str]], None], *, read_only: bool, ownership: Ownership,
                 dirty_limit: int, remote_timeout: float):
        self.store, self.hierarchy, self.arrays, self.cache = store, hierarchy, arrays, cache
        self.invalidate = invalidate
        self.read_only, self.ownership, self.dirty_limit = read_only, ownership, dirty_limit
        self.remote_timeout = remote_timeout  # bounds a write-back's requests: see flush_wait
        self.editor = Editor(store, hierarchy)
        if not read_only:
            self.editor.recover()  # before the temporaries go: the intent record is one
        self.drafts: dict[str, NpyDraft | TextDraft] = {}  # file-system path -> file being written
        self._lock = threading.Lock()

    # what the mount shows of drafts

    def draft_at(self, path: str):
        """The draft shown at `path`, None once it made its node (its files show it then)."""
        draft = self.drafts.get(path)
        return draft if draft is not None and not draft.committed else None

    def attributes(self, draft, path: str) -> Attributes:
        """A file being written, as every file shows itself (st_blksize too: tools size their writes by it)."""
        ownership = self.ownership
        uid, gid = ownership.owner(self.hierarchy.node("").stat)
        now = int(time.time() * 1e9)
        return {"st_ino": inode_number(f"draft\0{path}"), "st_mode": ownership.file(True), "st_nlink": 1,
                "st_size": draft.size, "st_uid": uid, "st_gid": gid, "st_blksize": BLKSIZE, "st_mtime": now,
                "st_ctime": now, "st_atime": now, "st_blocks": 0}

    # groups

    def mkdir(self, path: str) -> None:
        parent, name = self._parent(path)
        if TRASH.match(name):  # a file manager's trash: refused, so that it offers to delete instead
            raise RefusedError(f"{path}: no trash here (it would become a Zarr group): delete instead", errno.EPERM)
        newnode.check_name(name)
        self._free(parent, path, [name])
        self.editor.make_group(_child(parent, name))

    def rmdir(self, path: str) -> None:
        entry = self._existing(path)
        if entry.kind != DIR:
            raise RefusedError(f"{path}: not a group", errno.ENOTDIR)
        if not entry.node.path:
            raise RefusedError("the root group cannot be removed", errno.EBUSY)
        listed = self.hierarchy.entries_of(entry)  # a file hidden alone still holds its array: shown ones first
        held = sorted((n for n, e in listed.items() if e.kind not in (DOCUMENT, GROUPFILE)),
                      key=lambda n: self.hierarchy.hidden.hidden(listed[n].node.path, n))
        # anything stored below, a node's or not (keys, not names: a filer-backed object store such
        # as SeaweedFS lists a directory its objects have left)
        stored = {key.split("/")[0] for key, _ in self.store.files(entry.node.path)}
        held += sorted(stored - nodes.DOCUMENT_NAMES - set(held))
        held += [p for p in self.drafts if p.startswith(path + "/")]
        if held:
            raise RefusedError(f"{path}: the group holds {held[0]!r}", errno.ENOTEMPTY)
        self.editor.delete(entry.node.path)
        self.hierarchy.hidden.forget(entry.node.path)
        self._drop([path])

    # arrays

    def create(self, path: str, flags: int):
        parent, name = self._parent(path)
        if self.hierarchy.lookup(path) is not None or path in self.drafts:
            raise RefusedError(f"{path}: exists", errno.EEXIST)
        stem, suffix = _stem(name)
        if suffix in (".npy", ".json") and stem:
            newnode.check_name(stem)
            self._free(parent, path, self.hierarchy.file_names(stem), stem)
            if suffix == ".npy":
                draft = NpyDraft(path, _child(parent, stem), self.editor, self.cache, self.dirty_limit)
            else:
                draft = TextDraft(path, b"", self._creator(_child(parent, stem), path))
        elif SCRATCH.match(name):
            draft = TextDraft(path, b"", None)
        else:
            raise RefusedError(f"{path}: only NAME.npy (an array from an .npy file) and NAME.json (an empty array "
                               f"from a sidecar) can be created here", errno.EPERM)
        return self._open(draft)

    def open_edit(self, entry: Entry, path: str, flags: int):
        """A sidecar or a group's document opened for writing: applied at close."""
        draft = self.draft_at(path)
        if draft is None:
            apply = self._editor_of(entry, path)
            draft = TextDraft(path, self.hierarchy.content(entry), apply)
        if flags & os.O_TRUNC:
            draft.truncate(0)
        return self._open(draft)

    def reopen(self, path: str, flags: int):
        draft = self.drafts[path]
        if flags & os.O_TRUNC:
            draft.truncate(0)
        return self._open(draft)

    def _open(self, draft) -> int:
        with self._lock:
            self.drafts[draft.path] = draft
            draft.handles += 1
        return draft

    def release(self, draft) -> None:
        with self._lock:
            draft.handles -= 1
            if draft.handles:
                return
            draft.release()
            if (isinstance(draft, NpyDraft) or draft.apply is not None) and self.drafts.get(draft.path) is draft:
                del self.drafts[draft.path]  # editors' temporaries stay until renamed or removed
            else:
                return
        if not draft.committed:  # the kernel may still hold the file it was shown as
            self._drop([draft.path])

    def closed(self, draft) -> None:
        """close(): a draft that made or changed a node drops what the kernel holds of its files."""
        try:
            draft.close()
        except Exception:
            self._refused(draft)
            raise
        if draft.committed:
            self._drop(self._names_near(draft.path))

    def _refused(self, draft) -> None:
        """Bytes written to a document and refused at close (EINVAL naming the field) are shown no
        more: the path shows the stored file again at once, not when the kernel's RELEASE comes,
        which is later (and never while a duplicate of the descriptor stays open)."""
        if not isinstance(draft, TextDraft) or draft.apply is None:
            return  # an editor's temporary file keeps its bytes until renamed or removed
        with self._lock:
            if self.drafts.get(draft.path) is draft:
                del self.drafts[draft.path]
        self._drop([draft.path])

    def _creator(self, store_path: str, path: str):
        def create(raw: bytes) -> None:
            self.editor.make(store_path, newnode.sidecar_documents(raw, self.editor.zarr_format, path))
        return create

    def _editor_of(self, entry: Entry, path: str):
        """What a written sidecar or group document changes: the attributes, nothing else."""
        name = posixpath.basename(path)
        if entry.kind == DOCUMENT and name not in (nodes.ZARR_JSON, nodes.ZATTRS):
            raise RefusedError(f"{path}: only a group's zarr.json (v3) or .zattrs (v2) can be written", errno.EACCES)
        if entry.node.meta is None:
            raise RefusedError(f"{path}: the node cannot be read, so it cannot be edited", errno.EIO)

        def apply(raw: bytes) -> None:
            current = self._existing(path)
            if name == nodes.ZATTRS:
                attributes = newnode.parsed_object(raw, path)
            else:
                attributes = newnode.edited_attributes(current.node.meta, self.hierarchy.content(current), raw, path)
            self.editor.edit_attributes(current.node.path, lambda _: attributes)
        return apply

    def unlink(self, path: str) -> None:
        """Every file here is made from a node, so removing one alone deletes no data: it is
        hidden (fs/hidden_files.py), and an array is deleted when the last of its files is,
        whatever the order. So a file manager that stats each file of a selection before deleting
        it finds every one, deleting some of an array's files (a view, even NAME.bin) deletes
        nothing a person did not select, and deleting all of them (rm NAME.*) deletes the array.
        A group's documents and group files go with the group (rmdir)."""
        draft = self.drafts.get(path)
        if draft is not None and not draft.committed and isinstance(draft, TextDraft):
            self.drafts.pop(path)
            return
        entry = self._existing(path)
        if self.read_only:
            raise ReadOnlyError(f"{path}: the mount is read-only")
        if entry.kind == DIR:
            raise RefusedError(f"{path}: a group: rmdir deletes it", errno.EISDIR)
        if entry.kind == NO_TRASH:
            raise RefusedError(f"{path}: says that there is no trash here", errno.EPERM)
        node, name, hidden = entry.node, posixpath.basename(path), self.hierarchy.hidden
        deletable = node.kind == "array" and bool(node.path)  # not the root (SOURCE an array), nor a group
        names = self._names_of(entry, path) if deletable else [path]
        with self._lock:  # of two last files unlinked at once, one deletes the array
            hidden.hide(node.path, name)
            last = deletable and all(hidden.hidden(node.path, posixpath.basename(n)) for n in names)
        if not last:
            log.info("%s hidden (%s)", path, "the array is deleted with its last file" if deletable else
                     "a group's files go with it: rmdir" if node.kind == "group" else "the mount's root stays")
            return self._drop([path])
        try:
            self._retire(node.path, keep=False)
            self.editor.delete(node.path)
        except BaseException:
            hidden.show(node.path, name)  # the array stays, and so does this file
            raise
        hidden.forget(node.path)
        self._drop(names)

    def rename(self, old: str, new: str, flags: int) -> None:
        if flags & RENAME_EXCHANGE:
            raise RefusedError(f"{old}: exchanging entries is not supported", errno.EINVAL)
        draft = self.draft_at(old)
        if draft is not None:
            return self._rename_draft(old, new, draft, flags)
        entry = self._existing(old)
        parent, name = self._parent(new)
        if self.hierarchy.lookup(new) is not None or new in self.drafts:
            raise RefusedError(f"{new}: exists", errno.EEXIST)
        if entry.kind == DIR:
            if not entry.node.path:
                raise RefusedError("the root group cannot be renamed", errno.EBUSY)
            newnode.check_name(name)
            self._free(parent, new, [name], name)
            self._retire(entry.node.path, keep=True)
            self.editor.move(entry.node.path, _child(parent, name))
            self.hierarchy.hidden.forget(entry.node.path)  # its files are shown again, at the new path
            return self._drop([old])
        if entry.kind in (DOCUMENT, GROUPFILE, NO_TRASH):
            raise RefusedError(f"{old}: a group's documents and group files cannot be renamed", errno.EPERM)
        suffix = posixpath.basename(old)[len(entry.stem):]
        if not name.endswith(suffix) or name == suffix:
            raise RefusedError(f"{new}: renaming {posixpath.basename(old)} renames array {entry.node.name!r}: the new "
                               f"name must end with {suffix!r} too", errno.EINVAL)
        stem = name[:-len(suffix)]
        newnode.check_name(stem)
        self._free(parent, new, self.hierarchy.file_names(stem), stem)
        names = self._names_of(entry, old)
        self._retire(entry.node.path, keep=True)
        self.editor.move(entry.node.path, _child(parent, stem))
        self.hierarchy.hidden.forget(entry.node.path)  # its files are shown again, at the new name
        self._drop(names)

    def _rename_draft(self, old: str, new: str, draft, flags: int) -> None:
        """An editor's save: its temporary file renamed over NAME.json (or to another temporary)."""
        if isinstance(draft, NpyDraft) or draft.apply is not None:
            raise RefusedError(f"{old}: still being written", errno.EBUSY)
        target = self.hierarchy.lookup(new)
        name = posixpath.basename(new)
        if target is not None:
            if flags & RENAME_NOREPLACE or target.kind not in (SIDECAR, DOCUMENT):
                raise RefusedError(f"{new}: exists", errno.EEXIST)
            self._editor_of(target, new)(bytes(draft.content))
        elif new in self.drafts or SCRATCH.match(name):
            if flags & RENAME_NOREPLACE and new in self.drafts:
                raise RefusedError(f"{new}: exists", errno.EEXIST)
            draft.path = new
            self.drafts[new] = draft
        elif name.endswith(".json") and len(name) > 5:
            parent, _ = self._parent(new)
            stem = name[:-5]
            newnode.check_name(stem)
            self._free(parent, new, self.hierarchy.file_names(stem), stem)
            self._creator(_child(parent, stem), new)(bytes(draft.content))
        else:
            raise RefusedError(f"{new}: a temporary file can only become NAME.json", errno.EPERM)
        self.drafts.pop(old, None)
        self._drop(self._names_near(new))

    # attributes

    def setxattr(self, path: str, name: str, value: bytes, options: int) -> None:
        if self.draft_at(path) is not None:
            return  # editors copy attributes to their temporary files: accepted, not kept
        key = self._attribute(path, name)
        try:
            parsed = json.loads(value)
        except ValueError:  # setfattr -v m: a value that is no JSON is a string
            try:
                parsed = value.decode()
            except UnicodeDecodeError:
                raise RefusedError(f"{path}: {name}: the value is neither JSON nor UTF-8 text", errno.EINVAL) from None

        def change(attributes: dict) -> dict:
            if options & XATTR_CREATE and key in attributes:
                raise RefusedError(f"{path}: attribute {key!r} exists", errno.EEXIST)
            if options & XATTR_REPLACE and key not in attributes:
                raise RefusedError(f"{path}: no attribute {key!r}", errno.ENODATA)
            return {**attributes, key: parsed}
        self._edit(path, change)

    def removexattr(self, path: str, name: str) -> None:
        key = self._attribute(path, name)

        def change(attributes: dict) -> dict:
            if key not in attributes:
                raise RefusedError(f"{path}: no attribute {key!r}", errno.ENODATA)
            return {k: v for k, v in attributes.items() if k != key}
        self._edit(path, change)

    def _attribute(self, path: str, name: str) -> str:
        if self._existing(path).kind == NO_TRASH:  # it carries the root's node, whose attributes are not its own
            raise RefusedError(f"{path}: says that there is no trash here, and has no attributes", errno.EPERM)
        if self.read_only:
            raise ReadOnlyError(f"{path}: the mount is read-only")
        if not name.startswith(ATTRIBUTE) or len(name) == len(ATTRIBUTE):
            raise RefusedError(f"{path}: {name}: only user.zarr.attr.KEY attributes can be set", errno.ENOTSUP)
        key = name[len(ATTRIBUTE):]
        if name_text(key) is None:  # it would be a JSON key in the node's document
            raise RefusedError(f"{printable(path)}: attribute {printable(key)}: the name is not UTF-8, "
                               f"and attribute names are JSON text", errno.EILSEQ)
        return key

    def _edit(self, path: str, change) -> None:
        entry = self._existing(path)
        if entry.node.meta is None:
            raise RefusedError(f"{path}: the node cannot be read, so it cannot be edited", errno.EIO)
        self.editor.edit_attributes(entry.node.path, change)
        self._drop(self._names_of(entry, path) if entry.kind != DIR else self._group_documents(entry, path))

    # helpers

    def _existing(self, path: str) -> Entry:
        entry = self.hierarchy.lookup(path)
        if entry is None:
            raise RefusedError(f"{path}: no such file", errno.ENOENT)
        return entry

    def _parent(self, path: str) -> tuple[Entry, str]:
        if self.read_only:
            raise ReadOnlyError(f"{path}: the mount is read-only")
        directory, name = posixpath.split(path)
        entry = self.hierarchy.lookup(directory)
        if entry is None:
            raise RefusedError(f"{directory}: no such group", errno.ENOENT)
        if entry.kind != DIR or entry.node.kind != "group":
            raise RefusedError(f"{directory}: not a group", errno.ENOTDIR)
        return entry, name

    def _free(self, parent: Entry, path: str, names: list[str], stored: str | None = None) -> None:
        """EEXIST unless every name is free in the directory (listed files, drafts, and the
        store's own names: a prefix left by another program is never taken over)."""
        listing = self.hierarchy.entries_of(parent)
        directory = posixpath.dirname(path)
        for name in names:
            if name in listing or posixpath.join(directory, name) in self.drafts:
                raise RefusedError(f"{path}: {name} exists", errno.EEXIST)
        if stored and stored in self.store.list_dir(parent.node.path):
            raise RefusedError(f"{path}: the store holds {_child(parent, stored)!r} already", errno.EEXIST)

    def _names_of(self, entry: Entry, path: str) -> list[str]:
        """The paths of every file that shows `entry`'s node in its directory: for an array,
        the names its stem may take, looked up (a directory of thousands of arrays is not
        scanned for each of their files)."""
        directory = posixpath.dirname(path)
        listing = self.hierarchy.entries_of(self._existing(directory))
        if entry.kind in (DOCUMENT, GROUPFILE, NO_TRASH):
            names = [n for n, e in listing.items() if e.node.path == entry.node.path]
        else:
            names = self.hierarchy.file_names(entry.stem)
        return [posixpath.join(directory, n) for n in names
                if (found := listing.get(n)) is not None and found.node.path == entry.node.path]

    def _group_documents(self, entry: Entry, path: str) -> list[str]:
        """A group's folder and the files in it that show the group itself (zarr.json, .zattrs,
        zarr.h5...): an attribute set on the folder changes their bytes, and a size the kernel
        kept would cut a read of the longer document short."""
        own = [posixpath.join(path, n) for n, e in self.hierarchy.entries_of(entry).items()
               if e.kind in (DOCUMENT, GROUPFILE) and e.node.path == entry.node.path]
        return [path, *own]

    def _names_near(self, path: str) -> list[str]:
        stem = _stem(posixpath.basename(path))[0] or posixpath.basename(path)
        return [posixpath.join(posixpath.dirname(path), n) for n in self.hierarchy.file_names(stem)] + [path]

    def _retire(self, path: str, keep: bool) -> None:
        """Arrays open at or below store path `path` stop serving, once a write-back in
        progress is done; what was written is stored first if the node is kept (OpenArrays.retire)."""
        self.arrays.retire(path, keep, flush_wait(self.store.capabilities, self.remote_timeout))

    def _drop(self, paths: list[str]) -> None:
        self.invalidate(paths)


def flush_wait(capabilities: Capabilities, timeout: float) -> float:
    """The longest a write-back may take: on a remote store each request is bounded by the
    store's `timeout` and a conflicting flush is tried CONFLICT_RETRIES times."""
    if capabilities.remote:
        return max(FLUSH_WAIT, timeout * CONFLICT_RETRIES)
    return FLUSH_WAIT


def _child(parent: Entry, name: str) -> str:
    return nodes.key_of(parent.node.path, name)


def _stem(name: str) -> tuple[str, str]:
    for suffix in (".npy", ".json"):
        if name.endswith(suffix):
            return name[:-len(suffix)], suffix
    return "", ""
