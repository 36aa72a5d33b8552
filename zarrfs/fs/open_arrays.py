"""The open-array table: one shared flat view per array open through the mount, and its
write-back. It owns the table and its lock; opens, retires and flushes arrays; runs the flusher
thread; and at unmount does the last write-back, whose failures are saved as recovery data
(recovery.py). The FUSE adapter and hierarchy edits use it through its public methods."""

import errno
import logging
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from zarrfs.engine import growth, recovery
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.consolidated_copy import ConsolidatedCopy
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import RefusedError, ZarrfsError
from zarrfs.fs.hierarchy import Node
from zarrfs.fs.stored_usage import Usage

log = logging.getLogger(__name__)

SHUTDOWN_TRIES = 4  # write-back attempts at unmount, a second apart, before the data is saved aside


@dataclass
class OpenArray:
    """One array's flat view, shared by every handle open on it."""

    raw: RawFile
    node: Node
    handles: int = 0
    mtime: float = 0.0  # of the last write through the mount
    error: ZarrfsError | None = None  # a background flush failure, reported at the next fsync/close
    failing: str = ""  # the last write-back failure, until one succeeds
    stored_version: int = 0  # its stored values' fingerprint as this mount last read or stored them
    flushing: int = 0  # write-backs of this mount's in progress: the stored values change under them
    flushed: int = 0  # write-backs of this mount's done: a look at the stored values across one is void
    retired: bool = False  # the array was deleted or moved through the mount: its handles are stale
    paths: set = field(default_factory=set)  # the files showing it that were opened: their kernel caches
    # whether NAME.bin's writes and truncates change dimension 0: decided at the first of them
    # (FileSystem._growing), None until then; a marked array that cannot grow is logged then, once
    grows: bool | None = None
    shown_shape: tuple = ()  # the shape its node's metadata shows: a write-back that stores another tells
    shown_rebases: int = 0  # raw.rebases when the kernel was last told: records appended here that moved
    shown_copy: tuple = ()  # the shape the root's consolidated copy held when the core was last told
    # the nodes this one replaced as its own write-backs stored new shapes, while something holds them
    former: list = field(default_factory=list)

    def __post_init__(self):
        self.shown_shape = self.raw.array.write_back.stored_shape
        self.shown_copy = self.raw.array.write_back.copy_shape

    def renewed(self, node: Node) -> None:
        """Its own write-back stored a new shape, which `node` shows: the old node is kept
        (weakly) as one of its own, for a request that looked it up just before."""
        self.former = [ref for ref in self.former if ref() is not None] + [weakref.ref(self.node)]
        self.node = node

    def shows(self, node: Node) -> bool:
        """Whether `node` is this array as opened here, or as it was before its own write-backs
        stored a new shape; not when another program replaced the array since."""
        return node is self.node or any(ref() is node for ref in self.former)


class OpenArrays:
    """Store path -> OpenArray, for every array open through the mount, and their write-back."""

    def __init__(self, store, cache: ChunkCache, usage: Usage, read_only: bool, flush_interval: float,
                 recovery_dir: str, reshaped: Callable[[OpenArray, bool], None] = lambda opened, moved: None,
                 copy: Callable[[], ConsolidatedCopy | None] = lambda: None):
        self.store = store
        self.copy = copy  # the root's consolidated copy, whose shapes a growth keeps true; None: there is none
        # called after a write-back stored a new shape (growth.py); `moved`: the records appended
        # here moved after another writer's (growth.rebase), so NAME.bin's bytes changed too
        self.reshaped = reshaped
        self.cache = cache
        self.usage = usage
        self.read_only = read_only
        self.flush_interval = flush_interval
        self.recovery_dir = recovery_dir
        self.unstored: list[str] = []  # arrays whose written data could not be stored at shutdown
        self._arrays: dict[str, OpenArray] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_flusher = threading.Event()
        self._flusher_thread: threading.Thread | None = None

    # the table

    def open(self, node: Node, hold: bool = True) -> OpenArray:
        """The array's shared view, with one more handle on it when `hold` (close() gives it back)."""
        with self._lock:
            opened = self._open_array(node)
            if hold:
                opened.handles += 1
        return opened

    def close(self, opened: OpenArray) -> None:
        """A handle taken by open() is gone."""
        with self._lock:
            opened.handles -= 1

    def get(self, path: str) -> OpenArray | None:
        """The array open at store path `path`, if any (no lock: a dict lookup is atomic)."""
        return self._arrays.get(path)

    def last_writes(self) -> list[tuple[str, float]]:
        """(path, time of the last write through the mount) of every open array."""
        with self._lock:
            return [(path, opened.mtime) for path, opened in self._arrays.items()]

    def _open_array(self, node: Node) -> OpenArray:
        """The array's shared view; made anew, with no cached chunk, when its node changed.
        (Another writer's change to its stored values is stored_change's: the kernel's pages of
        its files go with its cached chunks, which a view made anew here would not tell.)"""
        opened = self._arrays.get(node.path)
        if opened is None or (opened.node is not node and not opened.raw.array.dirty and not opened.handles):
            array = open_array(self.store, node.path, node.meta, self.cache, self.copy())
            version = self.usage.of(node.path).version
            kept = opened.paths if opened is not None and opened.node is node else set()
            opened = OpenArray(RawFile(array, writable=not self.read_only), node, stored_version=version, paths=kept)
            self._arrays[node.path] = opened
        return opened

    def stored_change(self, path: str) -> list[str]:
        """When the stored values of the array at store path `path`, opened here before, changed
        since this mount read or stored them (another program or machine wrote them): its cached
        chunks and shard indexes are forgotten, and the files showing it that were opened are
        returned, for the adapter to drop the kernel's caches of. [] when nothing changed, or
        while a write-back of the mount's own is changing them (it takes what it stored)."""
        opened = self._arrays.get(path)
        if opened is None or opened.flushing:
            return []
        flushed = opened.flushed
        version = self.usage.of(path).version  # may list part of a write-back that starts meanwhile
        with self._lock:
            if (version == opened.stored_version or opened.flushing or opened.flushed != flushed
                    or self._arrays.get(path) is not opened):
                return []
            opened.raw.array.forget_stored()
            opened.stored_version = version
            return sorted(opened.paths)

    def held(self) -> list[str]:
        """Store paths of the arrays some handle holds open (and not retired)."""
        with self._lock:
            return [path for path, opened in self._arrays.items() if opened.handles and not opened.retired]

    def stopping(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds; True once the table is stopping."""
        return self._stop.wait(timeout)

    def _written_elsewhere(self, opened: OpenArray) -> bool:
        return self.usage.of(opened.node.path).version != opened.stored_version

    def retire(self, path: str, keep: bool, wait: float) -> None:
        """Arrays open at or below store path `path` stop serving (their handles get ESTALE from
        now on); a write-back in progress finishes first, so nothing is written under `path`
        after it moves or goes. What was written is stored first when the node is moved, not
        when it is deleted. On failure, or when a write-back outlasts `wait` seconds (EBUSY), every
        array serves again and the change is refused."""
        retired = []
        try:
            for p, opened in list(self._arrays.items()):
                if p == path or p.startswith(path + "/"):
                    with self._lock:
                        opened.retired = True
                        self._arrays.pop(p, None)
                    retired.append((p, opened))
                    _settle(opened, keep, wait)
        except BaseException:
            with self._lock:
                for p, opened in retired:
                    opened.retired = False
                    self._arrays.setdefault(p, opened)
            raise
        for p, _ in retired:
            self.usage.forget(p)

    # write-back

    def start(self) -> None:
        """Start the flusher thread (after the daemon forked: see init_with_config)."""
        self._flusher_thread = threading.Thread(target=self._flusher, name="flusher", daemon=True)
        self._flusher_thread.start()

    def stop(self) -> None:
        """Stop the flusher and store every write (at unmount)."""
        self._stop.set()
        self._wake_flusher.set()
        if self._flusher_thread is not None:
            self._flusher_thread.join()  # it may be mid-flush or mid-log: let it finish
        self._final_write_back()

    def wake(self) -> None:
        """Start a write-back now, while writing goes on (early write-back)."""
        self._wake_flusher.set()

    def _final_write_back(self) -> None:
        """Store every write, retrying a few times; what still cannot be stored is saved as
        recovery data (see recovery.py), and the daemon will exit non-zero."""
        for attempt in range(SHUTDOWN_TRIES):
            if attempt:
                time.sleep(1.0)
            self.flush_all()
            failed = [a for a in self._arrays.values() if a.raw.array.dirty or a.raw.pending]
            if not any(a.raw.array.dirty for a in failed):
                break
        for opened in failed:
            self._save(opened, chunks=opened.raw.array.dirty)
            self.unstored.append(opened.node.path or "/")

    def save_partial(self, opened: OpenArray) -> None:
        """The last handle closed with a partial record pending: its bytes are saved for
        recovery (and logged), the file shows whole records again. Its chunks stay with the
        write-back, which goes on storing them."""
        self._save(opened, chunks=False)

    def _save(self, opened: OpenArray, chunks: bool) -> None:
        """What of `opened` is written and cannot be stored, saved for recovery (recovery.py) in
        one log line: its unstored chunks when `chunks`, and the bytes of a partial record
        pending, which the file drops (it shows whole records again)."""
        raw = opened.raw
        pending = raw.take_pending()
        if not (chunks or pending):
            return
        name = opened.node.path or "/"
        places = [self.recovery_dir, os.path.join(tempfile.gettempdir(), "zarrfs-recovery")]
        try:
            saved = recovery.save(places, self.store.root, opened.node.path, opened.node.meta.document,
                                  raw.array.unstored() if chunks else [], (raw.size, pending) if pending else None)
        except OSError as e:
            log.critical("written data of %s could not be stored, and is lost: %s", name, e)
            return
        if not chunks:  # only a record never completed: nothing else is lost
            log.error("%s: %d bytes of a record never completed (records are %d bytes) were not stored; saved in %s",
                      name, len(pending), growth.record_nbytes(raw.array), saved)
            return
        # an object store is reached again with the mount's options and credentials, never saved
        options = " -o OPTIONS (this mount's, in its environment)" if self.store.capabilities.remote else ""
        log.error("written data of %s could not be stored (%s); saved in %s: replay it with "
                  "`zarrfs-recover %s%s`", name, opened.error, saved, saved, options)

    def _flusher(self) -> None:
        """Write-back: dirty chunks reach the store within a few seconds, or as soon as
        EARLY_WRITE_BACK (operations.py) piles up, so that encoding and the disk overlap a long write, and the
        chunks a write-back frees are written into again instead of new memory."""
        last_full = time.monotonic()
        while not self._stop.is_set():
            early = self._wake_flusher.wait(self.flush_interval)
            self._wake_flusher.clear()
            whole_only = early and time.monotonic() - last_full < self.flush_interval
            self.flush_all(whole_only)
            if not whole_only:
                last_full = time.monotonic()

    def flush_all(self, whole_only: bool = False) -> None:
        for opened in list(self._arrays.values()):
            self._write_back(opened, whole_only)

    def _write_back(self, opened: OpenArray, whole_only: bool) -> None:
        """One array's write-back; a failure is kept for the next fsync/close and logged once."""
        if opened.retired:  # deleted or moved through the mount (hierarchy_edits.py)
            return
        name = opened.node.path or "/"
        try:
            self._own_flush(opened, whole_only)
        except ZarrfsError as e:
            again = opened.failing == str(e)  # the same failure every few seconds
            log.log(logging.DEBUG if again else logging.ERROR, "write-back of %s failed: %s", name, e)
            opened.error, opened.failing = e, str(e)
        except Exception as e:  # a bug: keep the data dirty and the flusher alive
            log.exception("write-back of %s failed", name)
            opened.error = ZarrfsError(f"write-back failed: {e!r}")
        else:
            if opened.failing and not opened.raw.array.dirty:
                log.warning("write-back of %s succeeds again", name)
                opened.failing = ""

    def flush(self, opened: OpenArray) -> None:
        """A request's own write-back (fsync, close): raises the error a background one kept."""
        if opened.retired:
            return
        error, opened.error = opened.error, None
        if error is not None:
            raise error
        self._own_flush(opened)

    def _show_shape(self, opened: OpenArray) -> None:
        """The store holds a new shape (in the array's document, or in the root's consolidated
        copy, which follows it later), or the records appended here moved: the core is told."""
        write_back, rebases = opened.raw.array.write_back, opened.raw.rebases
        stored, copied = write_back.stored_shape, write_back.copy_shape
        if (opened.shown_shape, opened.shown_copy, opened.shown_rebases) != (stored, copied, rebases):
            moved = opened.shown_rebases != rebases
            opened.shown_shape, opened.shown_copy, opened.shown_rebases = stored, copied, rebases
            self.reshaped(opened, moved)

    def _own_flush(self, opened: OpenArray, whole_only: bool = False) -> None:
        """Write back, then take the stored values as this mount now knows them: its own writes
        change the stored fingerprint, and taken for another writer's they would drop every cached
        chunk and kernel page at each flush, racing the writes that follow (kernel_caching.py).
        Only when no other change was seen before the flush, which stays to be noticed; what
        another writer stores during the flush, or in the moment between it and this look, is
        taken for the mount's own, and shows with the next change. Whether the flush stored
        anything is told by its commits, not by the array's dirtiness before it: a write landing
        after that look is stored by this flush all the same (taken as the mount's own, unlooked
        at before: the array was clean, and a listing for every clean one would cost each visit
        of the flusher)."""
        path, array = opened.node.path, opened.raw.array
        stores = array.dirty
        current = not stores or self._seen_current(opened)  # nothing to store costs no listing
        commits = array.shared.version  # moved by every commit, even a failed one (writeback.py)
        stored = False
        self._flushing(opened, 1)
        try:
            try:
                opened.raw.flush(whole_only)
            finally:
                stored = array.shared.version != commits
                if stored:  # else nothing changed: what was listed holds (and a listing across stays void)
                    self.usage.forget(path)
                self._show_shape(opened)  # a rebase may be followed by a failure: shown all the same
            if stored and current:
                self._take_stored_version(opened)
        finally:
            self._flushing(opened, -1, stored)

    def _flushing(self, opened: OpenArray, step: int, stored: bool = False) -> None:
        """A write-back starts (`step` 1) or ends (-1, having `stored`): stored_change looks past
        it. Every one counts while it runs, as one that found nothing to store may still store a
        write that landed meanwhile."""
        with self._lock:
            opened.flushing += step
            opened.flushed += stored

    def _seen_current(self, opened: OpenArray) -> bool:
        """Whether a look at the stored values finds no other writer's change: none found, or the
        look was void, another write-back of the mount's own storing meanwhile (its chunks,
        listed, are no other writer's: a write-back that took them for one would then not take
        its own, and a later look would drop the kernel's pages for it)."""
        with self._lock:
            flushing, flushed = opened.flushing, opened.flushed
        changed = self._written_elsewhere(opened)
        with self._lock:
            return not changed or bool(flushing or opened.flushing) or opened.flushed != flushed

    def _take_stored_version(self, opened: OpenArray) -> None:
        try:
            version = self.usage.of(opened.node.path).version
        except ZarrfsError:  # stored, but not looked at: the next look drops the caches, needlessly
            return
        with self._lock:
            opened.stored_version = version


def _settle(opened: OpenArray, keep: bool, wait: float) -> None:
    """Wait, within a bound, for the write-back in progress; then store what is written
    if the node is kept. (No new write-back starts: the array is retired.)"""
    lock = opened.raw.array.shared.flush_lock
    if not lock.acquire(timeout=wait):
        name = opened.raw.array.shared.name
        raise RefusedError(f"array {name!r}: a write-back to the store is still in progress after {wait:g} s: "
                           f"the array is left as it was; try again", errno.EBUSY)
    lock.release()
    if keep:
        opened.raw.flush()
