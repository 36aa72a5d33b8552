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
import os
import shutil

from .beneath import Beneath, key_parts

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
    if _renameat2 is not None:
        if _renameat2(src_dir, src.encode(), dst_dir, dst.encode(), RENAME_NOREPLACE) == 0:
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
