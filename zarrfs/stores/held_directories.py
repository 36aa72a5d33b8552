"""Scratch directories of this machine that a living process holds, so that the ones a killed
process left can be told from them and removed.

A directory is held by an exclusive flock(2) on a descriptor of it, open for as long as its
process uses it: the kernel lets the lock go when the process ends, however it ends (kill -9
too), and a process id reused later holds nothing. A directory is removed only when it is
provably left: named with the prefix, this user's, not a symlink, and its lock free.

Only on a disk file system of this machine (local_disk.py) does a free lock prove that: on
NFS, SMB or a FUSE file system, processes of another machine may use the directory, and this
kernel's lock need not bind them; there none is removed, in one line.

Where flock(2) is refused for another reason than another holder (NFS emulates it with
byte-range locks, and an exclusive one needs a descriptor open for writing, which a directory's
never is), a directory is made and used unheld, in one line, and none there is ever removed:
none can be proved left.
"""

import fcntl
import logging
import os
import shutil
import tempfile

from zarrfs.stores.local_disk import on_local_disk

log = logging.getLogger(__name__)

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def make_held(parent: str | None, prefix: str) -> tuple[str, int]:
    """A new directory in `parent` (the system's temporary directory for None) named
    `prefix`..., and the descriptor that holds it: close it when the directory is removed."""
    while True:
        path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        try:  # not held yet: another process's remove_left may take it first, and remove it
            fd = os.open(path, _DIRECTORY)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return path, fd
        except (BlockingIOError, FileNotFoundError):  # another process's remove_left took it first
            pass
        except OSError as e:  # no lock here: no remove_left takes it either
            log.warning("%s cannot be locked (%s): it is not held, and if this process is killed it is left "
                        "for you to remove", path, e.strerror)
            return path, fd
        os.close(fd)


def remove_left(parent: str | None, prefix: str) -> int:
    """Remove the directories named `prefix`... in `parent` that this user's killed processes
    left (no process holds them); how many."""
    parent = parent or tempfile.gettempdir()
    try:
        with os.scandir(parent) as listing:
            entries = [e for e in listing if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return 0
    except OSError as e:
        log.warning("cannot look for directories left in %s: %s", parent, e.strerror)
        return 0
    if entries and not on_local_disk(parent):
        log.warning("directories %s* in %s are not removed: on a file system other machines may share, a free "
                    "lock does not prove one left (remove those a crash left by hand)", prefix, parent)
        return 0
    removed, unlockable = 0, None
    for entry in entries:
        try:
            removed += _remove_if_left(entry.path)
        except OSError as e:  # flock refused: not provably left
            unlockable = unlockable or e.strerror
    if unlockable:
        log.warning("directories %s* in %s cannot be locked (%s): none is removed, as none can be told left",
                    prefix, parent, unlockable)
    return removed


def _remove_if_left(path: str) -> bool:
    """Remove directory `path` if no process holds it; OSError if its lock cannot be asked for."""
    try:
        fd = os.open(path, _DIRECTORY)
    except OSError:  # gone meanwhile, or replaced by a symlink
        return False
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a living process's
            return False
        shutil.rmtree(path, ignore_errors=True)  # held while removed: make_held then takes another
        return not os.path.lexists(path)
    finally:
        os.close(fd)
