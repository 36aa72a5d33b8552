"""Keys whose GET just ran out of time: asked again at once, they fail at once.

When a read meets a hung server, the kernel's read-ahead request fails at the timeout, and the
kernel then reads the page the caller wanted once more, synchronously: a second wait of a full
attempt for the same chunk, so one read() took one and a half times `-o timeout`. A GET of a key
whose GET timed out less than `window` seconds ago fails here without a request, so a read()
waits out one timeout at most. The window is short (a second): the kernel's re-read follows at
once, and a person or a program trying again a moment later gets a fresh attempt.
"""

import errno
import threading
import time
from collections import OrderedDict

from zarrfs.errors import StoreError
from zarrfs.stores.remote_errors import timed_out

KEPT = 4096  # keys remembered at once: a stream's read-ahead times out a few dozen


class RecentTimeouts:
    def __init__(self, window: float):
        self.window = window
        self._when: OrderedDict[str, float] = OrderedDict()  # key -> time.monotonic() of its timeout
        self._lock = threading.Lock()

    def check(self, key: str) -> None:
        """Raise, naming the key, if its GET timed out within the window."""
        with self._lock:
            when = self._when.get(key)
            if when is None:
                return
            ago = time.monotonic() - when
            if ago >= self.window:
                del self._when[key]
                return
        raise StoreError(f"cannot read {key!r}: the server did not answer in time {ago:.1f} s ago (-o timeout); "
                         f"not asked again for {self.window - ago:.1f} s", errno.EIO)

    def note(self, key: str, error: BaseException) -> None:
        """Remember `key` if `error` is a timeout."""
        if not timed_out(error):
            return
        with self._lock:
            self._when[key] = time.monotonic()
            self._when.move_to_end(key)
            if len(self._when) > KEPT:
                self._when.popitem(last=False)
