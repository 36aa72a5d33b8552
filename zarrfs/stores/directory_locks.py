"""Locks of a local store's directories, among zarrfs processes: what makes a write of a
metadata document conditional on a local disk (stores/local.py).

A lock is an exclusive flock(2) on the directory itself, opened O_RDONLY|O_DIRECTORY: nothing
is created in the user's store, and the kernel lets it go when the process dies. It holds
other processes off, not other threads of this one: the process's threads share one hold
(one descriptor, counted), as they already take turns by the engine's own locks (an array's
flush lock, the consolidated copy's lock) and each thread's write of a document is conditional
on what that thread read (local.py), and a thread that holds a directory may take it
again (a write-back holds the array's directory across its document read and its writes, and
the store's publish of the document takes it again). So no thread of a process waits here for
what another of its threads does while holding the directory, whatever order it took its other
locks in: only, for at most the deadline, for the one taking the flock from another process,
or for `replacing()`, the short lock of one document's compare and rename among the threads
(a thread holding it waits on nothing of its process). Every wait is bounded:
past `deadline` seconds, StoreError (ETIMEDOUT) naming the directory and the process that held
it (any process that can open the directory can take its flock: another user's `flock DIR sleep`
fails this mount's document writes until it lets go). A program that takes no such lock
(zarr-python) is not held off by it.
"""

import errno
import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from zarrfs.errors import StoreError

POLL = 0.005  # seconds between tries of a lock another process holds (flock has no timeout)
NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL}  # a file system that takes no flock
log = logging.getLogger(__name__)
_said: set[str] = set()  # directories whose missing flock was logged


class _Held:
    """This process's hold of one directory's lock: the locked descriptor and how many holds
    of its threads use it."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()  # the count and the descriptor; held while the flock is waited for
        self.replacing = threading.Lock()  # one document's compare and rename at a time
        self.fd: int | None = None
        self.count = 0
        self.users = 0  # threads holding or waiting for it (under _held_lock): it goes with the last


_held: dict[tuple[int, int], _Held] = {}  # (st_dev, st_ino) of a directory held or waited for -> its hold
_held_lock = threading.Lock()


@contextmanager
def _hold_of(directory: int) -> Iterator[_Held]:
    """The process's one hold of `directory` while the caller uses it; dropped from _held when
    no thread does (a mount writes in ever new directories), never while one does (a second
    hold would take a second flock, which the first holds off)."""
    st = os.fstat(directory)
    key = (st.st_dev, st.st_ino)
    with _held_lock:
        held = _held.setdefault(key, _Held())
        held.users += 1
    try:
        yield held
    finally:
        with _held_lock:
            held.users -= 1
            if not held.users:
                del _held[key]


@contextmanager
def locked(directory: int, name: str, deadline: float) -> Iterator[None]:
    """Hold the lock of `directory` (a descriptor of it, which the caller keeps open meanwhile;
    `name` says which, for the message) against other zarrfs processes."""
    with _hold_of(directory) as held:
        until = time.monotonic() + deadline
        if not held.mutex.acquire(timeout=deadline):
            raise _timed_out(name, deadline)
        try:
            if held.count == 0:
                held.fd = _flock(directory, name, until, deadline)
            held.count += 1
        finally:
            held.mutex.release()
        try:
            yield
        finally:
            with held.mutex:
                held.count -= 1
                if held.count == 0 and held.fd is not None:
                    os.close(held.fd)  # the flock goes with its last descriptor
                    held.fd = None


@contextmanager
def replacing(directory: int, name: str, deadline: float) -> Iterator[None]:
    """The lock of `directory` held, and this thread alone of its process replacing a document
    there: a conditional write's compare and rename are one step."""
    with locked(directory, name, deadline), _hold_of(directory) as held:
        if not held.replacing.acquire(timeout=deadline):
            raise _timed_out(name, deadline)
        try:
            yield
        finally:
            held.replacing.release()


def _flock(directory: int, name: str, until: float, deadline: float) -> int:
    """A new descriptor of `directory` holding its flock, waited for until `until`."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=directory)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= until:
                    raise _timed_out(name, deadline, _holders(fd)) from None
                time.sleep(POLL)
            except OSError as e:
                if e.errno not in NO_FLOCK:
                    raise
                _say_unlocked(name, e)  # a file system without flock: the writes go on unlocked
                return fd
    except BaseException:
        os.close(fd)
        raise


def _say_unlocked(name: str, error: OSError) -> None:
    """One log line per directory whose file system takes no flock."""
    if name not in _said:
        _said.add(name)
        log.warning("%s: its file system takes no lock (%s): other zarrfs processes' writes of its documents "
                    "are not held off", name, error.strerror)


def _holders(fd: int) -> list[int]:
    """The processes holding the flock of the directory open as `fd`, as /proc/locks lists them
    (`ID: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF`, waiters marked `->`); [] where it cannot
    be read."""
    st = os.fstat(fd)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as listed:
            rows = [line.split() for line in listed]
    except OSError:
        return []
    return [int(row[4]) for row in rows if len(row) > 5 and row[1] == "FLOCK" and row[5] == where]


def _timed_out(name: str, deadline: float, holders: list[int] | None = None) -> StoreError:
    who = f"process {', '.join(map(str, holders))}" if holders else "another process"
    return StoreError(f"{name}: {who} held the lock of its documents for {deadline:g} s; nothing was written",
                      errno.ETIMEDOUT)
