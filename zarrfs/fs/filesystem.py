"""The file system without FUSE: paths and handles in, typed records out, typed errors raised.

FileSystem is the composition root of a mount (store, hierarchy, chunk cache, open arrays,
stored usage, texts, previews, the write bound, hierarchy edits) and answers every request of
one: attributes, listings, opens, reads, writes, flushes, edits. It knows nothing of libfuse:
fuse/operations.py converts its records and errors, and the kernel's page caches are reached
through the KernelCaches it is given (fuse/page_invalidation.py in a mount, nothing here).
Nothing here decodes or encodes: hierarchy maps paths to nodes, RawFile and Array do the work.
"""

import errno
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn, Protocol, TypedDict

import numpy as np

from zarrfs.engine import growth, holes, recovery, stored_as_is
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.engine.write_bound import DIRTY_LIMIT, AfterWrite, WriteBound
from zarrfs.errors import AlreadyLoggedError, RoutineError, ZarrfsError
from zarrfs.format.v3 import ArrayMetadata, GroupMetadata
from zarrfs.fs import growable
from zarrfs.fs.group_files import GroupFiles
from zarrfs.fs.hierarchy import (
    DATA,
    DIR,
    DOCUMENT,
    GROUPFILE,
    PREVIEW,
    PYRAMID,
    SIDECAR,
    TEXT,
    Entry,
    Hierarchy,
    Node,
    read_only_view,
)
from zarrfs.fs.inodes import entry_key, inode_number
from zarrfs.fs.kernel_caching import KernelCaching, kernel_caching, trusted_for
from zarrfs.fs.open_arrays import OpenArray, OpenArrays
from zarrfs.fs.ownership import Ownership
from zarrfs.fs.stored_usage import Usage
from zarrfs.fs.xattrs import ExtendedAttributes
from zarrfs.stores.contract import Store
from zarrfs.stores.icechunk_repository import IcechunkChoice
from zarrfs.stores.source_url import RemoteOptions, open_store
from zarrfs.views import DEFAULT_VIEWS, hdf5, preview
from zarrfs.views.prefixed_file import PrefixedFile
from zarrfs.views.text import Texts

log = logging.getLogger(__name__)

BLKSIZE = 1 << 20  # st_blksize: tools that honour it issue 1 MiB reads
REMOTE_FETCHERS = 64  # chunks fetched ahead at once from an object store, within prefetch_size: a thread waiting on a GET costs little, and 16 held a stream at 20 ms each way to 0.27 GB/s where 48 made 0.36


@dataclass
class Options:
    read_only: bool = False
    recovery_dir: str = field(default_factory=recovery.default_directory)
    follow_symlinks: bool = False  # -o symlinks=follow: a trusted store's links out of it are read through (contained.py)
    log_file: str | None = None  # a daemon's log (cli/command.py, daemon_log.py): None for syslog, or the default file without it
    remote: RemoteOptions = field(default_factory=RemoteOptions)
    cache_bytes: int = 512 << 20
    ahead_bytes: int = 16 << 20  # of cache_bytes: chunks decoded ahead of sequential readers
    flush_interval: float = 2.0
    dirty_limit: int = DIRTY_LIMIT  # dirty decoded bytes per array before a write flushes (write_bound.py)
    views: tuple[str, ...] = DEFAULT_VIEWS  # header views beside each NAME.bin
    header_cache_bytes: int = 32 << 20
    previews: bool = False  # NAME.png beside arrays of two or more dimensions
    xattrs: bool = True  # user.zarr.* and user.mime_type; off: none, and the kernel stops asking
    zero_copy: bool = True  # READs of stored-as-is bytes answered from the stored files (stored_as_is.py)
    ownership: Ownership = field(default_factory=Ownership)  # -o uid=, gid=, umask=: the owner and modes shown
    icechunk: IcechunkChoice = field(default_factory=IcechunkChoice)  # -o icechunk, branch=, tag=, snapshot=
    grow: str = "marked"  # -o grow=: which arrays grow along dimension 0 (fs/growable.py)


class Attributes(TypedDict):
    """A file's attributes, as stat(2) gives them (times in ns)."""

    st_ino: int
    st_mode: int
    st_nlink: int
    st_size: int
    st_uid: int
    st_gid: int
    st_blksize: int
    st_blocks: int
    st_mtime: int
    st_ctime: int
    st_atime: int


class FileSystemStats(TypedDict):
    """statvfs(3) of the store's file system."""

    f_bsize: int
    f_frsize: int
    f_blocks: int
    f_bfree: int
    f_bavail: int
    f_files: int
    f_ffree: int
    f_favail: int
    f_namemax: int


class KernelCaches(Protocol):
    """What the kernel keeps of the files (attributes, pages), dropped when they change under it
    (fuse/page_invalidation.Siblings in a mount)."""

    def opened(self, path: str) -> None: ...

    def wrote(self, siblings: tuple[str, tuple[str, ...]]) -> None: ...

    def refresh(self, path: str) -> None: ...

    def drop(self, paths: list[str]) -> None: ...


class NoKernel:
    """No kernel in the loop (tests, tools): nothing is cached, nothing to drop."""

    def opened(self, path: str) -> None:
        pass

    def wrote(self, siblings: tuple[str, tuple[str, ...]]) -> None:
        pass

    def refresh(self, path: str) -> None:
        pass

    def drop(self, paths: list[str]) -> None:
        pass


class HierarchyChanges(Protocol):
    """What the file system asks of hierarchy editing (edits/hierarchy_edits.py, a layer above)."""

    def draft_at(self, path: str): ...

    def attributes(self, draft, path: str) -> Attributes: ...

    def mkdir(self, path: str) -> None: ...

    def rmdir(self, path: str) -> None: ...

    def create(self, path: str, flags: int): ...

    def open_edit(self, entry: Entry, path: str, flags: int): ...

    def reopen(self, path: str, flags: int): ...

    def closed(self, draft) -> None: ...

    def release(self, draft) -> None: ...

    def unlink(self, path: str) -> None: ...

    def rename(self, old: str, new: str, flags: int) -> None: ...

    def setxattr(self, path: str, name: str, value: bytes, options: int) -> None: ...

    def removexattr(self, path: str, name: str) -> None: ...


class EditsFactory(Protocol):
    """Makes the hierarchy editing of a file system from the parts it uses (HierarchyEdits)."""

    def __call__(self, store: Store, hierarchy: Hierarchy, arrays: OpenArrays, cache: ChunkCache,
                 invalidate: Callable[[list[str]], None], *, read_only: bool, ownership: Ownership,
                 dirty_limit: int, remote_timeout: float) -> HierarchyChanges: ...


DataFile = RawFile | PrefixedFile | hdf5.GroupFile  # an open file's bytes, computed as read


@dataclass
class Handle:
    entry: Entry | None  # None for a draft
    content: bytes = b""  # sidecars, documents and headers: a snapshot
    array: OpenArray | None = None
    file: DataFile | None = None  # the array's bytes as this entry shows them
    siblings: tuple = ("", ())  # its path, and those of the other files showing the same bytes
    writable: bool = False
    appends: bool = False  # opened with O_APPEND: every write goes at the end of the file
    wrote: bool = False
    pages_current: bool = True  # False: opened after another writer changed the array, and the kernel's pages with it
    draft: object = None  # a file being written that is no array's data yet (drafts.py)


def refuse(code: int, what: str) -> NoReturn:
    """An answer with errno `code` (the adapter logs it only if it is EIO, naming the file)."""
    raise RoutineError(f"{what}: {os.strerror(code)}", code)


class FileSystem:
    """A Zarr hierarchy as files. `source`: a directory or a URL (stores/source_url.py);
    `edits`: makes the hierarchy editing (edits.hierarchy_edits.HierarchyEdits); `kernel`: the
    kernel's caches of the files, when a kernel serves them; `store`: the store SOURCE opened to
    already (fs/versions.py opens an Icechunk repository's), else it is opened here."""

    def __init__(self, source: str, options: Options, edits: EditsFactory, kernel: KernelCaches | None = None,
                 store: Store | None = None):
        self.options = options
        self.kernel = kernel if kernel is not None else NoKernel()
        self.store = store if store is not None else open_store(source, options.read_only, options.remote,
                                                                 options.follow_symlinks)
        self._owns_store = store is None  # closed at stop(); a store given is its giver's to close
        self.hierarchy = Hierarchy(self.store, options.views, options.header_cache_bytes, options.previews)
        self.previews = preview.Previews(options.cache_bytes // 16)
        self.cache = ChunkCache(options.cache_bytes, *self._read_ahead())
        self.usage = Usage(self.store, self._trusted_for())  # mtimes, stored sizes
        # rendered NAME.txt files, within the cache's bound; a count a store error stopped is made again
        # as the stored state is looked at again
        self.texts = Texts(options.cache_bytes // 4, self.usage.lifetime)
        self.arrays = OpenArrays(self.store, self.cache, self.usage, options.read_only, options.flush_interval,
                                 options.recovery_dir, self._reshaped,  # arrays open through the mount, and their write-back
                                 lambda: self.hierarchy.copy if self.hierarchy.consolidated is not None else None)
        self.write_bound = WriteBound(options.dirty_limit)
        # path -> (listing, its state (readdir), entries shown, when a text left out is to be counted again)
        self._listed: dict[str, tuple[dict, tuple, list, float]] = {}
        self.writes = 0  # writes through the file system: attributes listed before them are stale
        self._handles: dict[int, Handle] = {}
        self._next_fh = 1
        self._lock = threading.Lock()  # of the handle table
        self.unstored = self.arrays.unstored  # arrays whose written data could not be stored at shutdown
        self.edits = edits(self.store, self.hierarchy, self.arrays, self.cache, self._edited,
                           read_only=options.read_only, ownership=options.ownership, dirty_limit=options.dirty_limit,
                           remote_timeout=options.remote.timeout)  # mkdir, create, unlink, rename, attribute edits
        self.xattrs = ExtendedAttributes(self.hierarchy, options.xattrs, lambda path: self.edits.draft_at(path)
                                         is not None)
        self.group_files = GroupFiles(self.hierarchy, self.kernel, self._shared_raw, self._listed_stale)
        if not options.read_only:
            removed = self.store.remove_temporaries()
            if removed:
                log.warning("removed %d temporary files left by an interrupted write", removed)

    def _read_ahead(self) -> tuple[int, int | None]:
        """(budget, workers) for chunks decoded ahead of sequential readers. An object store
        answers after a round trip: there, many chunks are fetched at once, within prefetch_size."""
        if self.store.capabilities.remote:
            return self.options.remote.prefetch_size, self.store.capabilities.stream_fetchers or REMOTE_FETCHERS
        return self.options.ahead_bytes, self.store.capabilities.stream_fetchers

    # lifecycle

    def start(self) -> None:
        """Serving begins: the flusher, and the watcher of arrays held open (another writer's
        change drops the kernel's pages: kernel_caching.py); a read-only mount of a local store
        needs none, the kernel dropping its pages for a new mtime."""
        self.arrays.start()
        if self.store.capabilities.remote or not self.options.read_only:
            threading.Thread(target=self._watch_stored_changes, name="watcher", daemon=True).start()

    def stop(self) -> None:
        """Serving ends: the flusher stops, then every write is stored (or saved for recovery);
        the chunks decoded ahead are freed and their threads go; then the store, if this file
        system opened it, is closed."""
        try:
            self.arrays.stop()
            self.cache.ahead.close()
        finally:
            if self._owns_store:  # its descriptors too: a process may open and stop many (the tests, the Python API)
                self.store.close()

    def kernel_caching(self) -> KernelCaching:
        """How long the kernel may keep attributes, names and pages of this store's files."""
        return kernel_caching(self.store.capabilities, self.options.read_only, self._trusted_for())

    def _trusted_for(self) -> float:
        """Seconds stored listings and the kernel's attributes are trusted (kernel_caching.py)."""
        return trusted_for(self.store.capabilities, self.options.remote.metadata_ttl)

    # metadata

    def _entry(self, path: str) -> Entry:
        entry = self.hierarchy.lookup(path)
        return entry if entry is not None else refuse(errno.ENOENT, path)

    def getattr(self, path: str) -> Attributes:
        draft = self.edits.draft_at(path)
        if draft is not None:
            return self.edits.attributes(draft, path)
        return self._attributes(self._entry(path))

    def attributes(self, entry: Entry) -> Attributes | None:
        """A listed entry's attributes, as readdirplus gives them with its name (binding.ZarrFUSE).
        None for a NAME.txt a listing can no longer size, its stored values changed since it was
        listed (readdir): named alone, the kernel asks for its attributes by name (getattr), and
        the next listing leaves it out. A listing never counts a text past its bounds, nor fails
        for one text that cannot be made."""
        if entry.kind == TEXT and not self._listed_text(entry):
            return None
        return self._attributes(entry)

    def _attributes(self, entry: Entry) -> Attributes:
        st, owns, writable = entry.node.stat, self.options.ownership, not self.options.read_only
        newest = 0  # a group file's: the newest time of what it shows, found with its size (once a stat)
        if entry.kind == DIR:
            mode, size = owns.directory(writable), 0
        elif entry.kind == SIDECAR or entry.kind == DOCUMENT and entry.node.kind == "group":
            mode, size = owns.file(writable), len(self.hierarchy.content(entry))
        elif entry.kind == DATA:
            mode, size = owns.file(writable and not read_only_view(entry), st.st_mode), self._data_size(entry)
            if entry.node.meta is not None:
                self.notice_stored_change(entry.node.path)
        elif entry.kind == PREVIEW:  # uncompressed: its size follows from its width and height
            mode, size = owns.file(False), preview.png_size(*self.hierarchy.previews.of(entry.node)[1].size)
        elif entry.kind == TEXT:  # the true size, once per version (textview.Texts.size): splice copies no further;
            # a listing leaves out what it cannot count (readdir), a stat by name counts it
            mode, size = owns.file(False), self.texts.size(self.store, entry.node, self.cache, self._values(entry.node))
        elif entry.kind == GROUPFILE:  # from metadata alone: a listing never makes the file
            mode, (size, newest) = owns.file(False), self.hierarchy.group_file_facts(entry, self._stored_times)
        else:
            mode, size = owns.file(False), len(self.hierarchy.content(entry))
        mtime, blocks = self._stored(entry, size, newest)
        uid, gid = owns.owner(st)
        return {"st_ino": inode_number(entry_key(entry)), "st_mode": mode, "st_nlink": 2 if entry.kind == DIR else 1,
                "st_size": size, "st_uid": uid, "st_gid": gid, "st_blksize": BLKSIZE, "st_blocks": blocks,
                "st_mtime": mtime, "st_ctime": mtime, "st_atime": mtime}

    def _stored(self, entry: Entry, size: int, newest: int) -> tuple[int, int]:
        """(mtime in ns, st_blocks). An array's files change when any of its stored values does,
        and cost what its chunks take encoded (see stored_usage.py); a fill value that is not zero
        bytes, or data not yet stored, counts in full, so that no tool takes it for a hole. A
        group file's changes with `newest` (Hierarchy.group_file_facts) or a write below it."""
        node = entry.node
        if entry.kind == GROUPFILE:
            return self.group_files.mtime(entry, newest, self.arrays.last_writes()), -(-size // 512)
        if entry.kind not in (DATA, TEXT, PREVIEW) or node.meta is None:  # made from the documents
            return node.stat.st_mtime_ns, -(-size // 512)
        stored = self.usage.of(node.path)
        mtime = max(node.stat.st_mtime_ns, int(self._last_write(node) * 1e9), stored.mtime_ns)
        if entry.kind in (TEXT, PREVIEW) or self._unstored(node) or not holes.zero_fill(node.meta):
            return mtime, -(-size // 512)
        return mtime, -(-(stored.nbytes + len(self.hierarchy.prefix(entry))) // 512)

    def _stored_times(self, paths: list[str]) -> dict[str, int]:
        """Store path -> the newest mtime (ns) of the stored values of each array at `paths`, found
        by one listing of the group holding them all (usage.warm_below), not one per array; an
        array that cannot be listed counts 0, its own files report the error."""
        self.usage.warm_below(paths)
        times = {}
        for path in paths:
            try:
                times[path] = self.usage.of(path).mtime_ns
            except ZarrfsError as e:
                log.debug("%s: its stored values' times are not known: %s", path or "/", e)
                times[path] = 0
        return times

    def _unstored(self, node: Node) -> bool:
        opened = self.arrays.get(node.path)
        return opened is not None and opened.raw.array.dirty

    def _data_size(self, entry: Entry) -> int:
        """NAME.bin of an array open here: its size as written (records appended, a partial one);
        else, and every view, as the stored metadata says (a growth shows there once stored)."""
        opened = self.arrays.get(entry.node.path) if not entry.view else None
        if opened is not None and not opened.retired and (opened.shows(entry.node) or opened.raw.array.dirty or
                                                          opened.raw.pending):
            return opened.raw.file_size
        return 0 if entry.node.meta is None else entry.node.meta.nbytes + len(self.hierarchy.prefix(entry))

    def _last_write(self, node: Node) -> float:
        opened = self.arrays.get(node.path)
        return opened.mtime if opened else 0.0

    def readdir(self, path: str) -> list[tuple[str, Entry]]:
        """[(name, entry)] ('.' and '..' with theirs, so that they carry inode numbers), one list
        while the listing holds: an adapter reads it from an offset, a page of entries at a time,
        and asks attributes() for each."""
        entry = self._entry(path)
        if entry.kind != DIR:
            refuse(errno.ENOTDIR, path)
        # what is listed changes with the files hidden, with the texts' sizes known by name, and once
        # a text a store error left out is to be counted again (Texts.retry_at)
        listing, state = self.hierarchy.entries_of(entry), (self.hierarchy.hidden.version, self.texts.known)
        cached = self._listed.get(path)
        if cached is None or cached[0] is not listing or cached[1] != state or time.monotonic() >= cached[3]:
            parent = self.hierarchy.lookup(os.path.dirname(path)) if path != "/" else entry  # the root's '..' is itself
            self.usage.warm(entry.node.path, list({e.node.path for e in listing.values()
                                                   if e.kind in (DATA, TEXT) and e.node.meta}))
            shown = {name: e for name, e in self.hierarchy.shown(entry).items() if e.kind != TEXT or self._listed_text(e)}
            retry = min((self.texts.retry_at(e.node) for e in listing.values() if e.kind == TEXT), default=math.inf)
            cached = self._listed[path] = (listing, state, [(".", entry), ("..", parent), *shown.items()], retry)
        return cached[2]

    def _listed_text(self, entry: Entry) -> bool:
        """Whether NAME.txt is listed: only with a size it reads (textview.Texts.listed); where a
        listing cannot tell it, the file is left out and reachable by name, its size counted then."""
        try:
            return self.texts.listed(self.store, entry.node, self.cache, self._values(entry.node)) is not None
        except ZarrfsError as e:  # its stored values' state: the stat by name reports it
            log.debug("%s: left out of the listing: %s", entry.node.path or "/", e)
            return False

    def statfs(self) -> FileSystemStats:
        """The store's file system, in its own fragment size: GIO multiplies the block counts
        by f_bsize, df by f_frsize, so both are the same (files keep st_blksize = 1 MiB). A
        read-only mount has no room at all: the size and free space of the disk beneath are not
        its own, and a file manager showing them would promise room to copy into."""
        sv = self.store.statvfs()
        room = 0 if self.options.read_only else 1  # every count is zero on a read-only mount
        return {"f_bsize": sv.f_frsize, "f_frsize": sv.f_frsize, "f_blocks": sv.f_blocks * room,
                "f_bfree": sv.f_bfree * room, "f_bavail": sv.f_bavail * room, "f_files": sv.f_files * room,
                "f_ffree": sv.f_ffree * room, "f_favail": sv.f_favail * room, "f_namemax": 255}

    # open, read, write

    def open(self, path: str, flags: int) -> int:
        """A file handle for `path` opened with `flags` (os.O_*)."""
        if self.edits.draft_at(path) is not None:
            return self._open_draft(self.edits.reopen(path, flags))
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        if writable and self.hierarchy.lookup(path) is None:  # a name the kernel still holds from a node
            return self.create(path, flags)  # deleted through the mount: open(O_CREAT) arrives as open
        listed = self._entry(path)
        entry = self.hierarchy.verify(listed)  # a node's own documents win over consolidated ones
        if entry.node is not listed.node:  # the kernel may hold a size from the stale copy
            self.kernel.refresh(path)
        if entry.kind == DIR:
            refuse(errno.EISDIR, path)
        if writable and self.options.read_only:
            refuse(errno.EROFS, path)
        if writable and entry.kind in (SIDECAR, DOCUMENT):  # attributes are edited through them
            return self._open_draft(self.edits.open_edit(entry, path, flags))
        if writable and entry.kind != DATA:
            refuse(errno.EACCES, path)
        if writable and read_only_view(entry):
            self._refuse_view(path)
        if entry.kind == TEXT:
            return self._add_handle(Handle(entry, content=self._text(entry, path)))
        if entry.kind == PREVIEW:
            return self._add_handle(Handle(entry, content=self._preview(entry)))
        if entry.kind == GROUPFILE:
            return self._add_handle(Handle(entry, file=self.group_files.open(entry, path)))
        if entry.kind != DATA:
            return self._add_handle(Handle(entry, content=self.hierarchy.content(entry)))
        if entry.node.error is not None:  # logged once, naming the file, when the node was read
            raise AlreadyLoggedError(str(entry.node.error), entry.node.error.errno)
        # before the array is opened (which would take the new stored values as its own): the
        # kernel's pages of this file go with the open's answer, those of its other views now
        changed = self.notice_stored_change(entry.node.path, wait=False)
        opened = self.arrays.open(entry.node)
        prefix = self.hierarchy.prefix(entry)
        file = PrefixedFile(opened.raw, prefix, path) if prefix else opened.raw
        self.kernel.opened(path)
        siblings = _siblings(path, self.hierarchy.data_names(entry) + self.group_files.above(path, entry.node))
        opened.paths.add(path)
        return self._add_handle(Handle(entry, array=opened, file=file, writable=writable, siblings=siblings,
                                       appends=bool(flags & os.O_APPEND), pages_current=not changed))

    def _text(self, entry: Entry, path: str) -> bytes:
        """NAME.txt's text. Should it differ in size from the text listed (a stored change
        between the two), the kernel is told to ask again, so that a copy that stats the open file
        (GIO) sees the true size."""
        version = self._values(entry.node)
        shown = self.texts.size(self.store, entry.node, self.cache, version)
        text = self.texts.text(self.store, entry.node, self.cache, version)
        if len(text) != shown:
            self.kernel.refresh(path)
        return text

    def _values(self, node: Node) -> int:
        """The version of the array's stored values, as its mtime follows them (stored_usage.py):
        what a text made from them is kept for."""
        return self.usage.of(node.path).version

    def _shared_raw(self, node: Node) -> RawFile:
        """The array's flat bytes as every file showing them reads them (group files too)."""
        self.notice_stored_change(node.path, wait=False)
        return self.arrays.open(node, hold=False).raw

    def _edited(self, paths: list[str]) -> None:
        """The mount made, deleted, moved or changed nodes at `paths`: the kernel drops what it
        holds of them and of the group files above them (their sizes and bytes follow the nodes
        below), and attributes listed before are stale."""
        self._listed_stale()
        self.kernel.drop([*paths, *self.group_files.of_directories_above(paths)])

    def _listed_stale(self) -> None:
        self.writes += 1  # attributes listed before are stale (see binding.ZarrFUSE)

    def _preview(self, entry: Entry) -> bytes:
        """NAME.png, rendered from the array sampled (written data included) once per version."""
        path, the_plan = self.hierarchy.previews.of(entry.node)
        source = entry.node if path == entry.node.path else self.hierarchy.node(path)
        self.notice_stored_change(path, wait=False)
        opened = self.arrays.open(source, hold=False)
        version = (source, self.usage.of(path).mtime_ns, opened.mtime)
        return self.previews.get(path, version, lambda: preview.image(preview.sample(opened.raw.array, the_plan),
                                                                      the_plan))

    def notice_stored_change(self, path: str, wait: bool = True) -> bool:
        """When the stored values of the array at store path `path`, opened here before, changed
        and this mount did not change them (another program or machine wrote them): its cached
        chunks are forgotten (OpenArrays.stored_change), and the kernel's pages and attributes of
        every file showing it that was opened are dropped, open or not, so that new opens, held
        descriptors and memory maps all read the new values. Whether they changed."""
        paths = self.arrays.stored_change(path)
        if not paths:
            return False
        log.info("%s changed in the store: cached chunks and pages of %s dropped", path or "/", ", ".join(paths))
        if wait:
            self.kernel.drop(paths)
        else:
            for view in paths:
                self.kernel.refresh(view)
        return True

    def _watch_stored_changes(self) -> None:
        """While arrays are held open, look at their stored values each time they may have
        changed (metadata_ttl, the lifetime of a stored listing): a reader that only touches pages
        of a memory map, or reads pages the kernel holds, sends no request that would tell us."""
        while not self.arrays.stopping(max(self.usage.lifetime, 1.0)):
            for path in self.arrays.held():
                try:
                    self.notice_stored_change(path)
                except ZarrfsError as e:
                    log.debug("cannot look at %s's stored values: %s", path or "/", e)

    def _add_handle(self, handle: Handle) -> int:
        with self._lock:
            fh = self._next_fh
            self._next_fh += 1
            self._handles[fh] = handle
        return fh

    def uncached(self, fh: int) -> bool:
        """Files served without the kernel's page cache (direct I/O): those made from the data
        when opened (text, previews), so a reader never sees pages of an older rendering; and
        IMAGE.ome.tif, so that a region reader's reads reach the daemon as they are: the kernel
        reads up to 1 MiB ahead of a cached read, the tiles after those asked for, and each
        tile read decodes its chunks (views/ome_pyramid.py)."""
        handle = self._handles.get(fh)
        entry = handle.entry if handle is not None else None
        return entry is not None and (entry.kind in (TEXT, PREVIEW) or (entry.kind == GROUPFILE and entry.view == PYRAMID))

    def pages_current(self, fh: int) -> bool:
        """Whether the kernel's pages of the file opened as `fh` (if it holds any) show the stored
        values: not when the open found them changed by another writer (notice_stored_change)."""
        handle = self._handles.get(fh)
        return handle is None or handle.pages_current

    def node_of(self, fh: int) -> str:
        """What an open file is, for log lines: its path for an array's data file, else the node
        it shows."""
        handle = self._handles.get(fh)
        if handle is None or handle.entry is None:
            return f"file handle {fh}" if handle is None else "a file being written"
        return handle.siblings[0] or handle.entry.node.path or "/"

    def _handle(self, fh: int) -> Handle:
        handle = self._handles.get(fh)
        return handle if handle is not None else refuse(errno.EBADF, f"file handle {fh}")

    def read(self, fh: int, offset: int, size: int) -> bytes:
        """Up to `size` bytes at `offset` of the open file."""
        handle = self._handle(fh)
        if handle.draft is not None:
            return handle.draft.read(offset, size)
        if handle.file is not None:
            return self._data_file(handle).read(offset, size)
        return handle.content[offset:offset + size]

    def data_file(self, fh: int) -> DataFile | None:
        """The open file's data as a file of bytes computed as read (an array's, a group file),
        for reads straight into a reply; None for a file whose bytes read() gives."""
        handle = self._handle(fh)
        return None if handle.file is None else self._data_file(handle)

    def read_source(self, fh: int, offset: int, size: int) -> tuple[stored_as_is.Opened | None, DataFile | None]:
        """What a reply of bytes [offset, offset + size) of the open file is made from, in one
        look at the handle (a read's only call here): (descriptors of the stored files and the
        ranges of them that hold the bytes as they are (engine/stored_as_is.py), the caller's
        to close, and the file) for a reply libfuse reads from them itself; else (None, the
        file's data as a file of bytes computed as read: data_file); else (None, None), a file
        whose bytes read() gives. No stored files where the bytes must be made (decoded, a
        header, a file made when opened) or -o nozerocopy turned this off."""
        handle = self._handle(fh)
        if handle.file is None:
            return None, None
        file = self._data_file(handle)
        return (file.stored_ranges(offset, size) if self.options.zero_copy else None), file

    def read_into(self, fh: int, offset: int, out: np.ndarray) -> int:
        """Bytes at `offset` decoded straight into `out` (a reply buffer); how many."""
        file = self.data_file(fh)
        if file is not None:
            return file.read_into(offset, out)
        data = self.read(fh, offset, len(out))
        out[:len(data)] = np.frombuffer(data, np.uint8)
        return len(data)

    @staticmethod
    def _data_file(handle: Handle):
        if handle.array is not None and handle.array.retired:  # deleted or moved while open
            refuse(errno.ESTALE, handle.siblings[0])
        return handle.file

    def lseek(self, fh: int, offset: int, whence: int) -> int:
        """SEEK_DATA and SEEK_HOLE (the kernel answers the other whences itself): chunks that
        are not stored are holes when the fill value is zero bytes (see holes.py)."""
        handle = self._handle(fh)
        try:
            if handle.array is None:
                size = handle.file.size if handle.file is not None else len(handle.content)
                return holes.seek(None, 1, size, offset, whence)
            raw, node = handle.array.raw, handle.array.node
            prefix = len(handle.file.header) if handle.file is not raw else 0
            presence = None
            if holes.zero_fill(node.meta) and not raw.array.dirty:
                presence = self.usage.presence(node.path, node.meta, raw.array)
            if offset >= prefix + raw.size or offset < 0:
                refuse(errno.ENXIO, handle.siblings[0])
            if offset < prefix:
                if whence == holes.SEEK_DATA or not raw.size:
                    return offset if whence == holes.SEEK_DATA else prefix + raw.size
                offset = prefix
            return prefix + holes.seek(presence, raw.itemsize, raw.size, offset - prefix, whence)
        except holes.SeekError as e:
            refuse(e.errno, self.node_of(fh))

    def write(self, fh: int, data, offset: int) -> int:
        """`data` written at `offset`; how many bytes (an array file never grows: EFBIG past its
        end). The write bound holds: the writer waits for a write-back past the dirty limit."""
        handle = self._handle(fh)
        if not handle.writable:
            refuse(errno.EBADF, self.node_of(fh))
        if handle.draft is not None:
            return handle.draft.write(offset, data)
        if handle.array.retired:
            refuse(errno.ESTALE, self.node_of(fh))
        file = handle.file
        if self._grows(handle):  # past the end: records appended (growth.py); with O_APPEND at the
            # end as the file is now, not as the kernel knew it
            written = self._append(handle, data, offset) if handle.appends else file.write(offset, data, grow=True)
        else:
            if offset >= file.size:
                refuse(errno.EFBIG, self.node_of(fh))  # the size never changes
            data = data[:file.size - offset]  # like RLIMIT_FSIZE: the part that fits, then EFBIG
            written = file.write(offset, data)
        self.kernel.wrote(handle.siblings)
        handle.wrote = True
        handle.array.mtime = time.time()
        self.writes += 1  # attributes listed before are stale (see binding.ZarrFUSE)
        then = self.write_bound.after_write(handle.array.raw.array.shared.dirty_nbytes)
        if then is AfterWrite.WRITE_BACK:  # the writer waits: memory stays bounded
            self.arrays.flush(handle.array)
        elif then is AfterWrite.START_WRITE_BACK:  # encoding starts while the writer goes on
            self.arrays.wake()
        return written

    def _append(self, handle: Handle, data, offset: int) -> int:
        """An O_APPEND write to NAME.bin of an array that grows: at the end of the file. The
        kernel's offset is the size it holds, which is not the end once records appended here
        moved after another writer's (growth.rebase) and before the kernel looks at the size
        again; its pages at that offset then hold these bytes, and are dropped."""
        raw = handle.array.raw
        at, written = raw.append(data)
        if at != offset:
            log.info("%s: appended at %d, the end, where the kernel had the end at %d", handle.siblings[0], at, offset)
            self.kernel.refresh(handle.siblings[0])
        return written

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        handle = self._handles.get(fh) if fh is not None else None
        draft = handle.draft if handle is not None else self.edits.draft_at(path)
        if draft is not None:
            draft.truncate(length)
            return
        entry = self._entry(path)
        if entry.kind != DATA:
            refuse(errno.EACCES, path)
        if self.options.read_only:
            refuse(errno.EROFS, path)
        if read_only_view(entry):
            self._refuse_view(path)
        size = self._data_size(entry)
        if length == size:
            return
        opened = self._growing(entry)
        if opened is None:
            log.warning("%s: refused truncate to %d bytes: an array file keeps its size, %d", path, length, size)
            refuse(errno.EFBIG if length > size else errno.EPERM, path)
        record = growth.record_nbytes(opened.raw.array)
        if length % record:
            log.warning("%s: refused truncate to %d bytes: not a whole number of %d-byte records", path, length, record)
            refuse(errno.EINVAL, path)
        opened.paths.add(path)  # its views' cached sizes are dropped when the new shape is stored
        opened.raw.truncate(length)
        opened.mtime = time.time()
        self.writes += 1
        self.arrays.flush(opened)  # the only write-back of the new shape: stored at once (and shown: _reshaped)

    def _grows(self, handle: Handle) -> bool:
        """Writes through this handle may append records: NAME.bin of an array that grows."""
        return handle.file is handle.array.raw and self._growing(handle.entry, handle.array) is not None

    def _growing(self, entry: Entry, opened: OpenArray | None = None) -> OpenArray | None:
        """The open array NAME.bin `entry` shows, when it grows along dimension 0; else None."""
        if entry.view or entry.node.meta is None:
            return None
        opened = opened or self.arrays.open(entry.node, hold=False)
        if opened.grows is None:  # decided once per opening of the array
            opened.grows = self._may_grow(opened)
        return opened if opened.grows else None

    def _may_grow(self, opened: OpenArray) -> bool:
        """-o grow and the array's metadata mark it (growable.py), and it can (growth.why_fixed)."""
        return growable.grows(self.options.grow, opened.node.path, opened.node.meta, self._meta_at, opened.raw.array)

    def _meta_at(self, path: str) -> ArrayMetadata | GroupMetadata | None:
        node = self.hierarchy.node(path)
        return None if node is None else node.meta

    def _reshaped(self, opened: OpenArray, moved: bool = False) -> None:
        """A write-back stored a new shape (or the root's consolidated copy of it, which follows
        at full write-backs: the root is read again then, not at each early one): the node's
        metadata is read again from its own documents, and what the kernel holds of the array's
        other files (its views' sizes and headers, the sidecar) is dropped.
        Not NAME.bin's, whose size the kernel made itself, by the writes; unless `moved`: the
        records appended here moved after another writer's (growth.rebase), so its size and the
        bytes at the old end changed under the kernel. Group files (zarr.h5) follow as they do
        any change of a node (group_files.py, at their next open)."""
        path = opened.node.path
        self.hierarchy.changed(path)
        if self.hierarchy.consolidated is not None:  # its copy of the shape may lag: the node's own documents
            write_back = opened.raw.array.write_back
            if write_back.copy_shape == write_back.stored_shape:  # the copy followed: the root is read again
                self.hierarchy.reload_root()
            node = self.hierarchy.reread(path)
        else:
            node = self.hierarchy.node(path)
        if node is not None and node.meta is not None:
            opened.renewed(node)  # a getattr holding the old node still answers the size written here
        self._listed_stale()
        stems = {os.path.splitext(p)[0] for p in opened.paths}
        for stem in sorted(stems):
            for name in self.hierarchy.file_names(os.path.basename(stem)):
                view = os.path.join(os.path.dirname(stem), name)
                if moved or view not in opened.paths or not view.endswith(".bin"):
                    self.kernel.refresh(view)

    def flush(self, fh: int) -> None:
        """close(): write-back of what this handle wrote, so close reports write errors."""
        handle = self._handle(fh)
        if handle.draft is not None:
            self.edits.closed(handle.draft)
        if handle.wrote:
            self.arrays.flush(handle.array)
            handle.wrote = False
            self._refuse_partial(handle)

    def fsync(self, fh: int) -> None:
        handle = self._handle(fh)
        if handle.array is not None and handle.writable:
            self.arrays.flush(handle.array)
            self._refuse_partial(handle)

    def _refuse_partial(self, handle: Handle) -> None:
        """The whole records are stored; a partial one cannot be (it stays pending, and is saved
        for recovery if no write completes it before the last close)."""
        raw = handle.array.raw
        if raw.pending:
            record = growth.record_nbytes(raw.array)
            raise ZarrfsError(f"{handle.siblings[0]}: the last {len(raw.pending)} bytes written are a partial record "
                              f"(records are {record} bytes) and cannot be stored until a write completes it")

    def release(self, fh: int) -> None:
        with self._lock:
            handle = self._handles.pop(fh, None)
        if handle is not None and handle.array is not None:
            self.arrays.close(handle.array)
            if handle.array.raw.pending and not handle.array.handles:  # nobody left to complete it
                self.arrays.save_partial(handle.array)
        if handle is not None and handle.draft is not None:
            self.edits.release(handle.draft)
        if handle is not None and handle.wrote:  # mmap write-back that came after close()
            self.arrays.flush(handle.array)

    def utimens(self, path: str) -> None:
        if self.edits.draft_at(path) is None:  # accepted and ignored: mtimes come from the store and from writes
            self._entry(path)

    def access(self, path: str, amode: int) -> None:
        """access(2) agrees with the modes: only an array's data files are writable, on a
        writable mount; directories are searchable, files not executable."""
        if self.edits.draft_at(path) is not None:
            return
        entry = self._entry(path)
        writable = (entry.kind in (DATA, DIR, SIDECAR) and not read_only_view(entry)) or \
            (entry.kind == DOCUMENT and entry.node.kind == "group")
        if amode & os.W_OK and (self.options.read_only or not writable):
            refuse(errno.EROFS if self.options.read_only else errno.EACCES, path)
        if amode & os.X_OK and entry.kind != DIR:
            refuse(errno.EACCES, path)

    @staticmethod
    def _refuse_view(path: str) -> NoReturn:
        log.warning("%s: refused a write: this view's header points into the data, so it is read-only; write "
                    "NAME.bin or NAME.npy instead", path)
        refuse(errno.EPERM, path)

    # hierarchy edits: done by the HierarchyChanges given (edits/hierarchy_edits.py)

    def mkdir(self, path: str) -> None:
        self.edits.mkdir(path)

    def rmdir(self, path: str) -> None:
        self._writable(path)
        self.edits.rmdir(path)

    def unlink(self, path: str) -> None:
        self._writable(path)
        self.edits.unlink(path)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        self._writable(old)
        self.edits.rename(old, new, flags)

    def create(self, path: str, flags: int = 0) -> int:
        return self._open_draft(self.edits.create(path, flags))

    def change_owner_or_mode(self, path: str) -> None:
        """chmod, chown: accepted on files being written (editors copy modes), refused elsewhere."""
        if self.edits.draft_at(path) is None:
            self.refuse_change(path)

    def refuse_change(self, path: str) -> NoReturn:
        """What cannot be made here (links, device nodes, modes)."""
        refuse(errno.EROFS if self.options.read_only else errno.EPERM, path)

    def _writable(self, path: str) -> None:
        if self.options.read_only:
            refuse(errno.EROFS, path)

    # extended attributes: read by fs/xattrs.py, edited by the hierarchy editing

    def listxattr(self, path: str) -> list[str]:
        return self.xattrs.list(path)

    def getxattr(self, path: str, name: str) -> bytes:
        return self.xattrs.get(path, name)

    def setxattr(self, path: str, name: str, value: bytes, options: int) -> None:
        """user.zarr.attr.KEY sets one of the node's attributes (hierarchy_edits.py)."""
        self.xattrs.check(name)
        self.edits.setxattr(path, name, value, options)

    def removexattr(self, path: str, name: str) -> None:
        self.xattrs.check(name)
        self.edits.removexattr(path, name)

    def _open_draft(self, draft) -> int:
        return self._add_handle(Handle(None, draft=draft, writable=True))


def _siblings(path: str, names: list[str]) -> tuple[str, tuple[str, ...]]:
    """(path, the other files in its directory, of `names`, showing the same bytes)."""
    directory = os.path.dirname(path)
    return path, tuple(p for p in (os.path.join(directory, n) for n in names) if p != path)
