"""LocalStore: a staged value stays invisible until published, temporaries never collide, and large
values are written around the page cache wherever the file system allows it."""

import ctypes
import errno
import mmap
import os

import pytest

from zarrfs import store as store_module
from zarrfs.store import BOUNCE_SIZE, DIRECT_MIN, TEMP_PREFIX, LocalStore


def temporaries(root) -> list[str]:
    return sorted(name for _, _, names in os.walk(root) for name in names if name.startswith(TEMP_PREFIX))


def test_staged_values_appear_only_when_published(tmp_path):
    store = LocalStore(tmp_path)
    store.set("c/0", b"old")
    staged = [store.stage("c/0", b"new"), store.stage("c/1", b"one")]
    assert store.get("c/0") == b"old" and store.get("c/1") is None
    store.publish(staged)
    assert store.get("c/0") == b"new" and store.get("c/1") == b"one"
    assert temporaries(tmp_path) == []


def test_discarded_values_leave_nothing(tmp_path):
    store = LocalStore(tmp_path)
    store.set("c/0", b"old")
    store.discard([store.stage("c/0", b"new"), store.stage("c/1", None)])
    assert store.get("c/0") == b"old" and temporaries(tmp_path) == []


def test_a_leftover_temporary_with_the_next_name_is_stepped_over(tmp_path):
    store = LocalStore(tmp_path)
    store.set("c/0", b"old")
    upcoming = next(store_module._temporaries) + 1
    leftover = tmp_path / "c" / f"{TEMP_PREFIX}{os.getpid()}-{upcoming}"
    leftover.write_bytes(b"someone else's")
    store.set("c/0", b"new")
    assert store.get("c/0") == b"new"
    assert leftover.read_bytes() == b"someone else's"



def cached_pages(path) -> int:
    """How many of the file's pages are in the page cache (mincore of a mapping of it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    size = os.path.getsize(path)
    pages = (ctypes.c_ubyte * -(-size // mmap.PAGESIZE))()
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            assert libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), pages) == 0
        finally:
            libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
    finally:
        os.close(fd)
    return sum(p & 1 for p in pages)


@pytest.mark.parametrize("size", [DIRECT_MIN, DIRECT_MIN + 1, 3 * BOUNCE_SIZE + 5000])
def test_large_values_go_around_the_page_cache_and_read_back_exactly(tmp_path, size):
    store = LocalStore(tmp_path)
    value = os.urandom(size)
    store.set("c/0", value)
    assert cached_pages(tmp_path / "c" / "0") <= 1  # at most the unaligned tail went buffered
    assert store.get("c/0") == value and store.direct


def test_small_values_are_written_buffered(tmp_path):
    store = LocalStore(tmp_path)
    store.set("c/0", b"x" * (DIRECT_MIN - 1))
    assert cached_pages(tmp_path / "c" / "0") == -(-(DIRECT_MIN - 1) // 4096)


def test_a_file_system_that_refuses_o_direct_gets_buffered_writes(tmp_path, monkeypatch):
    real_fcntl = store_module.fcntl.fcntl

    def fcntl(fd, command, flags=0):
        if command == store_module.fcntl.F_SETFL and flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "no O_DIRECT here")
        return real_fcntl(fd, command, flags)

    monkeypatch.setattr(store_module.fcntl, "fcntl", fcntl)
    store = LocalStore(tmp_path)
    value = os.urandom(DIRECT_MIN + 100)
    store.set("c/0", value)
    assert store.get("c/0") == value and not store.direct


def test_an_alignment_refused_midway_finishes_buffered(tmp_path, monkeypatch):
    real_write, calls = os.write, []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 2 and store_module.fcntl.fcntl(fd, store_module.fcntl.F_GETFL) & os.O_DIRECT:
            raise OSError(errno.EINVAL, "misaligned")
        return real_write(fd, data)

    monkeypatch.setattr(store_module.os, "write", write)
    store = LocalStore(tmp_path)
    value = os.urandom(2 * BOUNCE_SIZE + 10)
    store.set("c/0", value)
    monkeypatch.undo()
    assert store.get("c/0") == value and not store.direct
    assert calls[:2] == [BOUNCE_SIZE, BOUNCE_SIZE]


def test_a_short_direct_write_is_finished_buffered(tmp_path, monkeypatch):
    real_write = os.write

    def write(fd, data):
        direct = store_module.fcntl.fcntl(fd, store_module.fcntl.F_GETFL) & os.O_DIRECT
        return real_write(fd, data[:len(data) // 2] if direct else data)  # short: the rest goes buffered

    monkeypatch.setattr(store_module.os, "write", write)
    store = LocalStore(tmp_path)
    value = os.urandom(BOUNCE_SIZE + 12345)
    store.set("c/0", value)
    monkeypatch.undo()
    assert store.get("c/0") == value and store.direct


def test_a_listing_stopped_early_leaves_no_directory_open(tmp_path):
    for group in "abcd":
        for name in "xyz":
            (tmp_path / group / name).mkdir(parents=True)
            (tmp_path / group / name / "v").write_bytes(b"1")
    store = LocalStore(str(tmp_path))
    before = len(os.listdir("/proc/self/fd"))
    listing = store.files("")
    next(listing)  # several directories are open now, waiting on the stack
    listing.close()
    assert len(os.listdir("/proc/self/fd")) == before
