"""The FUSE Operations: thin methods that delegate, under one errno boundary.

Nothing here decodes or encodes: hierarchy maps paths to nodes, rawfile/array do the work.
"""

import ctypes
import errno
import logging
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.engine import holes, recovery
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import ZarrfsError
from zarrfs.fs.hierarchy import (
    DATA,
    DIR,
    DOCUMENT,
    GROUPFILE,
    PREVIEW,
    SIDECAR,
    TEXT,
    Entry,
    Hierarchy,
    Node,
    read_only_view,
)
from zarrfs.fs.inodes import entry_key, inode_number
from zarrfs.fs.open_arrays import OpenArray, OpenArrays
from zarrfs.fs.ownership import Ownership
from zarrfs.fs.stored_usage import LIFETIME, Usage
from zarrfs.fs.xattrs import ExtendedAttributes
from zarrfs.fuse import replies
from zarrfs.fuse.errno_boundary import errno_boundary, fail, fail_logged
from zarrfs.fuse.group_files import GroupFiles
from zarrfs.fuse.libfuse import mfusepy
from zarrfs.fuse.page_invalidation import Siblings
from zarrfs.stores.source_url import RemoteOptions, open_store
from zarrfs.views import DEFAULT_VIEWS, hdf5, preview
from zarrfs.views.prefixed_file import PrefixedFile
from zarrfs.views.text import Texts

log = logging.getLogger(__name__)

BLKSIZE = 1 << 20  # st_blksize: tools that honour it issue 1 MiB reads
REMOTE_FETCHERS = 64  # chunks fetched ahead at once from an object store, within prefetch_size: a thread waiting on a GET costs little, and 16 held a stream at 20 ms each way to 0.27 GB/s where 48 made 0.36
TIMEOUT = 30.0  # seconds the kernel may keep attributes and entries
EARLY_WRITE_BACK = 16 << 20  # dirty bytes of an array that start its write-back while writing goes on
FUSE_CAP_READDIRPLUS_AUTO = 1 << 14
FUSE_CAP_SPLICE_WRITE = 1 << 7  # replies of file descriptors spliced into /dev/fuse (replies.read_stored)


@dataclass
class Handle:
    entry: Entry | None  # None for a draft
    content: bytes = b""  # sidecars, documents and headers: a snapshot
    array: OpenArray | None = None
    file: RawFile | PrefixedFile | hdf5.GroupFile | None = None  # the array's bytes as this entry shows them
    siblings: tuple = ("", ())  # its path, and those of the other files showing the same bytes
    writable: bool = False
    wrote: bool = False
    draft: object = None  # a file being written that is no array's data yet (drafts.py)


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
    dirty_limit: int = 256 << 20  # dirty decoded bytes per array before a write flushes
    views: tuple[str, ...] = DEFAULT_VIEWS  # header views beside each NAME.bin
    header_cache_bytes: int = 32 << 20
    previews: bool = False  # NAME.png beside arrays of two or more dimensions
    xattrs: bool = True  # user.zarr.* and user.mime_type; off: none, and the kernel stops asking
    zero_copy: bool = True  # READs of stored-as-is bytes answered from the stored files (stored_as_is.py)
    ownership: Ownership = field(default_factory=Ownership)  # -o uid=, gid=, umask=: the owner and modes shown


class Operations(mfusepy.Operations):
    use_ns = True

    def __init__(self, source: str, options: Options):
        self.options = options
        self.store = open_store(source, options.read_only, options.remote, options.follow_symlinks)
        self.hierarchy = Hierarchy(self.store, options.views, options.header_cache_bytes, options.previews)
        self.previews = preview.Previews(options.cache_bytes // 16)
        self.cache = ChunkCache(options.cache_bytes, *self._read_ahead())
        ttl = self.store.capabilities.metadata_ttl  # None: nobody else writes, trust for LIFETIME
        self.usage = Usage(self.store, LIFETIME if ttl is None else ttl)  # mtimes, stored sizes
        self.texts = Texts(options.cache_bytes // 4)  # rendered NAME.txt files, within the cache's bound
        self.arrays = OpenArrays(self.store, self.cache, self.usage, options.read_only, options.flush_interval,
                                 options.recovery_dir)  # arrays open through the mount, and their write-back
        self.siblings = Siblings()
        self._listed: dict[str, tuple[dict, list]] = {}  # path -> (listing, its entries as a list)
        self.writes = 0
        self._handles: dict[int, Handle] = {}
        self._next_fh = 1
        self._lock = threading.Lock()  # of the handle table
        self.on_ready = self.on_stop = None  # callbacks: the mount is live / is going away
        self.unstored = self.arrays.unstored  # arrays whose written data could not be stored at shutdown
        self.edits = HierarchyEdits(  # mkdir, create, unlink, rename, attribute edits
            self.store, self.hierarchy, self.arrays, self.cache, self.siblings.drop, read_only=options.read_only,
            ownership=options.ownership, dirty_limit=options.dirty_limit,
            remote_timeout=options.remote.timeout)
        self.xattrs = ExtendedAttributes(self.hierarchy, options.xattrs, lambda path: self.edits.draft_at(path)
                                         is not None)
        self.group_files = GroupFiles(self.hierarchy, self.siblings, self._shared_raw, self._listed_stale)
        if not options.read_only:
            removed = self.store.remove_temporaries()
            if removed:
                log.warning("removed %d temporary files left by an interrupted write", removed)

    def _read_ahead(self) -> tuple[int, int | None]:
        """(budget, workers) for chunks decoded ahead of sequential readers. An object store
        answers after a round trip: there, many chunks are fetched at once, within prefetch_size."""
        if self.store.capabilities.remote:
            return self.options.remote.prefetch_size, REMOTE_FETCHERS
        return self.options.ahead_bytes, None

    # lifecycle

    def init_with_config(self, conn, config):
        if conn is not None:
            conn.max_read = BLKSIZE
            conn.max_readahead = BLKSIZE
            conn.max_write = BLKSIZE
            conn.want &= ~FUSE_CAP_READDIRPLUS_AUTO  # attributes with every page of a listing, not the first only
            if self.options.zero_copy:
                conn.want |= conn.capable & FUSE_CAP_SPLICE_WRITE
        if config is not None:
            config.attr_timeout = config.entry_timeout = TIMEOUT
            config.negative_timeout = 1.0
            config.hard_remove = 1  # unlink removes at once: never a rename to .fuse_hidden while open
            config.use_ino = 1  # inode numbers of ours (inode_number): readdir's '.' and '..' carry them too
            if self.store.capabilities.remote:
                # other machines write it: pages are kept across opens only while the file's
                # mtime and size are unchanged, looked at again after metadata_ttl
                ttl = self.store.capabilities.metadata_ttl
                config.auto_cache, config.ac_attr_timeout_set, config.ac_attr_timeout = 1, 1, ttl
                config.attr_timeout = config.entry_timeout = min(TIMEOUT, ttl)
            else:
                config.kernel_cache = 1  # only this daemon changes the data, and writes go through the cache
        self.arrays.start()
        self.siblings.start()
        if self.store.capabilities.remote:
            threading.Thread(target=self._watch_stored_changes, name="watcher", daemon=True).start()
        if self.on_ready:
            self.on_ready()

    def destroy(self, path):
        self.arrays.stop()  # the flusher ends, then every write is stored
        replies.release_all_lent()  # descriptors lent to replies libfuse has sent
        if self.on_stop:
            self.on_stop()

    # metadata

    def _entry(self, path: str) -> Entry:
        entry = self.hierarchy.lookup(path)
        return entry if entry is not None else fail(errno.ENOENT)

    @errno_boundary
    def getattr(self, path, fh=None):
        draft = self.edits.draft_at(path)
        if draft is not None:
            return self.edits.attributes(draft, path)
        return self.attributes(self._entry(path))

    def attributes(self, entry: Entry) -> dict:
        st, owns, writable = entry.node.stat, self.options.ownership, not self.options.read_only
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
        elif entry.kind == TEXT:  # the true size, worked out once (textview.Texts.size): splice copies no further
            mode, size = owns.file(False), self.texts.size(self.store, entry.node, self.cache)
        elif entry.kind == GROUPFILE:  # 0 until first opened, as /proc files: open makes it and says its size
            mode, size = owns.file(False), self.hierarchy.group_file_made(entry.node)[0]
        else:
            mode, size = owns.file(False), len(self.hierarchy.content(entry))
        mtime, blocks = self._stored(entry, size)
        uid, gid = owns.owner(st)
        return {"st_ino": inode_number(entry_key(entry)), "st_mode": mode, "st_nlink": 2 if entry.kind == DIR else 1, "st_size": size,
                "st_uid": uid, "st_gid": gid, "st_blksize": BLKSIZE, "st_blocks": blocks,
                "st_mtime": mtime, "st_ctime": mtime, "st_atime": mtime}

    def _stored(self, entry: Entry, size: int) -> tuple[int, int]:
        """(mtime in ns, st_blocks). An array's files change when any of its stored values does,
        and cost what its chunks take encoded (see stored_usage.py); a fill value that is not zero
        bytes, or data not yet stored, counts in full, so that no tool takes it for a hole."""
        node = entry.node
        if entry.kind == GROUPFILE:
            return self.group_files.mtime(node, self.arrays.last_writes()), -(-size // 512)
        if entry.kind not in (DATA, TEXT, PREVIEW) or node.meta is None:  # made from the documents
            return node.stat.st_mtime_ns, -(-size // 512)
        stored = self.usage.of(node.path)
        mtime = max(node.stat.st_mtime_ns, int(self._last_write(node) * 1e9), stored.mtime_ns)
        if entry.kind in (TEXT, PREVIEW) or self._unstored(node) or not holes.zero_fill(node.meta):
            return mtime, -(-size // 512)
        return mtime, -(-(stored.nbytes + len(self.hierarchy.prefix(entry))) // 512)

    def _unstored(self, node: Node) -> bool:
        opened = self.arrays.get(node.path)
        return opened is not None and opened.raw.array.dirty

    def _data_size(self, entry: Entry) -> int:
        return 0 if entry.node.meta is None else entry.node.meta.nbytes + len(self.hierarchy.prefix(entry))

    def _last_write(self, node: Node) -> float:
        opened = self.arrays.get(node.path)
        return opened.mtime if opened else 0.0

    @errno_boundary
    def readdir(self, path, fh):
        """[(name, entry)] ('.' and '..' with theirs, so that they carry inode numbers), one list while the listing holds: the binding reads it
        from an offset, a kernel page of entries at a time, and asks attributes() for each."""
        entry = self._entry(path)
        if entry.kind != DIR:
            fail(errno.ENOTDIR)
        listing = self.hierarchy.entries_of(entry)
        cached = self._listed.get(path)
        if cached is None or cached[0] is not listing:
            parent = self.hierarchy.lookup(os.path.dirname(path)) if path != "/" else entry  # the root's '..' is itself
            cached = self._listed[path] = (listing, [(".", entry), ("..", parent), *listing.items()])
            self.usage.warm(entry.node.path, list({e.node.path for e in listing.values() if e.kind == DATA and e.node.meta}))
        return cached[1]

    @errno_boundary
    def statfs(self, path):
        """The store's file system, in its own fragment size: GIO multiplies the block counts
        by f_bsize, df by f_frsize, so both are the same (files keep st_blksize = 1 MiB)."""
        sv = self.store.statvfs()
        return {"f_bsize": sv.f_frsize, "f_frsize": sv.f_frsize, "f_blocks": sv.f_blocks, "f_bfree": sv.f_bfree,
                "f_bavail": sv.f_bavail, "f_files": sv.f_files, "f_ffree": sv.f_ffree, "f_favail": sv.f_favail,
                "f_namemax": 255}

    # open, read, write

    @errno_boundary
    def open(self, path, flags):
        if self.edits.draft_at(path) is not None:
            return self._open_draft(self.edits.reopen(path, flags))
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        if writable and self.hierarchy.lookup(path) is None:  # a name the kernel still holds from a node
            return self.create(path, 0o644, flags)  # deleted through the mount: open(O_CREAT) arrives as open
        listed = self._entry(path)
        entry = self.hierarchy.verify(listed)  # a node's own documents win over consolidated ones
        if entry.node is not listed.node:  # the kernel may hold a size from the stale copy
            self.siblings.refresh(path)
        if entry.kind == DIR:
            fail(errno.EISDIR)
        if writable and self.options.read_only:
            fail(errno.EROFS)
        if writable and entry.kind in (SIDECAR, DOCUMENT):  # attributes are edited through them
            return self._open_draft(self.edits.open_edit(entry, path, flags))
        if writable and entry.kind != DATA:
            fail(errno.EACCES)
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
            fail_logged(entry.node.error.errno)
        opened = self.arrays.open(entry.node)
        prefix = self.hierarchy.prefix(entry)
        file = PrefixedFile(opened.raw, prefix, path) if prefix else opened.raw
        self.siblings.opened(path)
        siblings = self.siblings.of(path, self.hierarchy.data_names(entry) + self.group_files.above(path))
        opened.paths.add(path)
        self.notice_stored_change(entry.node.path, wait=False)  # held open elsewhere: other views' caches
        return self._add_handle(Handle(entry, array=opened, file=file, writable=writable, siblings=siblings))

    def _text(self, entry: Entry, path: str) -> bytes:
        """NAME.txt's text. A large array's size was shown as 0 until now: the kernel is told to
        ask again, so that a copy that stats the open file (GIO) sees the true size."""
        shown = self.texts.size(self.store, entry.node, self.cache)
        text = self.texts.text(self.store, entry.node, self.cache)
        if len(text) != shown:
            self.siblings.refresh(path)
        return text

    def _shared_raw(self, node: Node) -> RawFile:
        """The array's flat bytes as every file showing them reads them (group files too)."""
        return self.arrays.open(node, hold=False).raw

    def _listed_stale(self) -> None:
        self.writes += 1  # attributes listed before are stale (see binding.ZarrFUSE)

    def _preview(self, entry: Entry) -> bytes:
        """NAME.png, rendered from the array sampled (written data included) once per version."""
        path, the_plan = self.hierarchy.previews.of(entry.node)
        source = entry.node if path == entry.node.path else self.hierarchy.node(path)
        opened = self.arrays.open(source, hold=False)
        version = (source, self.usage.of(path).mtime_ns, opened.mtime)
        return self.previews.get(path, version, lambda: preview.image(preview.sample(opened.raw.array, the_plan),
                                                                      the_plan))

    def notice_stored_change(self, path: str, wait: bool = True) -> None:
        """When the stored values of the array at store path `path`, held open here, changed
        elsewhere (another machine wrote them): its cached chunks are forgotten (OpenArrays), and
        the kernel's pages and attributes of every file showing it that was opened are dropped,
        open or not, so that new opens, held descriptors and memory maps all read the new values."""
        paths = self.arrays.stored_change(path)
        if not paths:
            return
        log.info("%s changed in the store: cached chunks and pages of %s dropped", path or "/", ", ".join(paths))
        if wait:
            self.siblings.drop(paths)
        else:
            for view in paths:
                self.siblings.refresh(view)

    def _watch_stored_changes(self) -> None:
        """While arrays are held open, look at their stored values every metadata_ttl: a reader
        that only touches pages of a memory map sends no request that would tell us."""
        ttl = max(self.store.capabilities.metadata_ttl or 0, 1.0)
        while not self.arrays.stopping(ttl):
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

    def is_text(self, fh) -> bool:
        """Files made from the data when opened (text, previews): served without the page
        cache, so a reader never sees pages of an older rendering."""
        handle = self._handles.get(fh)
        return handle is not None and handle.entry is not None and handle.entry.kind in (TEXT, PREVIEW)

    def node_of(self, fh) -> str:
        """What an open file is, for the errno boundary's log lines: its path for an array's data
        file, else the node it shows."""
        handle = self._handles.get(fh)
        if handle is None or handle.entry is None:
            return f"file handle {fh}" if handle is None else "a file being written"
        return handle.siblings[0] or handle.entry.node.path or "/"

    def _handle(self, fh) -> Handle:
        handle = self._handles.get(fh)
        return handle if handle is not None else fail(errno.EBADF)

    @errno_boundary
    def read(self, path, size, offset, fh):
        """mfusepy registers its read callback because this exists; ZarrFUSE serves reads with
        read_into instead, and a plain mfusepy.FUSE would call this."""
        handle = self._handle(fh)
        if handle.draft is not None:
            return handle.draft.read(offset, size)
        if handle.file is not None:
            return self._data_file(handle).read(offset, size)
        return handle.content[offset:offset + size]

    @errno_boundary
    def read_into(self, fh, buffer, size, offset) -> int:
        """The binding's read: decode straight into the kernel's reply buffer."""
        handle = self._handle(fh)
        if handle.file is None:
            data = self._bytes(handle, offset, size)
            ctypes.memmove(buffer, data, len(data))
            return len(data)
        out = np.ctypeslib.as_array(ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ubyte)), shape=(size,))
        return self._data_file(handle).read_into(offset, out)

    @errno_boundary
    def read_buf(self, fh, bufpp, size, offset) -> int:
        """The binding's read: a reply of memory libfuse frees, a chunk decoded ahead as it is."""
        handle = self._handle(fh)
        if handle.file is None:
            return replies.read_buf(self._bytes(handle, offset, size), bufpp, size, 0)
        file = self._data_file(handle)
        if self.options.zero_copy and replies.read_stored(file, bufpp, size, offset):
            return 0
        return replies.read_buf(file, bufpp, size, offset)

    @staticmethod
    def _bytes(handle: Handle, offset: int, size: int) -> bytes:
        """A sidecar's, document's or header's bytes; a file being written (a draft) as written so far."""
        return handle.content[offset:offset + size] if handle.draft is None else handle.draft.read(offset, size)

    @staticmethod
    def _data_file(handle: Handle):
        if handle.array is not None and handle.array.retired:  # deleted or moved while open
            fail(errno.ESTALE)
        return handle.file

    @errno_boundary
    def lseek(self, path, offset, whence, fh):
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
                fail(errno.ENXIO)
            if offset < prefix:
                if whence == holes.SEEK_DATA or not raw.size:
                    return offset if whence == holes.SEEK_DATA else prefix + raw.size
                offset = prefix
            return prefix + holes.seek(presence, raw.itemsize, raw.size, offset - prefix, whence)
        except holes.SeekError as e:
            fail(e.errno)

    @errno_boundary
    def write(self, path, data, offset, fh):
        handle = self._handle(fh)
        if not handle.writable:
            fail(errno.EBADF)
        if handle.draft is not None:
            return handle.draft.write(offset, data)
        if handle.array.retired:
            fail(errno.ESTALE)
        file = handle.file
        if offset >= file.size:
            fail(errno.EFBIG)  # the size never changes
        data = data[:file.size - offset]  # like RLIMIT_FSIZE: the part that fits, then EFBIG
        written = file.write(offset, data)
        self.siblings.wrote(handle.siblings)
        handle.wrote = True
        handle.array.mtime = time.time()
        self.writes += 1  # attributes listed before are stale (see binding.ZarrFUSE)
        dirty = handle.array.raw.array.shared.dirty_nbytes
        if dirty > self.options.dirty_limit:  # the writer waits: memory stays bounded
            self.arrays.flush(handle.array)
        elif dirty > min(self.options.dirty_limit // 4, EARLY_WRITE_BACK):  # encoding starts while the writer goes on
            self.arrays.wake()
        return written

    @errno_boundary
    def truncate(self, path, length, fh=None):
        handle = self._handles.get(fh) if fh is not None else None
        draft = handle.draft if handle is not None else self.edits.draft_at(path)
        if draft is not None:
            return draft.truncate(length)
        entry = self._entry(path)
        if entry.kind != DATA:
            fail(errno.EACCES)
        if self.options.read_only:
            fail(errno.EROFS)
        if read_only_view(entry):
            self._refuse_view(path)
        size = self._data_size(entry)
        if length != size:
            log.warning("%s: refused truncate to %d bytes: an array file keeps its size, %d", path, length, size)
            fail(errno.EFBIG if length > size else errno.EPERM)
        return 0

    @errno_boundary
    def flush(self, path, fh):
        """close(): write-back of what this handle wrote, so close reports write errors."""
        handle = self._handle(fh)
        if handle.draft is not None:
            self.edits.closed(handle.draft)
        if handle.wrote:
            self.arrays.flush(handle.array)
            handle.wrote = False
        return 0

    @errno_boundary
    def fsync(self, path, datasync, fh):
        handle = self._handle(fh)
        if handle.array is not None and handle.writable:
            self.arrays.flush(handle.array)
        return 0

    @errno_boundary
    def release(self, path, fh):
        with self._lock:
            handle = self._handles.pop(fh, None)
        if handle is not None and handle.array is not None:
            self.arrays.close(handle.array)
        if handle is not None and handle.draft is not None:
            self.edits.release(handle.draft)
        if handle is not None and handle.wrote:  # mmap write-back that came after close()
            self.arrays.flush(handle.array)
        return 0

    @errno_boundary
    def utimens(self, path, times=None):
        if self.edits.draft_at(path) is None:  # accepted and ignored: mtimes come from the store and from writes
            self._entry(path)
        return 0

    @errno_boundary
    def access(self, path, amode):
        """access(2) agrees with the modes: only an array's data files are writable, on a
        writable mount; directories are searchable, files not executable."""
        if self.edits.draft_at(path) is not None:
            return 0
        entry = self._entry(path)
        writable = (entry.kind in (DATA, DIR, SIDECAR) and not read_only_view(entry)) or \
            (entry.kind == DOCUMENT and entry.node.kind == "group")
        if amode & os.W_OK and (self.options.read_only or not writable):
            fail(errno.EROFS if self.options.read_only else errno.EACCES)
        if amode & os.X_OK and entry.kind != DIR:
            fail(errno.EACCES)
        return 0

    @staticmethod
    def _refuse_view(path: str):
        log.warning("%s: refused a write: this view's header points into the data, so it is read-only; write "
                    "NAME.bin or NAME.npy instead", path)
        fail(errno.EPERM)

    # hierarchy edits: done by hierarchy_edits.HierarchyEdits

    @errno_boundary
    def mkdir(self, path, mode):
        self.edits.mkdir(path)
        return 0

    @errno_boundary
    def rmdir(self, path):
        self._writable()
        self.edits.rmdir(path)
        return 0

    @errno_boundary
    def unlink(self, path):
        self._writable()
        self.edits.unlink(path)
        return 0

    @errno_boundary
    def rename(self, old, new, flags=0):
        self._writable()
        self.edits.rename(old, new, flags)
        return 0

    @errno_boundary
    def create(self, path, mode, flags=0):
        return self._open_draft(self.edits.create(path, flags))

    @errno_boundary
    def chmod(self, path, mode):  # accepted on files being written (editors copy modes), refused elsewhere
        return 0 if self.edits.draft_at(path) is not None else self._refuse()

    @errno_boundary
    def chown(self, path, uid, gid):
        return 0 if self.edits.draft_at(path) is not None else self._refuse()

    def _writable(self):
        if self.options.read_only:
            fail(errno.EROFS)

    # extended attributes: read by fs/xattrs.py, edited by hierarchy_edits.HierarchyEdits

    @errno_boundary
    def listxattr(self, path):
        return self.xattrs.list(path)

    @errno_boundary
    def getxattr(self, path, name, position=0):
        return self.xattrs.get(path, name)

    @errno_boundary
    def setxattr(self, path, name, value, options, position=0):
        """user.zarr.attr.KEY sets one of the node's attributes (hierarchy_edits.py)."""
        self.xattrs.check(name)
        self.edits.setxattr(path, name, value, options)
        return 0

    @errno_boundary
    def removexattr(self, path, name):
        self.xattrs.check(name)
        self.edits.removexattr(path, name)
        return 0

    def _open_draft(self, draft) -> int:
        return self._add_handle(Handle(None, draft=draft, writable=True))

    def _refuse(self, *args):
        fail(errno.EROFS if self.options.read_only else errno.EPERM)

    symlink = link = mknod = _refuse

