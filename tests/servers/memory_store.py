"""A store in memory that implements the whole Store contract (stores/contract.py), with faults
to inject: engine tests run on it without a disk, and the contract suite checks it as it
checks the local and the object store.

Faults: `fail("get", "c/*", times=2, error=StoreError(...))` makes the next two GETs of a key
matching the pattern (fnmatch) raise; `truncate=True` instead answers half the bytes, as a
connection cut short would. `other_writer(key, data)` changes a value behind this store's back,
as another machine would: with conditional_writes, a publish building on the version read
before raises ConflictError, as ObjectStore's does.
"""

import errno
import fnmatch
import itertools
import os
import stat as stat_module
import threading
import time
from collections import OrderedDict
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import NamedTuple

from zarrfs.byte_ranges import ByteRange, Range, Suffix
from zarrfs.errors import ConflictError, StoreError, ValueChangedError
from zarrfs.stores.contained import key_parts as _parts
from zarrfs.stores.contract import Capabilities, own_staged
from zarrfs.stores.local_nodes import TEMP_PREFIX

VERSIONS_KEPT = 4096  # versions remembered for conditional writes, as ObjectStore keeps ETags
FAULTS_KEPT = 64  # faults waiting at once: a test arms a few
OPERATIONS = ("get", "get_ranges", "get_many", "stage", "publish", "list_dir", "stat", "files",
              "begin_node", "commit_node", "delete_node", "move_node")


class Staged(NamedTuple):
    key: str
    data: bytes | None  # None: a deletion


@dataclass
class _Value:
    data: bytes
    version: int
    mtime_ns: int


@dataclass
class _Fault:
    operation: str
    pattern: str
    times: int
    error: Exception | None
    truncate: bool


class MemoryStore:
    def __init__(self, capabilities: Capabilities | None = None, read_only: bool = False):
        self.capabilities = capabilities or Capabilities()
        self.read_only = read_only
        self.root = "memory:"
        self._values: dict[str, _Value] = {}
        self._read: OrderedDict[str, int | None] = OrderedDict()  # key -> version read whole (None: absent)
        self._faults: list[_Fault] = []
        self.reads: list[tuple[str, ByteRange]] = []  # (key, range) of every get, in order: what a remote store would send
        self._versions = itertools.count(1)
        self._temporaries = itertools.count()
        self._lock = threading.RLock()
        self._started_ns = time.time_ns()

    # faults and other writers

    def fail(self, operation: str, pattern: str = "*", times: int = 1, error: Exception | None = None,
             truncate: bool = False) -> None:
        """The next `times` calls of `operation` on a key matching `pattern` raise `error`
        (a StoreError naming the key by default), or with `truncate` answer half the bytes."""
        if operation not in OPERATIONS:
            raise ValueError(f"no such operation: {operation!r} (one of {', '.join(OPERATIONS)})")
        with self._lock:
            if len(self._faults) >= FAULTS_KEPT:
                raise ValueError(f"more than {FAULTS_KEPT} faults armed")
            self._faults.append(_Fault(operation, pattern, times, error, truncate))

    def other_writer(self, key: str, data: bytes | None) -> None:
        """Another writer stores (None: deletes) `key` now, with a version this store never read."""
        with self._lock:
            self._put(key, data)

    def _fault(self, operation: str, key: str) -> bool:
        """Raise an armed fault of `operation` on `key`; True when the answer is to be truncated."""
        with self._lock:
            for fault in self._faults:
                if fault.operation == operation and fnmatch.fnmatchcase(key, fault.pattern):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    if fault.truncate:
                        return True
                    raise fault.error or StoreError(f"cannot {operation} {key!r}: injected fault", errno.EIO)
        return False

    # values

    def path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def get(self, key: str, byte_range: ByteRange = None, limit: int | None = None) -> bytes | None:
        return self.get_versioned(key, byte_range, limit=limit)[0]

    def get_versioned(self, key: str, byte_range: ByteRange = None, expect=None,
                      limit: int | None = None) -> tuple[bytes | None, object]:
        _parts(key)
        truncate = self._fault("get", key)
        with self._lock:
            self.reads.append((key, byte_range))
            value = self._current(key, expect)
            if byte_range is None:
                self._remember(key, value.version if value else None)
        if value is None:
            return None, None
        if byte_range is None and limit is not None and len(value.data) > limit:
            raise StoreError(f"cannot read {key!r}: it has {len(value.data)} bytes, more than the {limit} expected",
                             errno.EIO)
        data = _slice(value.data, byte_range)
        return (data[:len(data) // 2] if truncate else data), value.version

    def _current(self, key: str, expect) -> _Value | None:
        """Under the lock: the value now, which must be version `expect` if given."""
        value = self._values.get(key)
        if expect is not None and (value is None or value.version != expect):
            raise ValueChangedError(f"{key!r} was replaced since it was read")
        return value

    def open_value(self, key: str) -> int | None:
        """Values in memory are no files (capabilities.file_values stays False)."""
        raise StoreError(f"cannot open {key!r} as a file: the values are in memory", errno.ENOTSUP)

    def get_ranges(self, key: str, ranges: list[Range], expect=None) -> list[bytes] | None:
        truncate = self._fault("get_ranges", key)
        with self._lock:
            value = self._current(key, expect)
        if value is None:
            return None
        parts = [_slice(value.data, r) for r in ranges]
        return [p[:len(p) // 2] for p in parts] if truncate else parts

    def get_many(self, keys: list[str], limit: int | None = None) -> dict[str, bytes | None]:
        for key in keys:
            self._fault("get_many", key)
        return {key: self.get(key, limit=limit) for key in keys}

    def exclusive(self, key: str) -> AbstractContextManager[None]:
        """Nothing held: its other writer is this test's, and its writes are conditional where declared."""
        return nullcontext()

    def version_known(self, key: str) -> bool:
        if not self.capabilities.conditional_writes:
            return True  # no write is conditional
        with self._lock:
            return key in self._read

    def _remember(self, key: str, version: int | None) -> None:
        self._read[key] = version
        self._read.move_to_end(key)
        while len(self._read) > VERSIONS_KEPT:
            self._read.popitem(last=False)

    def stage(self, key: str, data) -> Staged:
        self.check_writable(key)
        _parts(key)
        self._fault("stage", key)
        return Staged(key, None if data is None else bytes(memoryview(data).cast("B")))

    def publish(self, staged: list[Staged]) -> None:
        """Each staged value becomes current at once (under the lock). With conditional_writes,
        one whose stored version is not the one read raises ConflictError naming it, after the
        others are stored, as ObjectStore's publish does. A fault stops the publish there: the
        error names in `stored` the values stored before it."""
        conflicts, stored = [], []
        for key, data in own_staged(staged, Staged, self.root):
            try:
                self._fault("publish", key)
            except StoreError as e:
                e.stored = tuple(stored)
                raise
            with self._lock:
                if self._conflicts(key):
                    self._read.pop(key, None)  # unknown now: the merge reads it again
                    conflicts.append(key)
                    continue
                self._put(key, data)
                stored.append(key)
                if self.capabilities.conditional_writes:
                    self._remember(key, self._values[key].version if data is not None else None)
        if conflicts:
            raise ConflictError(f"changed by another writer meanwhile: {', '.join(conflicts[:5])}",
                                errno.EAGAIN, conflicts, stored)

    def _conflicts(self, key: str) -> bool:
        if not self.capabilities.conditional_writes or key not in self._read:
            return False
        value = self._values.get(key)
        return (value.version if value else None) != self._read[key]

    def _put(self, key: str, data: bytes | None) -> None:
        if data is None:
            self._values.pop(key, None)
        else:
            self._values[key] = _Value(bytes(data), next(self._versions), time.time_ns())

    def discard(self, staged: list[Staged]) -> None:
        """Nothing was stored: nothing to remove (another store's values are refused all the same)."""
        own_staged(staged, Staged, self.root)

    def set(self, key: str, data: bytes) -> None:
        self.publish([self.stage(key, data)])

    def delete(self, key: str) -> None:
        self.publish([self.stage(key, None)])

    # listing and metadata

    def list_dir(self, prefix: str) -> list[str]:
        self._fault("list_dir", prefix)
        with self._lock:
            keys = list(self._values)
        names = {key[len(prefix) + 1 if prefix else 0:].split("/", 1)[0] for key in keys if _below(key, prefix)}
        return sorted(n for n in names if not n.startswith(TEMP_PREFIX))

    def files(self, prefix: str, directories: bool = False):
        self._fault("files", prefix)
        with self._lock:
            found = sorted((key[len(prefix) + 1 if prefix else 0:], value)
                           for key, value in self._values.items() if _below(key, prefix))
        found = [(relative, value) for relative, value in found
                 if not any(part.startswith(TEMP_PREFIX) for part in relative.split("/"))]
        if not found:
            return
        if directories:
            folders = {"/"} | {"/".join(r.split("/")[:i]) + "/" for r, _ in found for i in range(1, r.count("/") + 1)}
            for folder in sorted(folders):
                yield folder, self._directory_stat()
        for relative, value in found:
            yield relative, self._file_stat(value)

    def stat(self, key: str) -> os.stat_result | None:
        self._fault("stat", key)
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                return self._file_stat(value)
            if not key or any(_below(k, key) for k in self._values):
                return self._directory_stat()
        return None

    def _file_stat(self, value: _Value) -> os.stat_result:
        return _stat_result(stat_module.S_IFREG | 0o644, len(value.data), value.mtime_ns, value.version)

    def _directory_stat(self) -> os.stat_result:
        return _stat_result(stat_module.S_IFDIR | 0o755, 0, self._started_ns, 0)

    def statvfs(self) -> os.statvfs_result:
        blocks = 1 << 30
        return os.statvfs_result((4096, 4096, blocks, blocks, blocks, 1 << 32, 1 << 32, 1 << 32, 0, 1024))

    def close(self) -> None:
        """Nothing held: the values stay, for a test to look at after the core stopped."""

    def remove_temporaries(self) -> int:
        """Remove every key below a temporary name (a staged or a half-deleted node); how many
        temporary names went."""
        with self._lock:
            roots = {_temporary_root(key) for key in self._values} - {None}
            for key in [k for k in self._values if _temporary_root(k) in roots]:
                del self._values[key]
        return len(roots)

    # whole nodes: each step is one change under the lock, so a node appears or goes whole

    def begin_node(self, path: str) -> str:
        self.check_writable(path)
        self._fault("begin_node", path)
        return "/".join(filter(None, [path.rpartition("/")[0], f"{TEMP_PREFIX}node-{next(self._temporaries)}"]))

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        self.check_writable(path)
        self._fault("commit_node", path)
        with self._lock:
            if self._occupied(path):
                raise StoreError(f"cannot create {path!r}: something is stored there already", errno.EEXIST)
            self._rename(staging, path)
            for name, data in documents.items():
                self._put(f"{path}/{name}" if path else name, data)

    def abort_node(self, staging: str) -> None:
        with self._lock:
            for key in [k for k in self._values if _below(k, staging)]:
                del self._values[key]

    def delete_node(self, path: str) -> None:
        self.check_writable(path)
        if not path:
            raise StoreError("the root cannot be deleted", errno.EPERM)
        self._fault("delete_node", path)
        with self._lock:
            doomed = [k for k in self._values if _below(k, path)]
            if not doomed:
                raise StoreError(f"cannot delete {path!r}: no such node", errno.ENOENT)
            for key in doomed:
                del self._values[key]

    def move_node(self, src: str, dst: str) -> None:
        self.check_writable(dst)
        self._fault("move_node", src)
        with self._lock:
            if not any(_below(k, src) for k in self._values):
                raise StoreError(f"cannot move {src!r}: no such node", errno.ENOENT)
            if self._occupied(dst):
                raise StoreError(f"cannot move {src!r} to {dst!r}: something is stored there already", errno.EEXIST)
            self._rename(src, dst)

    def _occupied(self, path: str) -> bool:
        return path in self._values or any(_below(k, path) for k in self._values)

    def _rename(self, src: str, dst: str) -> None:
        for key in [k for k in self._values if _below(k, src)]:
            self._values[dst + key[len(src):]] = self._values.pop(key)

    def check_writable(self, key: str) -> None:
        if self.read_only:
            raise StoreError(f"cannot write {key!r}: the store is read-only", errno.EROFS)


def _slice(data: bytes, byte_range: ByteRange) -> bytes:
    """As pread answers: short at the end, empty past it."""
    if byte_range is None:
        return data
    if isinstance(byte_range, Suffix):
        return data[max(0, len(data) - byte_range.length):] if byte_range.length else b""
    return data[byte_range.start:byte_range.start + byte_range.length]


def _below(key: str, prefix: str) -> bool:
    return not prefix or key.startswith(prefix + "/")


def _temporary_root(key: str) -> str | None:
    parts = key.split("/")
    for i, part in enumerate(parts):
        if part.startswith(TEMP_PREFIX):
            return "/".join(parts[:i + 1])
    return None


def _stat_result(mode: int, size: int, mtime_ns: int, ino: int) -> os.stat_result:
    seconds = mtime_ns // 1_000_000_000
    return os.stat_result((mode, ino, 0, 1, os.getuid(), os.getgid(), size, seconds, seconds, seconds),
                          {"st_mtime_ns": mtime_ns, "st_ctime_ns": mtime_ns, "st_atime_ns": mtime_ns})
