"""Coherence between the data views of one array.

NAME.bin, NAME.npy and NAME.img show the same bytes but are separate files to the kernel, each
with a page cache of its own (kept across opens: only this daemon changes the data). After a
write through one, the kernel's cached pages of the others that have been opened are dropped
with libfuse's fuse_invalidate_path, so a read or an mmap of any view sees the write.

The invalidation runs on a thread of its own and the write waits for it: dropping a view's
pages waits for the writes in flight to it (and writes its dirty mmap pages back), and the
writer we are answering may hold the pages of its own file until we answer. Two writes to two
views at once (mmap writers on NAME.bin and NAME.npy) would each wait for the other: so a write
to a file whose pages are queued to be dropped does not wait (both queue before they look, so
at least one of them sees the other's), and no write waits more than WAIT seconds.
"""

import ctypes
import logging
import os
import queue
import threading

from zarrfs.fuse.libfuse import mfusepy

log = logging.getLogger(__name__)

WAIT = 1.0  # seconds a write waits for the invalidation of its sibling views

_libfuse = mfusepy._libfuse
_libfuse.fuse_invalidate_path.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_libfuse.fuse_invalidate_path.restype = ctypes.c_int


class Siblings:
    def __init__(self):
        self._fuse = None  # libfuse's struct fuse *, known once the mount is live
        self._opened: set[str] = set()  # data views opened since the mount: only they can have cached pages
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: dict[str, int] = {}  # path -> invalidations queued or running
        self._lock = threading.Lock()

    def start(self) -> None:
        """Called from libfuse's init: the only context that knows the struct fuse."""
        self._fuse = _libfuse.fuse_get_context().contents.fuse
        threading.Thread(target=self._invalidator, name="invalidator", daemon=True).start()

    def opened(self, path: str) -> None:
        self._opened.add(path)

    def wrote(self, siblings: tuple[str, tuple[str, ...]]) -> None:
        """After a write to siblings[0]: drop the kernel's cached pages of the others that were
        ever opened."""
        path, others = siblings
        stale = [p for p in others if p in self._opened]
        if not stale or self._fuse is None:
            return
        done = threading.Event()
        with self._lock:
            for p in stale:
                self._pending[p] = self._pending.get(p, 0) + 1
            mine_pending = self._pending.get(path, 0)
        self._queue.put((stale, done))
        if mine_pending:  # the invalidator may wait for this very write: never wait for it
            return
        if not done.wait(WAIT):
            log.debug("invalidation of %s finishes after the write is answered", ", ".join(stale))

    def refresh(self, path: str) -> None:
        """Drop what the kernel holds of `path` (its attributes and pages), without waiting: the
        file was listed from metadata that turned out stale."""
        if self._fuse is not None:
            with self._lock:
                self._pending[path] = self._pending.get(path, 0) + 1
            self._queue.put(([path], threading.Event()))

    def drop(self, paths: list[str]) -> None:
        """Drop what the kernel holds of `paths` (their attributes and pages): the mount deleted,
        moved or changed the node they show. Waits, as a write does, at most WAIT seconds."""
        if self._fuse is None or not paths:
            return
        done = threading.Event()
        with self._lock:
            for p in paths:
                self._pending[p] = self._pending.get(p, 0) + 1
        self._queue.put((list(paths), done))
        done.wait(WAIT)

    def _invalidator(self) -> None:
        while True:
            paths, done = self._queue.get()
            for path in paths:
                result = _libfuse.fuse_invalidate_path(self._fuse, os.fsencode(path))
                with self._lock:
                    self._pending[path] -= 1
                    if not self._pending[path]:
                        del self._pending[path]
                if result not in (0, -2):  # -ENOENT: the kernel holds nothing of it
                    log.debug("invalidating %s: error %d", path, -result)
            done.set()
