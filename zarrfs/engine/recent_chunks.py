"""The last few chunks that small reads decoded into scratch memory, kept for the next reads.

A small read decodes a chunk it wants part of into a scratch buffer and does not cache it
(ChunkCache.admit: a chunk read once at random is not worth new memory). The buffer stays here
until a few later small reads push it out, so that the next read of the same chunk (a tool
reading 4 KiB at a time, GIO's 16 KiB sniff whose row pieces touch each chunk twice) copies
from it instead of decoding again. A chunk may be decoded only in part (a blosc chunk in the blocks
that hold what the first read wanted): a later read within that part is served, one past it
decodes the chunk again.

It keeps two chunks at first: each buffer kept is new memory until it is recycled (a page fault
per 4 KiB, about 1 µs here), and sixteen slots from the start made a fresh mount's first sixteen
random reads three times slower. It keeps more when they would serve: one more each time a read
wants bytes a decode it pushed out lately held (as ARC grows a list on a hit in its ghost), and
as many as a small read of several boxes meets chunks (make_room), since it comes back to them
(GIO's sniff of a 2-D array: a partial row, whole rows, a partial row).

Bytes are copied out under the lock, so a buffer pushed out is never lent again while a reader
still copies from it.
"""

import threading
from collections import OrderedDict

import numpy as np

from zarrfs.engine.buffers import BufferPool
from zarrfs.geometry import Box

SLOTS = 16  # chunks kept at most: a small read of a 2-D array touches a row of them, in two or three boxes
FIRST_SLOTS = 2  # chunks kept until more would have served a read
MAX_BYTES = 16 << 20  # their buffers, all together


class RecentDecodes:
    def __init__(self, pool: BufferPool, slots: int = SLOTS, max_bytes: int = MAX_BYTES):
        self._pool, self._slots, self._max_bytes = pool, slots, max_bytes
        self._entries: OrderedDict = OrderedDict()  # key -> (base buffer, chunk, decoded span or None: all)
        self._pushed_out: OrderedDict = OrderedDict()  # the last `slots` pushed out: key -> decoded span
        self.limit = min(FIRST_SLOTS, slots)  # slots in use now
        self.nbytes = 0
        self._lock = threading.Lock()

    def copy_out(self, key: tuple, box: Box, target: np.ndarray, wanted: tuple[int, int] | None) -> bool:
        """Copy chunk[box] into `target` if the chunk is here, decoded at least over `wanted`
        (None: all of it); False if it is not."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                if _covers(self._pushed_out.pop(key, ()), wanted):  # a slot more might have served it
                    self.limit = min(self._slots, self.limit + 1)
                return False
            if not _covers(found[2], wanted):
                return False
            target[...] = found[1][box]
            self._entries.move_to_end(key)
            return True

    def make_room(self, chunks: int) -> None:
        """Keep at least `chunks` decodes (at most the slots): one read is about to come back to them."""
        with self._lock:
            self.limit = max(self.limit, min(self._slots, chunks))

    def keep(self, key: tuple, base: np.ndarray, chunk: np.ndarray, decoded: tuple[int, int] | None) -> None:
        """Keep a scratch buffer (taken from the pool) that holds `key` decoded over the span `decoded`
        (None: all of it); the oldest kept buffer goes back to the pool."""
        if base.nbytes > self._max_bytes:
            self._pool.give(base)
            return
        with self._lock:
            evicted = []
            old = self._entries.pop(key, None)
            if old is not None:  # counted out now: the loop below must never reach the new entry
                self.nbytes -= old[0].nbytes
                evicted.append(old)
            self._entries[key] = (base, chunk, decoded)
            self.nbytes += base.nbytes
            while len(self._entries) > self.limit or self.nbytes > self._max_bytes:
                gone_key, gone = self._entries.popitem(last=False)
                self.nbytes -= gone[0].nbytes
                evicted.append(gone)
                self._push_out(gone_key, gone[2])
            for entry in evicted:
                self._pool.give(entry[0])

    def _push_out(self, key: tuple, decoded: tuple[int, int] | None) -> None:
        self._pushed_out[key] = decoded
        self._pushed_out.move_to_end(key)
        if len(self._pushed_out) > self._slots:
            self._pushed_out.popitem(last=False)

    def forget(self, key: tuple) -> None:
        """The chunk changed (written through the mount): its decoded bytes are stale."""
        with self._lock:
            self._pushed_out.pop(key, None)
            found = self._entries.pop(key, None)
            if found is not None:
                self.nbytes -= found[0].nbytes
                self._pool.give(found[0])


def _covers(decoded: tuple[int, ...] | None, wanted: tuple[int, int] | None) -> bool:
    """Whether a decode over the span `decoded` (None: all of it; (): nothing) holds the bytes
    `wanted` (None: all)."""
    if decoded is None:
        return True
    return bool(decoded) and wanted is not None and decoded[0] <= wanted[0] and wanted[1] <= decoded[1]
