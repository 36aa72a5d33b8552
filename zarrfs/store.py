"""Key-value storage of a Zarr hierarchy: byte-range reads and atomic replacement of values."""

import ctypes
import errno
import logging
import os
import tempfile
from typing import NamedTuple

from .errors import StoreError

log = logging.getLogger(__name__)

TEMP_PREFIX = ".zarrfs-tmp-"


class Range(NamedTuple):
    """`length` bytes from `start`."""

    start: int
    length: int


class Suffix(NamedTuple):
    """The last `length` bytes."""

    length: int


ByteRange = Range | Suffix | None


class LocalStore:
    """A Zarr store in a local directory. Keys are '/'-separated paths below `root`."""

    def __init__(self, root: str, read_only: bool = False):
        self.root = os.path.abspath(root)
        self.read_only = read_only

    def path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/")) if key else self.root

    def get(self, key: str, byte_range: ByteRange = None) -> bytes | None:
        """The value's bytes (or the requested range of them), None if there is no such key.

        A range that reaches past the end is answered short, as POSIX pread does.
        """
        try:
            fd = os.open(self.path(key), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise StoreError(f"cannot open {key!r}: {e.strerror}", e.errno) from e
        try:
            if byte_range is None:
                return _read_all(fd)
            if isinstance(byte_range, Suffix):
                size = os.fstat(fd).st_size
                start = max(0, size - byte_range.length)
                return os.pread(fd, size - start, start)
            return os.pread(fd, byte_range.length, byte_range.start)
        except OSError as e:
            raise StoreError(f"cannot read {key!r}: {e.strerror}", e.errno) from e
        finally:
            os.close(fd)

    def set(self, key: str, data: bytes) -> None:
        self.set_many({key: data})

    def delete(self, key: str) -> None:
        self.set_many({key: None})

    def set_many(self, updates: dict[str, bytes | None]) -> None:
        """Replace (bytes) or delete (None) several values. Each is atomic: a temporary file beside
        it, made durable, then renamed over it. All are durable on return: one file-system sync
        for the data and one for the renames, not an fsync per value."""
        if self.read_only:
            raise StoreError(f"cannot write {next(iter(updates), '')!r}: the store is read-only", errno.EROFS)
        staged: list[tuple[str, str]] = []
        key = ""
        try:
            for key, data in updates.items():
                if data is not None:
                    staged.append((self._write_temporary(key, data), self.path(key)))
            self._sync([tmp for tmp, _ in staged])
            while staged:
                tmp, path = staged.pop()
                os.rename(tmp, path)
            for key, data in updates.items():
                if data is None:
                    _unlink_missing_ok(self.path(key))
            self._sync({os.path.dirname(self.path(k)) for k in updates})
        except OSError as e:
            for tmp, _ in staged:
                _unlink_quietly(tmp)
            raise StoreError(f"cannot write {key!r}: {e.strerror}", e.errno) from e

    def _write_temporary(self, key: str, data) -> str:
        directory = os.path.dirname(self.path(key))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=directory)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        os.close(fd)
        return tmp

    def _sync(self, paths) -> None:
        """Make `paths` (files or directories) durable: syncfs of the store's file system when
        the C library has it, else an fsync each."""
        if not paths:
            return
        if _syncfs is not None:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                if _syncfs(fd) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code))
            finally:
                os.close(fd)
            return
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def list_dir(self, prefix: str) -> list[str]:
        """Names directly below `prefix`, without temporary files."""
        try:
            names = os.listdir(self.path(prefix))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n for n in names if not n.startswith(TEMP_PREFIX))

    def stat(self, key: str) -> os.stat_result | None:
        try:
            return os.stat(self.path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def remove_temporaries(self) -> int:
        """Delete temporary files a crashed writer left behind; returns how many."""
        removed = 0
        for directory, _dirs, files in os.walk(self.root):
            for name in files:
                if name.startswith(TEMP_PREFIX):
                    _unlink_quietly(os.path.join(directory, name))
                    removed += 1
        return removed

    def _check_writable(self, key: str) -> None:
        if self.read_only:
            raise StoreError(f"cannot write {key!r}: the store is read-only", errno.EROFS)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    if len(data) < size:  # a short read from a slow file system: keep going
        parts = [data]
        while chunk := os.pread(fd, 1 << 20, sum(map(len, parts))):
            parts.append(chunk)
        data = b"".join(parts)
    return data


def _load_syncfs():
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


_syncfs = _load_syncfs()


def _unlink_missing_ok(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
