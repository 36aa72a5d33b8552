"""Decode-ahead: the chunks a sequential reader wants next, decoded in the background.

A stream through NAME.bin reaches the daemon as 1 MiB requests, at most two at a time (the
kernel's read-ahead window), each decoding its chunk and then copying it to the kernel: half
the time one core waits for the other. Decoders release the GIL (zstd, blosc, zlib), so a
small pool decodes the chunks that follow a stream while requests copy the current ones out,
and a request then finds its chunk decoded, or being decoded.

Bounded: at most `max_bytes` of chunks being decoded or waiting (taken out of cache_size), at
most MAX_IN_FLIGHT decodes queued or running. A reader takes a chunk out (it is kept nowhere
else: the page cache has its bytes once read, or the chunk cache takes it); chunks nobody took
make room for newer ones after STALE seconds, unless their stream comes back for them first (a
reader that paused: the walk its next read starts keeps them, Array.keep_ahead). Never stale after a write: a chunk written
through the mount is forgotten (ChunkCache.pop), and Array checks the version a decode saw
(see Array._chunk_ahead).
"""

import math
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
from numpy.typing import DTypeLike

from zarrfs.engine.buffers import free, malloc_array

DEFAULT_BYTES = 16 << 20  # 16 chunks of 1 MiB: a stream's next 16 MiB
STALE = 1.0  # seconds after which a decoded chunk no read took may be dropped for a newer one
STREAMS = 8  # sequential readers followed per file

Decoded = tuple[int, np.ndarray, int]  # (malloc'd address, the chunk over it, the array version it is valid for)


class Pending:
    """A chunk being decoded, then decoded: `result` is (address, chunk, version) or None."""

    __slots__ = ("nbytes", "done", "result", "orphan", "since")

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.done = threading.Event()
        self.result: Decoded | None = None
        self.orphan = False  # forgotten before its decode ended: the decode returns the buffer
        self.since = time.monotonic()


class DecodeAhead:
    def __init__(self, max_bytes: int = DEFAULT_BYTES, workers: int | None = None):
        self.max_bytes = max_bytes
        self.workers = workers or os.cpu_count() or 1
        self.max_in_flight = 2 * self.workers
        self.nbytes = 0  # reserved by the entries
        self._entries: OrderedDict[tuple, Pending] = OrderedDict()  # by cache key, oldest first
        self._fetching: set[tuple] = set()  # keys of small reads under way (fetch)
        self._running = 0
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None  # made on first use: a daemon forks first
        self._closed = False  # close(): nothing more is decoded ahead

    def room(self, nbytes: int) -> bool:
        """Whether a chunk of `nbytes` could be decoded ahead now (cheap: asked per request)."""
        return self.max_bytes >= nbytes and self._running < self.max_in_flight and (
            self.nbytes + nbytes <= self.max_bytes or self._stale())

    def __contains__(self, key: tuple) -> bool:
        return key in self._entries

    def submit(self, key: tuple, shape: tuple[int, ...], dtype: DTypeLike, decode: Callable[[np.ndarray], int | None]) -> bool:
        """Decode `key` ahead: decode(chunk buffer) fills the buffer and returns the array
        version it is valid for, or None (nothing worth keeping). False when there is no room."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        with self._lock:
            if self._closed or key in self._entries or self._running >= self.max_in_flight:
                return False
            while self.nbytes + nbytes > self.max_bytes and self._drop_stale():
                pass
            if self.nbytes + nbytes > self.max_bytes:
                return False
            entry = self._entries[key] = Pending(nbytes)
            self.nbytes += nbytes
            self._running += 1
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="decode-ahead")
        try:
            self._executor.submit(self._run, entry, shape, dtype, decode)
        except RuntimeError:  # no thread to be had (or shut down): the entry ends at once, empty
            with self._lock:
                self._running -= 1
                self._release(self._entries.pop(key, None))
            entry.done.set()
            return False
        return True

    def _run(self, entry: Pending, shape: tuple[int, ...], dtype: DTypeLike,
             decode: Callable[[np.ndarray], int | None]) -> None:
        """Decode into new memory; whatever happens (no memory, a failed read), the entry ends
        done, so a reader waiting in take() never waits for ever."""
        address: int | None = None
        chunk: np.ndarray | None = None
        result: Decoded | None = None
        try:
            address, chunk = malloc_array(shape, dtype)  # malloc: a reply may hand it to libfuse whole
            version = decode(chunk)
            if version is not None:
                result = (address, chunk, version)
        except Exception:  # the reader's own decode reports it, naming the chunk
            pass
        finally:
            with self._lock:
                self._running -= 1
                entry.since = time.monotonic()
                if (result is None or entry.orphan) and address is not None:
                    del chunk
                    free(address)
                    result = None
                entry.result = result
            entry.done.set()

    def fetch(self, key: tuple, read: Callable[[], object]) -> None:
        """Run `read` in the pool unless one for `key` is under way: a small read (a shard's
        index, kept by whoever reads it) that a decode ahead would otherwise wait for. Not
        counted in the budget; at most max_in_flight of them at once, others are left out."""
        with self._lock:
            if self._closed or key in self._fetching or len(self._fetching) >= self.max_in_flight:
                return
            self._fetching.add(key)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="decode-ahead")

        def run() -> None:
            try:
                read()
            except Exception:  # the read that needs it reports it, naming the shard
                pass
            finally:
                with self._lock:
                    self._fetching.discard(key)
        try:
            self._executor.submit(run)
        except RuntimeError:  # no thread to be had (or shut down): the decode reads it itself
            with self._lock:
                self._fetching.discard(key)

    def left_behind(self) -> bool:
        """Whether the oldest chunk decoded ahead is STALE: the next walk may drop it (cheap)."""
        return self._stale()

    def wanted(self, key: tuple) -> None:
        """The chunk decoded ahead for `key` is wanted still: its stream came back to it (a reader
        that paused longer than STALE is not one that went away), so it is not dropped as stale."""
        if key not in self._entries:  # the common miss (a walk asks for each chunk), without the lock
            return
        with self._lock:  # moved last, as the newest: _stale() looks at the first entry alone
            entry = self._entries.get(key)
            if entry is not None:
                entry.since = max(entry.since, time.monotonic())
                self._entries.move_to_end(key)

    def take(self, key: tuple) -> Decoded | None:
        """(address, chunk, version) decoded ahead for `key`, waiting for a decode under way;
        None when there is none. The caller owns the memory: it frees it (buffers.free) after
        its last use of `chunk`, or hands it to libfuse, which does."""
        if key not in self._entries:  # the common miss, without the lock
            return None
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return None
        entry.done.wait()
        with self._lock:  # counted until its decode ends: the budget bounds the memory decodes fill
            self.nbytes -= entry.nbytes
        return entry.result

    def forget(self, key: tuple) -> None:
        """The chunk changed: drop what was decoded of it."""
        if key in self._entries:
            with self._lock:
                self._release(self._entries.pop(key, None))

    def settle(self, timeout: float | None = None) -> None:
        """Wait for the decodes under way to end (tests, and anyone who needs a quiet moment).

        Raises TimeoutError when they have not ended within `timeout` seconds in all: a caller
        that goes on as if they had would judge a state still changing.
        """
        with self._lock:
            entries = list(self._entries.values())
        deadline = None if timeout is None else time.monotonic() + timeout
        for entry in entries:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not entry.done.wait(left):
                raise TimeoutError(f"decodes ahead still under way after {timeout} s")

    def close(self) -> None:
        """Nothing more is decoded ahead: every chunk decoded and not taken is freed (a decode
        under way frees its own when it ends) and the pool's threads go. The memory is malloc'd
        (buffers.malloc_array): it is freed here or never."""
        with self._lock:
            self._closed = True
            while self._entries:
                self._release(self._entries.popitem(last=False)[1])
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _stale(self) -> bool:
        first = next(iter(self._entries.values()), None)
        return first is not None and first.done.is_set() and time.monotonic() - first.since > STALE

    def _drop_stale(self) -> bool:
        """Drop the oldest entry if no read took it for STALE seconds (its reader went away)."""
        if not self._stale():
            return False
        self._release(self._entries.popitem(last=False)[1])
        return True

    def _release(self, entry: Pending | None) -> None:
        """Under the lock: an entry leaves without a reader."""
        if entry is None:
            return
        self.nbytes -= entry.nbytes
        if entry.done.is_set():
            if entry.result is not None:
                free(entry.result[0])
                entry.result = None
        else:
            entry.orphan = True


class Streams:
    """Where the sequential readers of one file are. A read continues a stream when it starts
    where the stream has reached, or up to two reads' lengths before (the kernel sends its
    read-ahead requests together, and they may overtake each other) or one after. Each stream
    also remembers how far its chunks have been handed to decode-ahead, so that a walk starts
    there instead of going over the chunks it started before."""

    def __init__(self) -> None:
        self._ends: OrderedDict[int, int] = OrderedDict()  # the offset each stream has reached -> how far it is decoded ahead
        self._lock = threading.Lock()

    def follow(self, offset: int, end: int) -> tuple[int, int] | None:
        """Record a read of [offset, end); (where its stream has reached, how far it has been
        decoded ahead) when it continues one, else None (it may start one)."""
        n = end - offset
        with self._lock:
            for reached in reversed(self._ends):
                if reached - 2 * n <= offset <= reached + n:
                    ahead = self._ends.pop(reached)
                    reached = max(reached, end)
                    self._ends[reached] = ahead
                    return reached, ahead
            self._ends[end] = end
            if len(self._ends) > STREAMS:
                self._ends.popitem(last=False)
            return None

    def decoded_ahead(self, reached: int, until: int) -> None:
        """The stream that has reached `reached` is decoded ahead as far as `until`."""
        with self._lock:
            if reached in self._ends:
                self._ends[reached] = max(self._ends[reached], until)
