"""A byte-bounded LRU of generated headers: a listing asks for every header's size, again and
again, and a header is made from metadata alone, so one dropped is simply made again."""

import sys
import threading
from collections import OrderedDict


class HeaderCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key, version, make):
        """The value cached for `key` at `version` (compared by identity), else make() cached."""
        with self._lock:
            item = self._items.get(key)
            if item is not None and item[0] is version:
                self._items.move_to_end(key)
                return item[1]
        value = make()
        size = sum(sys.getsizeof(v) for v in value.values()) + 200  # what is held: a TIFF header makes its bytes
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            if size <= self.max_bytes:
                self._items[key] = (version, value, size)
                self._bytes += size
            while self._bytes > self.max_bytes:
                self._bytes -= self._items.popitem(last=False)[1][2]
        return value
