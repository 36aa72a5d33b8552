"""The last few chunks that small reads decoded into scratch memory, kept for the next reads.

A small read decodes a chunk it wants part of into a scratch buffer and does not cache it
(ChunkCache.admit: a chunk read once at random is not worth new memory). The buffer stays here
until a few later small reads push it out, so that the next read of the same chunk (a tool
reading 4 KiB at a time, GIO's 16 KiB sniff whose row pieces touch each chunk twice) copies
from it instead of decoding again. A chunk may be decoded only in part (a zstd chunk as far as
the first read wanted, a blosc chunk the blocks that hold it): a later read within that part is
served, one past it decodes the chunk again.

Bytes are copied out under the lock, so a buffer pushed out is never lent again while a reader
still copies from it.
"""

import threading
from collections import OrderedDict

import numpy as np

SLOTS = 16  # chunks kept: a small read of a 2-D array touches a row of them, in two or three boxes
MAX_BYTES = 16 << 20  # their buffers, all together


class RecentDecodes:
    def __init__(self, pool, slots: int = SLOTS, max_bytes: int = MAX_BYTES):
        self._pool, self._slots, self._max_bytes = pool, slots, max_bytes
        self._entries: OrderedDict = OrderedDict()  # key -> (base buffer, chunk, decoded span or None: all)
        self.nbytes = 0
        self._lock = threading.Lock()

    def copy_out(self, key, box, target: np.ndarray, wanted: tuple[int, int] | None) -> bool:
        """Copy chunk[box] into `target` if the chunk is here, decoded at least over `wanted`
        (None: all of it); False if it is not."""
        with self._lock:
            found = self._entries.get(key)
            span = found and found[2]
            if found is None or (span is not None and (wanted is None or wanted[0] < span[0] or wanted[1] > span[1])):
                return False
            target[...] = found[1][box]
            self._entries.move_to_end(key)
            return True

    def keep(self, key, base: np.ndarray, chunk: np.ndarray, decoded: tuple[int, int] | None) -> None:
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
            while len(self._entries) > self._slots or self.nbytes > self._max_bytes:
                gone = self._entries.popitem(last=False)[1]
                self.nbytes -= gone[0].nbytes
                evicted.append(gone)
            for entry in evicted:
                self._pool.give(entry[0])

    def forget(self, key) -> None:
        """The chunk changed (written through the mount): its decoded bytes are stale."""
        with self._lock:
            found = self._entries.pop(key, None)
            if found is not None:
                self.nbytes -= found[0].nbytes
                self._pool.give(found[0])
