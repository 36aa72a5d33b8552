"""Key-value storage of a Zarr hierarchy: byte-range reads and atomic replacement of values."""

import ctypes
import errno
import fcntl
import itertools
import logging
import mmap
import os
import queue
from contextlib import contextmanager
from typing import NamedTuple

from .errors import StoreError

log = logging.getLogger(__name__)

TEMP_PREFIX = ".zarrfs-tmp-"
DIRECT_MIN = 256 << 10  # values this large are written around the page cache (see _write_direct)
DIRECT_ALIGN = 4096  # O_DIRECT offsets and lengths: a multiple of any common logical block size
BOUNCE_SIZE = 1 << 20
_temporaries = itertools.count()  # unique names without mkstemp's random tries


class Range(NamedTuple):
    """`length` bytes from `start`."""

    start: int
    length: int


class Suffix(NamedTuple):
    """The last `length` bytes."""

    length: int


ByteRange = Range | Suffix | None


class Staged(NamedTuple):
    """A value written beside the current one, waiting for publish(); temporary is None for a deletion."""

    key: str
    temporary: str | None


class LocalStore:
    """A Zarr store in a local directory. Keys are '/'-separated paths below `root`."""

    def __init__(self, root: str, read_only: bool = False):
        self.root = os.path.abspath(root)
        self.read_only = read_only
        self.direct = hasattr(os, "O_DIRECT")  # cleared when the file system refuses O_DIRECT

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
        """Replace (bytes) or delete (None) several values: stage each, then publish them all."""
        staged: list[Staged] = []
        try:
            for key, data in updates.items():
                staged.append(self.stage(key, data))
        except StoreError:
            self.discard(staged)
            raise
        self.publish(staged)

    def stage(self, key: str, data) -> "Staged":
        """Write a new value (None: a deletion) to a temporary file beside the old one. Readers
        still see the old value until publish(); stage() may run on several threads at once."""
        self._check_writable(key)
        if data is None:
            return Staged(key, None)
        try:
            return Staged(key, self._write_temporary(key, data))
        except OSError as e:
            raise StoreError(f"cannot write {key!r}: {e.strerror}", e.errno) from e

    def publish(self, staged: list["Staged"]) -> None:
        """Make staged values current and durable. Each is atomic: made durable, then renamed over
        the old value. One file-system sync for the data and one for the renames, not an fsync
        per value. On failure the temporaries not yet renamed are removed."""
        pending = [s for s in staged if s.temporary is not None]
        key = ""
        try:
            self._sync([s.temporary for s in pending])
            while pending:
                key, temporary = pending[-1]
                os.rename(temporary, self.path(key))
                pending.pop()
            for key, temporary in staged:
                if temporary is None:
                    _unlink_missing_ok(self.path(key))
            self._sync({os.path.dirname(self.path(s.key)) for s in staged})
        except OSError as e:
            self.discard(pending)
            raise StoreError(f"cannot write {key!r}: {e.strerror}", e.errno) from e

    def discard(self, staged: list["Staged"]) -> None:
        """Remove staged values that will not be published."""
        for s in staged:
            if s.temporary is not None:
                _unlink_quietly(s.temporary)

    def _write_temporary(self, key: str, data) -> str:
        directory = os.path.dirname(self.path(key))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = _create_temporary(directory)
        try:
            view = memoryview(data).cast("B")
            done = self._write_direct(fd, view) if self.direct and len(view) >= DIRECT_MIN else 0
            _write_all(fd, view[done:])
        except OSError:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        os.close(fd)
        return tmp

    def _write_direct(self, fd: int, view: memoryview) -> int:
        """Write the aligned bulk of a new value with O_DIRECT; returns the bytes written.

        The decoded bytes live in the mount's own page cache, so a cached encoded copy would be
        a second one, and filling fresh page-cache pages is the largest cost of a write-back.
        The tail (under DIRECT_ALIGN bytes) and anything the file system refuses go buffered."""
        aligned = len(view) - len(view) % DIRECT_ALIGN
        try:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
        except OSError:
            self.direct = False
            return 0
        done = 0
        try:
            with _bounce_buffer() as buffer:
                while done < aligned:
                    n = min(len(buffer), aligned - done)
                    buffer[:n] = view[done:done + n]
                    written = os.write(fd, buffer[:n])
                    done += written
                    if written < n:  # short (a full disk, say): the rest goes buffered, or fails
                        break
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            self.direct = False  # alignment refused: this store writes buffered from now on
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_DIRECT)
        return done

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


def _create_temporary(directory: str) -> tuple[int, str]:
    """A new file for a value being written, named so that remove_temporaries finds it."""
    while True:
        tmp = os.path.join(directory, f"{TEMP_PREFIX}{os.getpid()}-{next(_temporaries)}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:  # left by an earlier process with our pid
            continue


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


_bounce_buffers: queue.SimpleQueue = queue.SimpleQueue()


@contextmanager
def _bounce_buffer():
    """A page-aligned buffer for O_DIRECT writes, reused so that its pages stay touched: on
    some virtual machines the first touch of memory costs more than the write itself."""
    try:
        buffer = _bounce_buffers.get_nowait()
    except queue.Empty:
        buffer = mmap.mmap(-1, BOUNCE_SIZE)
    try:
        with memoryview(buffer) as view:
            yield view
    finally:
        _bounce_buffers.put(buffer)


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
