"""Whole nodes of a local store: create, delete and move a node's directory in one atomic step.

A node of a local store is a directory (its documents and its chunks beneath it), so each
change of the hierarchy's shape is one rename in the directory that holds it:

    create   the node is built in a temporary directory beside its name, then renamed onto
             the name with RENAME_NOREPLACE: it appears whole or not at all
    delete   the directory is renamed to a temporary name (it vanishes at once), then removed
    move     one RENAME_NOREPLACE, from directory to directory within the store

Temporary directories are named like temporary files (TEMP_PREFIX), so listings skip them and
remove_temporaries removes what an interrupted process left behind. Every descriptor is opened
beneath the store's root, and no symlink is followed while removing.
"""

import ctypes
import errno
import itertools
import logging
import os
import shutil
from collections.abc import Callable

from zarrfs.errors import StoreError
from zarrfs.stores.contained import Beneath, key_parts

log = logging.getLogger(__name__)

TEMP_PREFIX = ".zarrfs-tmp-"  # temporary files and directories: never listed, removed at mount
RENAME_NOREPLACE = 1
_counter = itertools.count()
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def split(key: str) -> tuple[str, str]:
    parent, _, name = key.rpartition("/")
    return parent, name


def temporary_name(prefix: str, kind: str) -> str:
    return f"{prefix}{kind}-{os.getpid()}-{next(_counter)}"


def rename_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    """rename(2) that fails with EEXIST when `dst` exists, whatever it is (an empty directory too)."""
    if _renameat2 is not None:  # names as bytes, as os.rename would pass them (names.py)
        if _renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL) or code == errno.EINVAL and _exists(dst_dir, dst):
            raise OSError(code, os.strerror(code), dst)
    if _exists(dst_dir, dst):  # no renameat2 here: check, then rename (a race another process could win)
        raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
    os.rename(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir)


def _exists(directory: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def make_directory(beneath: Beneath, key: str) -> None:
    """The empty directory `key`, with its parents."""
    parent, name = split(key)
    fd = beneath.open_directory(parent, create=True)
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
    finally:
        os.close(fd)


def move(beneath: Beneath, src: str, dst: str) -> None:
    """Rename directory (or file) `src` to `dst`, both store keys; EEXIST if `dst` exists. Both
    parents are synced, so the move survives a power cut."""
    (src_parent, src_name), (dst_parent, dst_name) = split(src), split(dst)
    key_parts(src), key_parts(dst)
    if not src_name or not dst_name:
        raise OSError(errno.EINVAL, "the root cannot move")
    src_fd = beneath.open_directory(src_parent)
    try:
        dst_fd = src_fd if dst_parent == src_parent else beneath.open_directory(dst_parent)
        try:
            rename_noreplace(src_fd, src_name, dst_fd, dst_name)
            os.fsync(dst_fd)
            if dst_fd != src_fd:
                os.fsync(src_fd)
        finally:
            if dst_fd != src_fd:
                os.close(dst_fd)
    finally:
        os.close(src_fd)


def remove_tree(parent: int, name: str) -> None:
    """Remove `name` in directory `parent` (a descriptor) and everything below it. shutil's
    descriptor-based walk follows no symlink: a symlink is removed, never what it points to."""
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except (IsADirectoryError, PermissionError):  # a directory (EISDIR on Linux, EPERM elsewhere)
        shutil.rmtree(name, dir_fd=parent)


class LocalNodes:
    """The node interface of a local store, which LocalStore delegates to. Every store
    implements these five; `set_many` is the atomic replacement of documents."""

    def __init__(self, beneath: Beneath, set_many: Callable[[dict[str, bytes | None]], None],
                 check_writable: Callable[[str], None]):
        self.beneath = beneath  # every descriptor opened beneath the store's root
        self.set_many = set_many  # LocalStore.set_many: documents written atomically, synced
        self.check_writable = check_writable  # StoreError(EROFS) on a read-only store

    def begin_node(self, path: str) -> str:
        """The store path under which a new node meant for `path` is written (chunks through
        stage/publish) before it exists: nothing below it is listed, or seen at `path`, until
        commit_node. Local: a temporary directory beside `path`; an interrupted creation leaves
        only that, and remove_temporaries removes it at the next mount."""
        self.check_writable(path)
        staging = "/".join(filter(None, [split(path)[0], temporary_name(TEMP_PREFIX, "node")]))
        try:
            make_directory(self.beneath, staging)
        except OSError as e:
            raise StoreError.from_os("cannot create", path, e) from None
        return staging

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        """Write the node's documents (name -> bytes) under `staging`, then make the node appear
        at `path` whole, in one step. StoreError(EEXIST) when anything exists at `path` (a node,
        a key, a leftover prefix); the staged node is then the caller's to abort_node.
        Local: the documents (each atomic and synced), then rename(RENAME_NOREPLACE) of the
        directory onto `path`: atomic."""
        self.set_many({f"{staging}/{name}": data for name, data in documents.items()})
        try:
            move(self.beneath, staging, path)
        except OSError as e:
            raise StoreError.from_os("cannot create", path, e) from None

    def abort_node(self, staging: str) -> None:
        """Remove a staged node that will not be committed, and everything below it."""
        self._remove(staging)

    def delete_node(self, path: str) -> None:
        """Delete the node at `path` with every key below it (a group's children too: callers
        check that a group is empty). The node vanishes in one step, before its chunks go; a
        deletion cut short is finished by remove_temporaries at the next mount. Local: the
        directory is renamed to a temporary beside it (atomic), then removed."""
        self.check_writable(path)
        if not path:
            raise StoreError("the root cannot be deleted", errno.EPERM)
        doomed = "/".join(filter(None, [split(path)[0], temporary_name(TEMP_PREFIX, "deleted")]))
        try:
            move(self.beneath, path, doomed)
        except OSError as e:
            raise StoreError.from_os("cannot delete", path, e) from None
        self._remove(doomed)

    def move_node(self, src: str, dst: str) -> None:
        """Move the node at `src`, with every key below it, to `dst` (in another group too).
        StoreError(EEXIST) when anything exists at `dst`, ENOENT when `src` does not.
        Local: one rename(RENAME_NOREPLACE) of the directory: atomic."""
        self.check_writable(dst)
        try:
            move(self.beneath, src, dst)
        except OSError as e:
            raise StoreError.from_os(f"cannot move {src!r} to", dst, e) from None

    def _remove(self, key: str) -> None:
        parent, name = split(key)
        try:
            fd = self.beneath.open_directory(parent)
        except OSError:
            return
        try:
            remove_tree(fd, name)
        except OSError as e:  # left for remove_temporaries at the next mount
            log.warning("cannot remove %r: %s", key, e.strerror)
        finally:
            os.close(fd)

