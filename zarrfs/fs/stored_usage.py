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
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from zarrfs.engine.holes import Presence
from zarrfs.nodes import documents as nodes

LIFETIME = 30.0  # seconds, as long as the kernel keeps attributes
WARMERS = 16  # concurrent listings when a directory of arrays is listed from an object store
WARM_KEYS = 5000  # keys one recursive LIST of a group may take to serve all its arrays (5 pages)
STORED_ENTRIES = 1 << 17  # arrays whose figures are kept (a few hundred bytes each)
PRESENCE_CHUNKS = 1 << 16  # stored chunks whose places are kept for SEEK_DATA (a few hundred bytes each)


@dataclass(frozen=True)
class Stored:
    mtime_ns: int  # newest modification time of the array's documents and chunks
    nbytes: int  # encoded bytes of its stored chunks (documents left out)
    version: int = 0  # a fingerprint of every stored value's name, size, time and identity


class Tally:
    """Stored figures added up from a listing, one value at a time."""

    def __init__(self):
        self.newest = self.nbytes = self.fingerprint = 0

    def add(self, relative: str, st) -> None:
        self.newest = max(self.newest, st.st_mtime_ns)
        if relative not in nodes.DOCUMENT_NAMES and not relative.endswith("/"):
            self.nbytes += st.st_size
        # in any order; st_ino is an object store's ETag: a rewrite in the same second shows
        self.fingerprint ^= hash((relative, st.st_size, st.st_mtime_ns, st.st_ino))


class Expiring:
    """key -> value until its deadline, least recently used first: past `limit` in weight the
    oldest go, but never the newest, which a seek or listing is using."""

    def __init__(self, limit: int):
        self.limit, self.weight = limit, 0
        self._items: OrderedDict = OrderedDict()  # key -> (deadline, value, weight)
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            item = self._items.get(key)
            if item is None or item[0] <= time.monotonic():
                return None
            self._items.move_to_end(key)
            return item[1]

    def put(self, key, value, lifetime: float, weight: int = 1) -> None:
        with self._lock:
            self._drop(key)
            self._items[key] = (time.monotonic() + lifetime, value, weight)
            self.weight += weight
            while self.weight > self.limit and len(self._items) > 1:
                self.weight -= self._items.popitem(last=False)[1][2]

    def pop(self, key) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self.weight -= item[2]


class Usage:
    def __init__(self, store, lifetime: float = LIFETIME, presence_chunks: int = PRESENCE_CHUNKS):
        self.store = store
        self.lifetime = lifetime
        self._stored = Expiring(STORED_ENTRIES)
        self._seen: OrderedDict = OrderedDict()  # path -> (fingerprint, mtime) last reported
        self._forgets: OrderedDict = OrderedDict()  # path -> times forgotten (a listing across one is not kept)
        self._lock = threading.Lock()
        self.presences = Expiring(presence_chunks)  # weighed by stored chunks: memory stays bounded

    def of(self, path: str) -> Stored:
        """The stored state of the array at store path `path`."""
        cached = self._stored.get(path)
        if cached is not None:
            return cached
        forgets = self._forgets.get(path, 0)
        tally = Tally()
        for relative, st in self.store.files(path, directories=True):  # a deleted chunk changes its directory
            tally.add(relative, st)
        return self._record(path, tally, forgets)

    def _record(self, path: str, tally: Tally, forgets: int) -> Stored:
        """The array's figures. Its mtime moves on whenever its values changed, even when no
        stored time did: an object store's times are whole seconds, and a change within the
        second of the last one must still reach rsync and the kernel's cached pages. Not kept
        when the mount changed the array while it was listed (`forgets`, as it was before the
        listing, is out of date): the listing may hold part of that write-back, which kept would
        be taken for another writer's change once the whole of it is listed (open_arrays.py)."""
        mtime = tally.newest
        with self._lock:
            previous = self._seen.pop(path, None)
            if previous is not None and previous[0] == tally.fingerprint:
                mtime = max(mtime, previous[1])  # unchanged: as reported before
            elif previous is not None and mtime <= previous[1]:
                mtime = max(time.time_ns(), previous[1] + 1)
            self._seen[path] = (tally.fingerprint, mtime)
            if len(self._seen) > STORED_ENTRIES:
                self._seen.popitem(last=False)
        stored = Stored(mtime, tally.nbytes, tally.fingerprint)
        if self._forgets.get(path, 0) == forgets:
            self._stored.put(path, stored, self.lifetime)
        return stored

    def warm(self, directory: str, paths: list[str]) -> None:
        """Find the stored state of many arrays at once, before a listing asks for each in turn.
        On an object store each array's would be a LIST, a round trip: one recursive LIST of the
        group they are in serves them all when it ends within WARM_KEYS keys (a group of small
        arrays); else each array's is sent, concurrently. A local store lists in microseconds:
        nothing to gain there."""
        if self.store.capabilities.remote:
            self._warm(directory, paths)

    def warm_below(self, paths: list[str]) -> None:
        """As warm, on any store, for arrays anywhere below one group (a group file's stat wants
        every array below its group): one listing of the nearest group holding them all, not
        one per array."""
        cold = [p for p in paths if self._stored.get(p) is None]
        if len(cold) > 1:
            self._warm(_common_group(cold), cold)

    def _warm(self, directory: str, paths: list[str]) -> None:
        cold = [p for p in paths if self._stored.get(p) is None]
        if len(cold) > 1 and self._from_one_listing(directory, cold):
            return
        if len(cold) > 1 and self.store.capabilities.remote:
            with ThreadPoolExecutor(min(WARMERS, len(cold)), thread_name_prefix="usage") as pool:
                list(pool.map(self._try, cold))

    def _from_one_listing(self, directory: str, paths: list[str]) -> bool:
        """The figures of the arrays at `paths`, all below `directory`, from one listing of it:
        each key counts for the array it lies in, as that array's own listing has it (keys
        relative to the array, its directories too, the array's own as "/")."""
        below = f"{directory}/" if directory else ""
        found = {path[len(below):]: Tally() for path in paths}  # array path relative to directory -> figures
        forgets = {path: self._forgets.get(path, 0) for path in paths}
        try:
            for count, (relative, st) in enumerate(self.store.files(directory, directories=True)):
                if count == WARM_KEYS:
                    return False
                owner = _owner(relative, found)
                if owner is not None:
                    found[owner].add(relative[len(owner) + 1:] or "/", st)
        except Exception:
            return False  # each array's own listing reports the error for its entry
        for name, tally in found.items():
            self._record(below + name, tally, forgets[below + name])
        return True

    def _try(self, path: str) -> None:
        try:
            self.of(path)
        except Exception:
            pass  # the listing asks again, and reports the error for that one entry

    def presence(self, path: str, meta, array) -> Presence:
        """Which chunks of the array are stored: asked for by SEEK_DATA/SEEK_HOLE only, so kept
        apart from the listing's figures."""
        cached = self.presences.get(path)
        if cached is not None:
            return cached
        keys = (relative for relative, _ in self.store.files(path) if relative not in nodes.DOCUMENT_NAMES)
        presence = Presence.of_array(list(keys), meta, array)
        self.presences.put(path, presence, self.lifetime, 1 + len(presence.stored))
        return presence

    def forget(self, path: str) -> None:
        """The mount changed the array's stored values: look again next time."""
        with self._lock:
            self._forgets[path] = self._forgets.pop(path, 0) + 1
            if len(self._forgets) > STORED_ENTRIES:  # a listing across a forgotten count is not kept either
                self._forgets.popitem(last=False)
        self._stored.pop(path)
        self.presences.pop(path)


def _owner(relative: str, arrays: dict) -> str | None:
    """The array among `arrays` (paths relative to a listing) that the listed key lies in."""
    parts = relative.rstrip("/").split("/")
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        if prefix in arrays:
            return prefix
    return None


def _common_group(paths: list[str]) -> str:
    """The nearest group holding every array at `paths`."""
    parents = [p.split("/")[:-1] for p in paths]
    common = []
    for parts in zip(*parents, strict=False):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    return "/".join(common)
