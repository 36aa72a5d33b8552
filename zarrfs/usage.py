"""What an array's stored values cost and when they last changed, found by listing alone.

The mtime of an array's files is that of its newest stored value (a chunk, a shard, or one of
its documents) or, in a local store, of the newest directory holding them (a deleted chunk
changes only that), so `rsync -a`, `find -newer` and file managers see changes made by any
program; st_blocks is the encoded size of its stored chunks, so `du` shows what the data costs.
Both come from one listing of the array's directory with a stat per file (no value is ever
opened), kept for the attribute lifetime and forgotten at once when the mount writes the array.
"""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import nodes
from .holes import Presence

LIFETIME = 30.0  # seconds, as long as the kernel keeps attributes
WARMERS = 16  # concurrent listings when a directory of arrays is listed from an object store


@dataclass(frozen=True)
class Stored:
    mtime_ns: int  # newest modification time of the array's documents and chunks
    nbytes: int  # encoded bytes of its stored chunks (documents left out)


class Usage:
    def __init__(self, store, lifetime: float = LIFETIME):
        self.store = store
        self.lifetime = lifetime
        self._stored: dict[str, tuple[float, Stored]] = {}
        self._presence: dict[str, tuple[float, Presence]] = {}
        self._lock = threading.Lock()

    def of(self, path: str) -> Stored:
        """The stored state of the array at store path `path`."""
        cached = self._stored.get(path)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        newest = total = 0
        for relative, st in self.store.files(path, directories=True):  # a deleted chunk changes its directory
            newest = max(newest, st.st_mtime_ns)
            if relative not in nodes.DOCUMENT_NAMES and not relative.endswith("/"):
                total += st.st_size
        stored = Stored(newest, total)
        with self._lock:
            self._stored[path] = (time.monotonic() + self.lifetime, stored)
        return stored

    def warm(self, paths: list[str]) -> None:
        """Find the stored state of many arrays at once, before a listing asks for each in turn:
        on an object store each is a LIST, a round trip, so they are sent concurrently. A local
        store lists in microseconds: nothing to gain there."""
        if not getattr(self.store, "remote", False):
            return
        now = time.monotonic()
        cold = [p for p in paths if (cached := self._stored.get(p)) is None or cached[0] <= now]
        if len(cold) > 1:
            with ThreadPoolExecutor(min(WARMERS, len(cold)), thread_name_prefix="usage") as pool:
                list(pool.map(self._try, cold))

    def _try(self, path: str) -> None:
        try:
            self.of(path)
        except Exception:
            pass  # the listing asks again, and reports the error for that one entry

    def presence(self, path: str, meta, array) -> Presence:
        """Which chunks of the array are stored: asked for by SEEK_DATA/SEEK_HOLE only, so kept
        apart from the listing's figures."""
        cached = self._presence.get(path)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        keys = (relative for relative, _ in self.store.files(path) if relative not in nodes.DOCUMENT_NAMES)
        presence = Presence.of_array(list(keys), meta, array)
        with self._lock:
            self._presence[path] = (time.monotonic() + self.lifetime, presence)
        return presence

    def forget(self, path: str) -> None:
        """The mount changed the array's stored values: look again next time."""
        with self._lock:
            self._stored.pop(path, None)
            self._presence.pop(path, None)
