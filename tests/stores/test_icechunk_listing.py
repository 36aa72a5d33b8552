"""What an Icechunk store asks of icechunk to stat and list (stores/icechunk_store.py): a stat
one call, a listing's sizes asked at once in bounded batches; and which of icechunk's errors are
ENOENT (stores/icechunk_repository.py)."""

import asyncio
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.needs_python312  # skipped on 3.11, saying so (tests/conftest.py)

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


class WatchedSessionStore:
    """icechunk's session store, every call counted by name; each getsize held until `held` are
    waiting at once (or a moment passes): how many were asked together."""

    def __init__(self, store, held: int = 1):
        self._store, self.calls, self.held = store, [], held
        self.waiting, self.most = 0, 0

    def __getattr__(self, name):
        value = getattr(self._store, name)
        if callable(value):
            def counted(*args, **kwargs):
                self.calls.append(name)
                return value(*args, **kwargs)
            return counted
        return value

    async def getsize(self, key):
        self.calls.append("getsize")
        self.waiting += 1
        self.most = max(self.most, self.waiting)
        try:
            for _ in range(100):  # until the batch is all here; bounded: one at a time ends too
                if self.waiting >= self.held:
                    break
                await asyncio.sleep(0.001)
            return await self._store.getsize(key)
        finally:
            self.waiting -= 1


def read_only_store(tmp_path, closed_after, chunks: int):
    """A snapshot of `a`, 1-D uint8 in `chunks` chunks of 1 element, as a read-only IcechunkStore
    (its repository closed at the test's end)."""
    from zarrfs.stores.icechunk_repository import open_repository

    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repo.writable_session("main")
    zarr.group(session.store).create_array("a", shape=(chunks,), chunks=(1,), dtype="<u1",
                                           fill_value=0, compressors=None)[...] = \
        np.arange(1, chunks + 1, dtype="<u1")
    session.commit("a")
    repository = closed_after(open_repository(str(tmp_path / "repo"), str(tmp_path / "repo"), 30.0))
    return repository.store(repository.version("@branch.main"))


def test_a_stat_asks_icechunk_once(tmp_path, closed_after):
    store = read_only_store(tmp_path, closed_after, 4)
    watched = store._store = WatchedSessionStore(store._store)
    assert store.stat("a/c/2").st_size == 1
    assert watched.calls == ["getsize"]  # its size is its existence: exists() and getsize() were two
    assert store.stat("a/c/9") is None  # icechunk's size of a chunk not written is 0: not a value


def test_a_listing_asks_the_sizes_at_once_in_bounded_batches(tmp_path, closed_after):
    from zarrfs.stores.icechunk_store import SIZES_AT_ONCE

    store = read_only_store(tmp_path, closed_after, 150)
    watched = store._store = WatchedSessionStore(store._store, held=SIZES_AT_ONCE)
    files = dict(store.files("a"))
    assert sorted(files) == sorted(["zarr.json"] + [f"c/{i}" for i in range(150)])
    assert all(files[f"c/{i}"].st_size == 1 for i in range(150))
    assert watched.most == SIZES_AT_ONCE  # not one at a time, and never more than a batch


@pytest.mark.parametrize("error, expected", [
    ("RefNotFoundError", "ENOENT"), ("SnapshotNotFoundError", "ENOENT"),
    ("StorageError", "EIO"), ("NodeNotFoundError", "EIO"), ("RepositoryNotFoundError", "EIO")])
def test_only_a_missing_branch_tag_or_snapshot_is_enoent(tmp_path, error, expected, closed_after):
    """The kernel may keep an ENOENT: an error of the storage whose message says "not found" or
    "does not exist" is EIO, one line."""
    import errno

    from zarrfs.errors import StoreError
    from zarrfs.stores.icechunk_repository import open_repository

    icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    repository = closed_after(open_repository(str(tmp_path / "repo"), str(tmp_path / "repo"), 30.0))

    async def failing():
        raise getattr(icechunk, error)("object chunks/X not found: the file does not exist\n\ncontext: ...")
    with pytest.raises(StoreError) as caught:
        repository._call(failing(), "@branch.main")
    assert caught.value.errno == getattr(errno, expected)
    assert str(caught.value).endswith("@branch.main: object chunks/X not found: the file does not exist")


def test_a_branch_tag_or_snapshot_not_there_is_no_version(tmp_path, closed_after):
    icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    from zarrfs.stores.icechunk_repository import open_repository

    repository = closed_after(open_repository(str(tmp_path / "repo"), str(tmp_path / "repo"), 30.0))
    assert repository.version("@branch.nosuch") is None and repository.version("@tag.nosuch") is None
    assert repository.version("@" + "Z" * 20) is None
