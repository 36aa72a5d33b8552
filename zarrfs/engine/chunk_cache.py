"""A byte-bounded LRU of decoded chunks (of fixed-size elements), shared by every array of a mount, with admission for
small random reads."""

import threading
from collections import OrderedDict

import numpy as np

from zarrfs.engine.buffers import scratch
from zarrfs.engine.decode_ahead import DecodeAhead
from zarrfs.engine.decodes_in_progress import DecodesInProgress
from zarrfs.engine.recent_chunks import RecentDecodes

MISSING = np.empty(0, dtype="u1")  # cached "this chunk is not stored": reads give the fill value
GHOSTS = 8192  # chunks read once in part and not cached, remembered by key only


class ChunkCache:
    def __init__(self, max_bytes: int, ahead_bytes: int = 0, ahead_workers: int | None = None):
        """max_bytes bounds everything decoded: the cached chunks, and at most ahead_bytes (and
        at most a quarter of max_bytes) of chunks decoded ahead of sequential readers."""
        ahead_bytes = min(ahead_bytes, max_bytes // 4)
        self.ahead = DecodeAhead(ahead_bytes, ahead_workers)
        self.max_bytes = max_bytes - ahead_bytes
        self.nbytes = 0
        self._entries: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._seen: OrderedDict[tuple, bool] = OrderedDict()  # the ghosts, oldest first
        self._lock = threading.Lock()
        self.recent = RecentDecodes(scratch)  # chunks small reads decoded into scratch, not cached
        self.decodes = DecodesInProgress()  # chunks being decoded now, which a second reader waits for

    def get(self, key: tuple) -> np.ndarray | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def __contains__(self, key: tuple) -> bool:
        return key in self._entries

    def admit(self, key: tuple) -> bool:
        """Whether a chunk that a small read wants part of should be cached: yes when it is
        cached already or was read recently. A chunk read once at random is not worth new
        memory, and would push out chunks that are read again (2Q-style admission)."""
        with self._lock:
            if key in self._entries or self._seen.pop(key, False):
                return True
            self._seen[key] = True
            if len(self._seen) > GHOSTS:
                self._seen.popitem(last=False)
            return False

    def put(self, key: tuple, value: np.ndarray) -> None:
        """Keep a decoded chunk, within the bound. A chunk of Python objects (strings, bytes:
        NAME.txt's) is not kept: its nbytes counts pointers, tens of times fewer bytes than its
        objects hold, and weighing them is a pass over every element; NAME.txt reads each
        array once per version (views/text.py keeps the text or its size instead)."""
        if value.nbytes > self.max_bytes or value.dtype.hasobject:
            self.pop(key)
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self._entries[key] = value
            self.nbytes += value.nbytes
            while self.nbytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.nbytes -= evicted.nbytes

    def pop(self, key: tuple) -> None:
        self.recent.forget(key)
        self.ahead.forget(key)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
