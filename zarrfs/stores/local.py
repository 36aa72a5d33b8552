"""Key-value storage of a Zarr hierarchy: byte-range reads and atomic replacement of values.

Metadata documents are written conditionally among zarrfs processes (capabilities
.conditional_documents): a read remembers, for the thread that read, the content of a document
it read whole (a hash of its bytes: inode numbers are reused and mtimes are coarse, while a
document is small), and that thread's publish of that document, under the lock of its directory (directory_locks.py), reads the
bytes there now and renames the new value over them only if they are the ones read, else
ConflictError. `exclusive(key)` holds that lock across a read and the writes built on it (a
growth's chunks and new shape). Chunks are written unconditionally, as before.
"""

import errno
import hashlib
import itertools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

from zarrfs.byte_ranges import ByteRange, Range, Suffix
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import ConflictError, StoreError, ValueChangedError
from zarrfs.nodes.documents import DOCUMENT_NAMES
from zarrfs.stores import bounded_get, contract, directory_locks
from zarrfs.stores import local_nodes as localtree
from zarrfs.stores.contained import Beneath, key_parts
from zarrfs.stores.contract import Capabilities, own_staged
from zarrfs.stores.deferred_release import releases, worth_holding
from zarrfs.stores.local_nodes import TEMP_PREFIX, LocalNodes

log = logging.getLogger(__name__)

_temporaries = itertools.count()  # unique names without mkstemp's random tries
HELD_AT_ONCE = 32  # references to replaced values a publish holds before handing them over
VERSIONS = 1 << 12  # documents whose content read is remembered for a conditional write
LOCK_DEADLINE = 30.0  # seconds a write waits for another process's lock of a document's directory


class Staged(NamedTuple):
    """A value written beside the current one, waiting for publish(): `temporary` is the name of
    the file in the key's directory, None for a deletion."""

    key: str
    temporary: str | None


class LocalStore:
    """A Zarr store in a local directory. Keys are '/'-separated paths below `root`, and nothing
    outside `root` is ever listed, read, written or created (see contained.py); with
    `follow_symlinks` (a trusted store that shares chunks), symlinks out of it are read through,
    and nothing outside is ever written."""

    def __init__(self, root: str, read_only: bool = False, follow_symlinks: bool = False,
                 lock_deadline: float = LOCK_DEADLINE):
        self.root = os.path.abspath(root)
        self.read_only = read_only
        self.lock_deadline = lock_deadline  # as a remote store's request timeout (-o timeout)
        # (reading thread, document key) -> the hash of its bytes as that thread last read them
        # whole (None: absent), which that thread's next publish of it is conditional on: the
        # process's threads share the directory's lock, and one thread's read must not vouch for
        # another's write (an attribute edit built on the bytes a growth's new shape replaced)
        self._versions: OrderedDict[tuple[int, str], bytes | None] = OrderedDict()
        self._versions_lock = threading.Lock()
        try:
            self.beneath = Beneath(self.root, follow_symlinks)
        except OSError as e:
            raise StoreError(f"{self.root}: {e.strerror}", e.errno) from None
        self.hold_replaced = worth_holding(self.root)  # deferred_release.py
        # a local directory: no round trips, no other machine writes; its values are files; other
        # zarrfs processes of this machine are held off a document read for a write (see above)
        self.capabilities = Capabilities(file_values=True, hold_open=self.hold_replaced, conditional_documents=True)
        self.nodes = LocalNodes(self.beneath, self.set_many, self.check_writable)  # whole nodes: local_nodes.py

    # whole nodes (see local_nodes.py for how each is one rename)

    def begin_node(self, path: str) -> str:
        return self.nodes.begin_node(path)

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        self.nodes.commit_node(staging, path, documents)

    def abort_node(self, staging: str) -> None:
        self.nodes.abort_node(staging)

    def delete_node(self, path: str) -> None:
        self.nodes.delete_node(path)

    def move_node(self, src: str, dst: str) -> None:
        self.nodes.move_node(src, dst)

    def path(self, key: str) -> str:
        """The key's path, for messages and tests only: every access goes through `beneath`."""
        return os.path.join(self.root, *key_parts(key))

    def get(self, key: str, byte_range: ByteRange = None, limit: int | None = None) -> bytes | None:
        """The value's bytes (or the requested range of them), None if there is no such key.

        A range that reaches past the end is answered short, as POSIX pread does.
        """
        return self.get_versioned(key, byte_range, limit=limit)[0]

    def get_versioned(self, key: str, byte_range: ByteRange = None, expect: object = None,
                      limit: int | None = None) -> tuple[bytes | None, object]:
        """As get(), with the version read (the file's inode, size and mtime: values are replaced
        by renaming, so an open descriptor reads one version whole); see the Store contract. A
        document read whole is remembered by its content: its next publish is conditional on it
        (as an object store's PUT is on the ETag it last read whole)."""
        data, version = self._read(key, byte_range, expect, limit)
        if byte_range is None and _is_document(key):
            with self._versions_lock:
                mine = (threading.get_ident(), key)
                self._versions[mine] = None if data is None else _digest(data)
                self._versions.move_to_end(mine)
                if len(self._versions) > VERSIONS:
                    self._versions.popitem(last=False)
        return data, version

    def _read(self, key: str, byte_range: ByteRange, expect: object,
              limit: int | None) -> tuple[bytes | None, object]:
        fd = self.open_value(key)
        if fd is None:
            if expect is not None:
                raise ValueChangedError(f"{key!r} is gone since it was read")
            return None, None
        try:
            version = self._checked_version(fd, key, expect)
            if byte_range is None:
                _check_limit(key, version[1], limit)
                return _read_all(fd), version
            if isinstance(byte_range, Suffix):
                start = max(0, version[1] - byte_range.length)
                return os.pread(fd, version[1] - start, start), version
            return os.pread(fd, byte_range.length, byte_range.start), version
        except OSError as e:
            raise StoreError.from_os("cannot read", key, e) from None
        finally:
            os.close(fd)

    @staticmethod
    def _checked_version(fd: int, key: str, expect: object) -> tuple[int, int, int]:
        st = os.fstat(fd)
        version = (st.st_ino, st.st_size, st.st_mtime_ns)
        if expect is not None and version != expect:
            raise ValueChangedError(f"{key!r} was replaced since it was read")
        return version

    def open_value(self, key: str) -> int | None:
        """A descriptor for reading the value `key`, opened beneath the root as get() opens it
        (the caller closes it); None if there is no such key. Values are replaced by renaming,
        never changed in place, so it reads the value as it was when opened
        (engine/stored_as_is.py)."""
        try:
            return self.beneath.open_regular(key)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise StoreError.from_os("cannot open", key, e) from None

    def get_ranges(self, key: str, ranges: list[Range], expect: object = None) -> list[bytes] | None:
        """Several ranges of one value, one open; None if there is no such key. (The engine asks
        only stores with batched_reads: a local pread costs microseconds.)"""
        fd = self.open_value(key)
        if fd is None:
            if expect is not None:
                raise ValueChangedError(f"{key!r} is gone since it was read")
            return None
        try:
            self._checked_version(fd, key, expect)
            return [os.pread(fd, r.length, r.start) for r in ranges]
        except OSError as e:
            raise StoreError.from_os("cannot read", key, e) from None
        finally:
            os.close(fd)

    def get_many(self, keys: list[str], limit: int | None = None) -> dict[str, bytes | None]:
        return {key: self.get(key, limit=limit) for key in keys}

    def version_known(self, key: str) -> bool:
        """Whether a write of `key` by this thread is conditional on a version read: a document
        it read whole since its last write; never a chunk (written unconditionally: always True)."""
        if not _is_document(key):
            return True
        with self._versions_lock:
            return (threading.get_ident(), key) in self._versions

    @contextmanager
    def exclusive(self, key: str) -> Iterator[None]:
        """Hold the lock of the directory holding `key` (see directory_locks.py): other zarrfs
        processes publish no document there meanwhile, nor hold it themselves."""
        parent = _split(key)[0]
        try:
            fd = self.beneath.open_directory(parent)
        except OSError as e:
            raise StoreError.from_os("cannot lock the directory of", key, e) from None
        try:
            with directory_locks.locked(fd, self.path(parent), self.lock_deadline):
                yield
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

    def stage(self, key: str, data: BytesLike | None) -> "Staged":
        """Write a new value (None: a deletion) to a durable temporary file beside the old one.
        Readers still see the old value until publish(); stage() may run on several threads."""
        self.check_writable(key)
        key_parts(key)
        if data is None:
            return Staged(key, None)
        try:
            return Staged(key, self._write_temporary(key, data))
        except OSError as e:
            raise StoreError.from_os("cannot write", key, e) from None

    def publish(self, staged: Sequence[contract.Staged]) -> None:
        """Make staged values current and durable: each is renamed over the old value (atomic),
        then each directory that changed is synced. Only what was written is synced, never the
        whole file system. On failure the temporaries not yet renamed are removed. The values
        replaced are freed afterwards, off this path (deferred_release.py)."""
        own = own_staged(staged, Staged, self.root)
        pending = [(s.key, s.temporary) for s in own if s.temporary is not None]
        key = ""
        directories: dict[str, int] = {}
        replaced: list[int] = []
        try:
            while pending:
                key, temporary = pending[-1]
                parent, name = _split(key)
                fd = directories.get(parent) or directories.setdefault(parent, self.beneath.open_directory(parent))
                self._hold(name, fd, replaced)
                if _is_document(key):
                    self._replace_document(key, temporary, fd)
                else:
                    os.rename(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
                pending.pop()
            for key, written in own:
                if written is None:  # a deletion
                    self._unlink(key, directories, replaced)
            for fd in directories.values():
                os.fsync(fd)
        except StoreError as e:  # a document changed since it was read, or its lock not had in time
            self.discard([Staged(k, t) for k, t in pending])
            left = {k for k, _ in pending}
            stored = [s.key for s in own if s.temporary is not None and s.key not in left]
            if isinstance(e, ConflictError):
                raise ConflictError(str(e), e.errno, e.keys, stored) from None
            raise StoreError(str(e), e.errno, stored) from None
        except OSError as e:
            self.discard([Staged(k, t) for k, t in pending])
            raise StoreError.from_os("cannot write", key, e) from None
        finally:
            releases.release(replaced)
            for fd in directories.values():
                os.close(fd)

    def _replace_document(self, key: str, temporary: str, directory: int) -> None:
        """Rename a document's new value over it under its directory's lock, conditionally: if
        this thread read it whole since its last write, only when the bytes there are still the
        ones it read."""
        with self._versions_lock:
            expected = self._versions.pop((threading.get_ident(), key), ...)  # one write per read
        name = _split(key)[1]
        with directory_locks.replacing(directory, self.path(_split(key)[0]), self.lock_deadline):
            if expected is not ... and self._digest_now(key) != expected:
                raise ConflictError(f"{self.path(key)}: changed by another writer since it was read",
                                    errno.EAGAIN, [key])
            os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)

    def _digest_now(self, key: str) -> bytes | None:
        """The hash of the document `key` as stored now, opened as a read opens it; None when
        there is none. One larger than any document read (DOCUMENT_LIMIT) is hashed as far as
        that: it differs all the same."""
        fd = self.open_value(key)
        if fd is None:
            return None
        try:
            digest, left = hashlib.sha256(), bounded_get.DOCUMENT_LIMIT + 1
            while left and (part := os.read(fd, min(left, 1 << 20))):
                digest.update(part)
                left -= len(part)
            return digest.digest()
        finally:
            os.close(fd)

    def _hold(self, name: str, directory: int, replaced: list[int]) -> None:
        """Take a reference to the value about to be replaced; a publish keeps at most
        HELD_AT_ONCE of them itself (a batch may replace thousands of values, each a
        descriptor), handing them to the release thread as it goes."""
        held = releases.hold(name, directory) if self.hold_replaced else None
        if held is not None:
            replaced.append(held)
        if len(replaced) >= HELD_AT_ONCE:
            releases.release(replaced)
            replaced.clear()

    def _unlink(self, key: str, directories: dict[str, int], replaced: list[int]) -> None:
        with self._versions_lock:  # its own delete: the next write of it is no other writer's conflict
            self._versions.pop((threading.get_ident(), key), None)
        parent, name = _split(key)
        if parent not in directories:
            try:
                directories[parent] = self.beneath.open_directory(parent)
            except (FileNotFoundError, NotADirectoryError):
                return  # nothing there to delete
        self._hold(name, directories[parent], replaced)
        try:
            os.unlink(name, dir_fd=directories[parent])
        except FileNotFoundError:
            pass

    def discard(self, staged: Sequence[contract.Staged]) -> None:
        """Remove staged values that will not be published."""
        for key, temporary in own_staged(staged, Staged, self.root):
            if temporary is None:
                continue
            try:
                fd = self.beneath.open_directory(_split(key)[0])
            except OSError:
                continue
            try:
                os.unlink(temporary, dir_fd=fd)
            except OSError:
                pass
            finally:
                os.close(fd)

    def _write_temporary(self, key: str, data: BytesLike) -> str:
        """The name of a new, durable temporary file beside `key` holding `data`."""
        directory = self.beneath.open_directory(_split(key)[0], create=True)
        try:
            fd, name = _create_temporary(directory)
            try:
                _write_all(fd, memoryview(data).cast("B"))
                os.fdatasync(fd)  # here, on the encoder threads, so that syncs overlap
            except OSError:
                os.close(fd)
                _unlink_quietly(name, directory)
                raise
            os.close(fd)
            return name
        finally:
            os.close(directory)

    def list_dir(self, prefix: str) -> list[str]:
        """Names directly below `prefix`, without temporary files; [] when it is not a directory."""
        try:
            fd = self.beneath.open(prefix, os.O_RDONLY | os.O_DIRECTORY, reading=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            raise StoreError.from_os("cannot list", prefix or "/", e) from None
        try:
            names = os.listdir(fd)
        except OSError as e:
            raise StoreError.from_os("cannot list", prefix or "/", e) from None
        finally:
            os.close(fd)
        return sorted(n for n in names if not n.startswith(TEMP_PREFIX))

    def files(self, prefix: str, directories: bool = False) -> Iterator[tuple[str, os.stat_result]]:
        """(key relative to `prefix`, lstat) of every file below `prefix`, found by listing and
        stat alone: no value is opened. Symlinks are not followed, temporaries are left out.
        With `directories`, each directory listed too, its key ending in "/" ("/" for `prefix`)."""
        try:
            stack = [("", self.beneath.open(prefix, os.O_RDONLY | os.O_DIRECTORY, reading=True))]
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as e:
            raise StoreError.from_os("cannot list", prefix or "/", e) from None
        try:
            while stack:
                relative, fd = stack.pop()
                try:
                    if directories:
                        yield relative or "/", os.fstat(fd)
                    with os.scandir(fd) as entries:
                        for entry in entries:
                            if entry.name.startswith(TEMP_PREFIX):
                                continue
                            if entry.is_dir(follow_symlinks=False):
                                child = _open_subdirectory(entry.name, fd)
                                if child is not None:
                                    stack.append((relative + entry.name + "/", child))
                            else:
                                yield relative + entry.name, entry.stat(follow_symlinks=False)
                except OSError as e:
                    log.warning("cannot list %r: %s", prefix + "/" + relative, e.strerror)
                finally:
                    os.close(fd)
        finally:  # a caller that stops early (a bounded listing) leaves no directory open
            for _, fd in stack:
                os.close(fd)

    def stat(self, key: str) -> os.stat_result | None:
        """The key's stat, None if there is no such key; StoreError for one that cannot be
        looked at (a symlink out of the store, a loop, no permission)."""
        try:
            return self.beneath.stat(key)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise StoreError.from_os("cannot look at", key, e) from None

    def close(self) -> None:
        """The descriptor of the root let go (as when the store is let go): nothing is read or
        written after it."""
        self.beneath.close()

    def statvfs(self) -> os.statvfs_result:
        return os.fstatvfs(self.beneath.root_fd)

    def remove_temporaries(self) -> int:
        """Delete temporary files a crashed writer left behind, and the staged and deleted nodes
        (begin_node, delete_node) of an interrupted creation or deletion; returns how many. The walk is
        iterative (a store may be thousands of groups deep) and follows no symlink."""
        removed = 0
        stack = [os.dup(self.beneath.root_fd)]
        while stack:
            fd = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.name.startswith(TEMP_PREFIX) and entry.is_file(follow_symlinks=False):
                            removed += _unlink_quietly(entry.name, fd)
                        elif entry.name.startswith(TEMP_PREFIX) and entry.is_dir(follow_symlinks=False):
                            localtree.remove_tree(fd, entry.name)  # a staged or a deleted node
                            removed += 1
                        elif entry.is_dir(follow_symlinks=False):
                            child = _open_subdirectory(entry.name, fd)
                            if child is not None:
                                stack.append(child)
            except OSError as e:
                log.warning("cannot look for leftover temporaries: %s", e.strerror)
            finally:
                os.close(fd)
        return removed

    def check_writable(self, key: str) -> None:
        if self.read_only:
            raise StoreError(f"cannot write {key!r}: the store is read-only", errno.EROFS)


def _is_document(key: str) -> bool:
    return _split(key)[1] in DOCUMENT_NAMES


def _digest(data: BytesLike) -> bytes:
    return hashlib.sha256(data).digest()


def _split(key: str) -> tuple[str, str]:
    """(parent key, name) of a value's key."""
    parent, _, name = key.rpartition("/")
    return parent, name


def _open_subdirectory(name: str, parent: int) -> int | None:
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return None


def _create_temporary(directory: int) -> tuple[int, str]:
    """A new file in `directory` (a descriptor) for a value being written, named so that
    remove_temporaries finds it."""
    while True:
        name = f"{TEMP_PREFIX}{os.getpid()}-{next(_temporaries)}"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(name, flags, 0o666, dir_fd=directory), name
        except FileExistsError:  # left by an earlier process with our pid
            continue


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


def _check_limit(key: str, size: int, limit: int | None) -> None:
    """A whole value larger than its caller can use is refused before it is read (Store contract)."""
    if limit is not None and size > limit:
        raise StoreError(f"cannot read {key!r}: it has {size} bytes, more than the {limit} expected", errno.EIO)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    if len(data) < size:  # a short read from a slow file system: keep going
        parts = [data]
        while chunk := os.pread(fd, 1 << 20, sum(map(len, parts))):
            parts.append(chunk)
        data = b"".join(parts)
    return data


def _unlink_quietly(name: str, directory: int) -> int:
    """Remove `name` from `directory` (a descriptor); 1 if it was removed."""
    try:
        os.unlink(name, dir_fd=directory)
        return 1
    except OSError:
        return 0
