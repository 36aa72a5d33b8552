"""A byte-bounded LRU of decoded chunks, shared by every array of a mount."""

import threading
from collections import OrderedDict

import numpy as np

MISSING = np.empty(0, dtype="u1")  # cached "this chunk is not stored": reads give the fill value


class ChunkCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key) -> np.ndarray | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key, value: np.ndarray) -> None:
        if value.nbytes > self.max_bytes:
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

    def pop(self, key) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
