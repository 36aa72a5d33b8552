"""Version directories: every branch, tag and snapshot of an Icechunk repository as a directory of
the mount's root, `@branch.NAME/`, `@tag.NAME/`, `@SNAPSHOTID/`, each a whole read-only hierarchy.

`VersionedFileSystem` answers what `FileSystem` answers, routing each path: a first component
that names a version (and no node of the mount's own hierarchy: a Zarr node may be called `@x`,
and nothing is ever hidden) goes to that version's own FileSystem, made when first looked up over
the repository's read-only store of it (stores/icechunk_repository.py), with the rest of the path;
everything else goes to the mount's FileSystem. The version directories are not in the root's
listing (a `find`, `du` or `rsync` of the mount would walk every version), but are found by name;
the file `@versions` of the root, as hidden, lists them (`cat MOUNT/@versions`). A tag's or a
snapshot's directory never changes; a branch's shows the head it had when looked up, and a lookup
more than `metadata_ttl` seconds after the branch was last looked at asks for its head again: a
new head is a new file system of that snapshot (files open in the old one go on reading from it,
but the kernel keeps one cache of pages per path: of either head).

Each file of a version has its own inode number (the version's name and snapshot are in it): `diff`
and `cp -a` take equal numbers on one device for one file, and the kernel keeps no page of a
branch's old head for its new one. A version's root has its commit's message, parent and snapshot
as extended attributes.
"""

import errno
import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NoReturn

from zarrfs.engine import holes
from zarrfs.errors import ZarrfsError
from zarrfs.fs.filesystem import (
    Attributes,
    EditsFactory,
    FileSystem,
    FileSystemStats,
    KernelCaches,
    NoKernel,
    Options,
    refuse,
)
from zarrfs.fs.hierarchy import Entry
from zarrfs.fs.inodes import inode_number
from zarrfs.fs.kernel_caching import KernelCaching
from zarrfs.nodes.documents import ZARR_JSON
from zarrfs.stores.icechunk_repository import BRANCH, IcechunkRepository, Version
from zarrfs.stores.icechunk_store import IcechunkStore
from zarrfs.stores.source_url import open_source

log = logging.getLogger(__name__)

KEPT = 8  # version file systems kept without open files: each has its own caches, within cache_size / KEPT
XATTR = "user.icechunk."
LISTING = "/@versions"  # the version directories' names, one a line: a file, as hidden as they are
VERSION_XATTRS = ("snapshot", "message", "parent")


def mount_core(source: str, options: Options, edits: EditsFactory,
               kernel: KernelCaches | None = None) -> "FileSystem | VersionedFileSystem":
    """The file system of SOURCE: a FileSystem, or for an Icechunk repository one that also
    shows every version of it."""
    opened = open_source(source, options.read_only, options.remote, options.follow_symlinks, options.icechunk,
                         options.recovery_dir)
    try:
        main = FileSystem(source, options, edits, kernel, store=opened.store)
    except BaseException:
        if opened.repository is not None:
            opened.repository.close()  # its watch let go: a process may go on (the Python API, tests)
        raise
    if opened.repository is None:
        return main
    return VersionedFileSystem(main, opened.repository, edits, opened.commits)


@dataclass(frozen=True)
class Routed:
    """An entry of a version's file system, as its listing gave it: attributes() asks that one."""

    version: "Shown"
    entry: Entry


@dataclass
class Shown:
    """A version as this mount shows it: its commit, and its file system."""

    version: Version
    core: FileSystem | None  # None: a snapshot with no Zarr node at its root (a repository's first)
    handles: int = 0
    listed: dict[str, tuple[list, list]] = field(default_factory=dict)  # path -> (its listing, routed)
    checked: float = field(default_factory=time.monotonic)  # when its head was last looked up (a branch's)
    replaced: bool = False  # a branch's older head: its file system stops when its last file closes
    stopped: bool = False  # its file system stopped: no file opens in it any more

    def open_to_new_files(self) -> bool:
        """Whether a file may open in it (under the lock): not stopped, nor about to be (a
        replaced head whose last file was closed)."""
        return not self.stopped and not (self.replaced and self.handles == 0)


OPEN_TRIES = 3  # opens of a file in a branch whose head is replaced each time before the file is open


class VersionedFileSystem:
    """The mount's FileSystem, and a read-only FileSystem for each version looked up."""

    def __init__(self, main: FileSystem, repository: IcechunkRepository, edits: EditsFactory,
                 commits: IcechunkStore | None = None):
        self.main, self.repository, self._edits, self.commits = main, repository, edits, commits
        self.options, self.store = main.options, main.store
        self._own = repository.version(main.options.icechunk.name())  # the mount's own version, as mounted
        self._shown: OrderedDict[str, Shown] = OrderedDict()
        self._handles: dict[int, tuple[Shown | None, int]] = {}
        self._texts: dict[int, bytes] = {}  # handles of @versions: its bytes when opened
        self._next_fh = 1
        self._lock = threading.RLock()  # _opened adds a handle under it

    # what the adapter reads of the core

    @property
    def writes(self) -> int:
        return self.main.writes + sum(s.core.writes for s in list(self._shown.values()) if s.core is not None)

    @property
    def unstored(self) -> list[str]:
        return self.main.unstored

    def start(self) -> None:
        self.main.start()

    def stop(self) -> None:
        try:
            self.main.stop()  # every write stored in the session; a version is read-only: nothing of it to store
            self._stop_versions()
            if self.commits is not None:
                self._stop_commits(self.commits)
        finally:
            self.repository.close()  # last: the commit at unmount calls into icechunk

    def _stop_commits(self, commits: IcechunkStore) -> None:
        """The mount's branch: committed if -o commit_on_unmount says so, its arrays being made given up."""
        message = self.options.icechunk.commit_on_unmount
        if message and commits.changed():
            try:
                self.commit(message)
            except ZarrfsError as e:  # a conflict says where the writes are kept; any other failure loses them
                log.error("at unmount: %s", e)
        commits.close()  # arrays being made and not finished are given up, as drafts are

    def _stop_versions(self) -> None:
        """Every version's file system stops, a branch's older heads still open included: their
        chunks decoded ahead are freed and their threads go (nothing frees them otherwise)."""
        with self._lock:
            shown = {id(s): s for s in [*self._shown.values(), *(s for s, _ in self._handles.values() if s)]}
            self._shown.clear()
        for version in shown.values():
            self._stop(version)

    # commits of the mount's own branch

    def commit(self, message: str) -> str:
        """Every write stored in the branch's session, then committed: the new snapshot's id."""
        if self.commits is None:
            refuse(errno.EROFS, f"{self.store.root}: a commit needs a branch mounted writable")
        if not message.strip():
            refuse(errno.EINVAL, f"{self.store.root}: a commit needs a message")
        self.main.arrays.flush_all()
        snapshot = self.commits.commit(message)  # a conflict's error: the adapter logs the one line
        log.info("%s: committed %s (%s)", self.store.root, snapshot, message)
        return snapshot

    @property
    def own(self) -> Version | None:
        """The mount's own version: as mounted, or the snapshot its branch's session stands on
        now (after a commit, a move, or a conflict's new branch)."""
        if self.commits is not None and (self._own is None or self._own.snapshot != self.commits.snapshot):
            self._own = self.repository.version(f"@{self.commits.snapshot}")
        return self._own

    # routing

    def _listing(self, path: str) -> bool:
        """Whether `path` is the listing of versions (unless a node of the hierarchy has its name)."""
        return path == LISTING and self.main.hierarchy.lookup(path) is None

    def _versions_text(self) -> bytes:
        return "".join(f"{name}\n" for name in self.repository.versions()).encode()

    def _route(self, path: str) -> tuple[Shown | None, str]:
        """(the version shown at `path`, None for the mount's own hierarchy; the path within it)."""
        if not path.startswith("/@") or self._listing(path):
            return None, path
        name, _, rest = path[1:].partition("/")
        if self.main.hierarchy.lookup(f"/{name}") is not None:
            return None, path  # a node of that name: it wins, the version has no directory here
        return self._shown_version(name, path), f"/{rest}"

    def _shown_version(self, name: str, path: str) -> Shown:
        with self._lock:
            shown = self._shown.get(name)
            if shown is not None:
                self._shown.move_to_end(name)
                if not self._may_have_moved(name, shown):
                    return shown
        try:
            version = self.repository.version(name)
        except ZarrfsError as e:
            if shown is None:
                raise
            log.warning("%s: shown as it was (%s): its head could not be looked up again: %s", name,
                        shown.version.snapshot, e)
            shown.checked = time.monotonic()  # asked again after metadata_ttl, not at every lookup
            return shown
        if version is None:
            refuse(errno.ENOENT, path)
        if shown is not None and version.snapshot == shown.version.snapshot:
            shown.checked = time.monotonic()
            return shown
        fresh = Shown(version, self._version_core(version))
        with self._lock:
            current = self._shown.get(name)
            if current is not shown and current is not None and current.version.snapshot == version.snapshot:
                self._stop(fresh)  # another lookup made it first
                return current
            self._shown[name] = fresh
            self._shown.move_to_end(name)
            if current is not None:
                self._retire(current)
            self._forget_unused()
        return fresh

    def _may_have_moved(self, name: str, shown: Shown) -> bool:
        """Whether a branch's head is looked up again: its directory follows the branch within
        metadata_ttl, as other remote metadata does."""
        return name.startswith(BRANCH) and time.monotonic() - shown.checked >= self.options.remote.metadata_ttl

    def _version_core(self, version: Version) -> FileSystem | None:
        options = replace(self.options, read_only=True, cache_bytes=max(self.options.cache_bytes // KEPT, 1 << 20),
                          ahead_bytes=self.options.ahead_bytes // KEPT,
                          remote=replace(self.options.remote, prefetch_size=self.options.remote.prefetch_size // KEPT))
        store = self.repository.store(version)
        return None if store.stat(ZARR_JSON) is None else FileSystem("", options, self._edits, NoKernel(), store=store)

    def _retire(self, shown: Shown) -> None:
        """A branch's older head, replaced: stopped now, or when its last open file is closed."""
        shown.replaced = True
        if shown.handles == 0:
            self._stop(shown)

    @staticmethod
    def _stop(shown: Shown) -> None:
        shown.stopped = True
        if shown.core is not None:
            shown.core.stop()

    def _forget_unused(self) -> None:
        """Past KEPT versions, those least recently looked up with no open file are let go, their
        chunks decoded ahead freed and their threads gone (stopped: nothing frees them otherwise)."""
        for name in [n for n, s in self._shown.items() if s.handles == 0][:max(0, len(self._shown) - KEPT)]:
            self._stop(self._shown.pop(name))

    def _core(self, shown: Shown | None, path: str = "") -> FileSystem:
        if shown is None:
            return self.main
        if shown.core is None:  # an empty snapshot: its directory holds nothing
            refuse(errno.ENOENT if path.strip("/") else errno.EROFS, path or shown.version.name)
        return shown.core

    def _own_inode(self, shown: Shown | None, attributes: Attributes) -> Attributes:
        if shown is not None:  # one file in two versions (or two heads of a branch) is two files
            version = shown.version
            attributes = {**attributes, "st_ino": inode_number(f"{version.name}\0{version.snapshot}\0"
                                                               f"{attributes['st_ino']}")}
        return attributes

    # metadata

    def getattr(self, path: str) -> Attributes:
        if self._listing(path):
            return self._listing_attributes()
        shown, inner = self._route(path)
        if shown is not None and shown.core is None and inner == "/":
            return self._empty_root(shown)
        return self._own_inode(shown, self._core(shown, inner).getattr(inner))

    def _listing_attributes(self) -> Attributes:
        """@versions: a read-only file of the mount's root, made when read (its size as listed now)."""
        size = len(self._versions_text())
        return {**self.main.getattr("/"), "st_ino": inode_number(LISTING), "st_mode": stat.S_IFREG | 0o444,
                "st_nlink": 1, "st_size": size, "st_blocks": -(-size // 512)}

    def _empty_root(self, shown: Shown) -> Attributes:
        """An empty snapshot's directory: the mount root's attributes at the commit's time."""
        written = shown.version.written_ns
        return self._own_inode(shown, {**self.main.getattr("/"), "st_mtime": written, "st_ctime": written,
                                       "st_atime": written})

    def attributes(self, entry: "Entry | Routed") -> Attributes | None:
        """A listed entry's attributes (FileSystem.attributes); None: the name is listed alone."""
        if isinstance(entry, Routed):
            attributes = entry.version.core.attributes(entry.entry)
            return None if attributes is None else self._own_inode(entry.version, attributes)
        return self.main.attributes(entry)

    def readdir(self, path: str) -> list:
        shown, inner = self._route(path)
        if shown is None:
            return self.main.readdir(path)
        if shown.core is None and inner == "/":
            root = self.main.readdir("/")[0][1]
            return [(".", root), ("..", root)]  # the kernel takes the directory's own from getattr
        own = self._core(shown, inner).readdir(inner)
        known = shown.listed.get(inner)
        if known is not None and known[0] is own:
            return known[1]  # the same list while the listing holds: the adapter keeps its attributes
        listing = [(name, Routed(shown, entry)) for name, entry in own]
        if inner == "/":  # a version's parent is the mount's root
            listing[1] = ("..", self.main.readdir("/")[0][1])
        shown.listed[inner] = (own, listing)
        return listing

    def statfs(self) -> FileSystemStats:
        return self.main.statfs()

    def kernel_caching(self) -> KernelCaching:
        """The mount's own choice (every version is read-only), its names and attributes kept no
        longer than metadata_ttl, and its pages only while a file's mtime and size stay the same:
        a branch's directory is looked up again after metadata_ttl, and its newer head's files have
        that commit's time (libfuse keeps a path's node, so new inode numbers alone would not
        drop the old head's pages)."""
        own = self.main.kernel_caching()
        ttl = self.options.remote.metadata_ttl
        return replace(own, attr_timeout=min(own.attr_timeout, ttl), entry_timeout=min(own.entry_timeout, ttl),
                       keep_pages=False, recheck_pages_after=min(own.recheck_pages_after or ttl, ttl))

    def utimens(self, path: str) -> None:
        shown, inner = self._route(path)
        self._core(shown, inner).utimens(inner)

    def access(self, path: str, amode: int) -> None:
        if self._listing(path):
            if amode & (os.W_OK | os.X_OK):
                refuse(errno.EACCES, path)
            return
        shown, inner = self._route(path)
        if shown is not None and shown.core is None and inner == "/" and not amode & os.W_OK:
            return  # an empty snapshot's directory may be read and searched
        self._core(shown, inner).access(inner, amode)

    # open files: handles of ours, each leading to its file system's own

    def open(self, path: str, flags: int) -> int:
        if self._listing(path):
            if flags & os.O_ACCMODE != os.O_RDONLY:
                refuse(errno.EACCES, path)
            return self._add(None, -1, self._versions_text())
        return self._opened(path, lambda core, inner: core.open(inner, flags))

    def create(self, path: str, flags: int = 0) -> int:
        return self._opened(path, lambda core, inner: core.create(inner, flags))

    def _opened(self, path: str, opening: Callable[[FileSystem, str], int]) -> int:
        """A handle of ours for the file at `path`, opened by opening(file system, its path). A
        branch's head may be replaced (and its file system stopped) between the lookup and the
        open: the file is then opened again in the head shown now (a few times: a branch that
        moves on at every lookup is refused, ESTALE)."""
        for _ in range(OPEN_TRIES):
            shown, inner = self._route(path)
            core = self._core(shown, inner)
            fh = opening(core, inner)
            with self._lock:
                if shown is None or shown.open_to_new_files():
                    return self._add(shown, fh)
            core.release(fh)
        refuse(errno.ESTALE, path)

    def _add(self, shown: Shown | None, fh: int, text: bytes | None = None) -> int:
        """A handle of ours for `fh` of the version's (or the mount's) file system; `text`: the
        bytes of @versions, which no file system has."""
        with self._lock:
            ours, self._next_fh = self._next_fh, self._next_fh + 1
            self._handles[ours] = (shown, fh)
            if text is not None:
                self._texts[ours] = text
            if shown is not None:
                shown.handles += 1
        return ours

    def _handle(self, fh: int) -> tuple[FileSystem, int]:
        found = self._handles.get(fh)
        if found is None:
            refuse(errno.EBADF, f"file handle {fh}")
        return self._core(found[0]), found[1]

    def uncached(self, fh: int) -> bool:
        if fh in self._texts:
            return True  # made when opened: never from the page cache
        found = self._handles.get(fh)
        return found is not None and self._core(found[0]).uncached(found[1])

    def pages_current(self, fh: int) -> bool:
        found = self._handles.get(fh)
        return found is None or self._core(found[0]).pages_current(found[1])

    def node_of(self, fh: int) -> str:
        if fh in self._texts:
            return LISTING
        found = self._handles.get(fh)
        if found is None:
            return f"file handle {fh}"
        shown, inner = found
        said = self._core(shown).node_of(inner)
        return said if shown is None else f"{shown.version.name}/{said}"

    def read(self, fh: int, offset: int, size: int) -> bytes:
        if fh in self._texts:
            return self._texts[fh][offset:offset + size]
        core, inner = self._handle(fh)
        return core.read(inner, offset, size)

    def read_source(self, fh: int, offset: int, size: int):
        if fh in self._texts:
            return None, None  # made when opened: read() gives its bytes
        core, inner = self._handle(fh)
        return core.read_source(inner, offset, size)

    def read_into(self, fh: int, offset: int, out) -> int:
        if fh in self._texts:
            data = self.read(fh, offset, len(out))
            out[:len(data)] = memoryview(data)
            return len(data)
        core, inner = self._handle(fh)
        return core.read_into(inner, offset, out)

    def lseek(self, fh: int, offset: int, whence: int) -> int:
        if fh in self._texts:
            try:
                return holes.seek(None, 1, len(self._texts[fh]), offset, whence)
            except holes.SeekError as e:
                refuse(e.errno, LISTING)
        core, inner = self._handle(fh)
        return core.lseek(inner, offset, whence)

    def write(self, fh: int, data, offset: int) -> int:
        core, inner = self._handle(fh)
        return core.write(inner, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        shown, inner = self._route(path)
        inner_fh = self._handles[fh][1] if fh in self._handles else None
        self._core(shown, inner).truncate(inner, length, inner_fh)

    def flush(self, fh: int) -> None:
        if fh in self._texts:
            return
        core, inner = self._handle(fh)
        core.flush(inner)

    def fsync(self, fh: int) -> None:
        if fh in self._texts:
            return
        core, inner = self._handle(fh)
        core.fsync(inner)

    def release(self, fh: int) -> None:
        with self._lock:
            if self._texts.pop(fh, None) is not None:
                self._handles.pop(fh, None)
                return
            found = self._handles.pop(fh, None)
            last = False  # the last open file of a branch's older head
            if found is not None and found[0] is not None:
                found[0].handles -= 1
                last = found[0].replaced and found[0].handles == 0
        if found is not None:
            self._core(found[0]).release(found[1])
            if last:
                self._stop(found[0])

    # hierarchy edits: a version is read-only, its own FileSystem refuses them

    def mkdir(self, path: str) -> None:
        shown, inner = self._route(path)
        self._core(shown, inner).mkdir(inner)

    def rmdir(self, path: str) -> None:
        shown, inner = self._route(path)
        self._core(shown, inner).rmdir(inner)

    def unlink(self, path: str) -> None:
        shown, inner = self._route(path)
        self._core(shown, inner).unlink(inner)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        for path in (old, new):  # a version is read-only, and no node moves into or out of one
            if self._route(path)[0] is not None:
                refuse(errno.EROFS, path)
        self.main.rename(old, new, flags)

    def change_owner_or_mode(self, path: str) -> None:
        shown, inner = self._route(path)
        self._core(shown, inner).change_owner_or_mode(inner)

    def refuse_change(self, path: str) -> NoReturn:
        shown, inner = self._route(path)
        self._core(shown, inner).refuse_change(inner)

    # extended attributes: a version's commit on its root, the mount's own on the mount's root

    def listxattr(self, path: str) -> list[str]:
        if self._listing(path):
            return []
        shown, inner = self._route(path)
        empty = shown is not None and shown.core is None and inner == "/"
        names = [] if empty else self._core(shown, inner).listxattr(inner)
        if inner == "/" and self.options.xattrs:
            names += [XATTR + name for name in VERSION_XATTRS]
        return names

    def getxattr(self, path: str, name: str) -> bytes:
        shown, inner = self._route(path)
        if inner == "/" and self.options.xattrs and name.startswith(XATTR):
            return self._version_xattr(shown, name[len(XATTR):], path)
        if self._listing(path):
            refuse(errno.ENODATA, f"{path}: {name}")
        return self._core(shown, inner).getxattr(inner, name)

    def _version_xattr(self, shown: Shown | None, name: str, path: str) -> bytes:
        version = self.own if shown is None else shown.version
        if version is None or name not in VERSION_XATTRS:
            refuse(errno.ENODATA, f"{path}: {XATTR}{name}")
        value = {"snapshot": version.snapshot, "message": version.message, "parent": version.parent}[name]
        if value is None:  # the first snapshot has no parent
            refuse(errno.ENODATA, f"{path}: {XATTR}{name}")
        return value.encode("utf-8", "surrogateescape")

    def setxattr(self, path: str, name: str, value: bytes, options: int) -> None:
        if path == "/" and name == XATTR + "commit":  # setfattr -n user.icechunk.commit -v MESSAGE MOUNT
            self.commit(value.decode("utf-8", "surrogateescape"))
            return
        shown, inner = self._route(path)
        self._core(shown, inner).setxattr(inner, name, value, options)

    def removexattr(self, path: str, name: str) -> None:
        shown, inner = self._route(path)
        self._core(shown, inner).removexattr(inner, name)

