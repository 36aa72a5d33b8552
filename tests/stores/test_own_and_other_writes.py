"""A mount that writes to an object store tells its own write-backs from another writer's
changes: its own flush keeps its cached chunks and the kernel's pages, another writer's change
drops them, also those of a shard that the mount holds unflushed writes to. In process (the
adapter's Operations without FUSE) against SeaweedFS, metadata_ttl=0 so that every look at the
stored values is a LIST."""

import os

import numpy as np
import pytest
import zarr

from servers.seaweed import unique_prefix
from zarrfs.engine.array import Array
from zarrfs.fs.filesystem import Options
from zarrfs.fuse.operations import Operations
from zarrfs.stores.source_url import RemoteOptions


@pytest.fixture
def remote_ops(seaweed, tmp_path, monkeypatch):
    """make(prefix) -> Operations on SeaweedFS below `prefix`, with the admin's credentials."""
    for name, value in seaweed.env().items():
        monkeypatch.setenv(name, value)

    def make(prefix):
        remote = RemoteOptions(endpoint=seaweed.endpoint, metadata_ttl=0)
        return Operations(seaweed.url(prefix), Options(remote=remote, recovery_dir=str(tmp_path / "recovery")))
    return make


@pytest.fixture
def drops(monkeypatch):
    """Every time an open array forgets what it cached of the stored values."""
    dropped = []
    forget = Array.forget_stored

    def counted(array):
        dropped.append(array)
        forget(array)
    monkeypatch.setattr(Array, "forget_stored", counted)
    return dropped


def u2(ops, fh, element: int, count: int = 1) -> list[int]:
    return np.frombuffer(ops.read("/a.bin", 2 * count, 2 * element, fh), "<u2").tolist()


def test_the_mounts_own_flushes_are_not_taken_for_another_writers(seaweed, remote_ops, drops):
    prefix = unique_prefix("own")
    z = zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array("a", shape=(32,), chunks=(8,), dtype="<u2",
                                                                          fill_value=0)
    z[...] = 1
    ops = remote_ops(prefix)
    fh = ops.open("/a.bin", os.O_RDWR)
    try:
        for n in range(3):
            ops.write("/a.bin", np.array([n + 5], "<u2").tobytes(), 2 * (8 * n + 3), fh)
            ops.fsync("/a.bin", 0, fh)
            ops.getattr("/a.bin")  # looks at the stored values (notice_stored_change)
        assert drops == []  # its own flushes: nothing cached dropped, no kernel page either
        listings = []
        files = ops.core.store.files
        ops.core.store.files = lambda *args, **kwargs: listings.append(args) or files(*args, **kwargs)
        ops.core.arrays.flush_all()  # the background write-back, with nothing to store
        del ops.core.store.files
        assert listings == []
        z[20] = 9  # another writer
        ops.getattr("/a.bin")
        assert len(drops) == 1
        assert u2(ops, fh, 20, 2) == [9, 1]
    finally:
        ops.release("/a.bin", fh)


def test_a_shard_held_by_unflushed_writes_serves_another_writers_inner_chunks(seaweed, remote_ops):
    prefix = unique_prefix("held-shard")
    z = zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array("a", shape=(16,), chunks=(4,),
                                                                          shards=(16,), dtype="<u2", fill_value=0)
    z[...] = 1
    ops = remote_ops(prefix)
    fh = ops.open("/a.bin", os.O_RDWR)
    try:
        for _ in range(3):  # inner chunk 3, decoded and kept by the mount
            assert u2(ops, fh, 13) == [1]
        ops.write("/a.bin", np.array([5], "<u2").tobytes(), 0, fh)  # inner chunk 0 written, not flushed
        z[12:16] = 9  # another writer rewrites the shard, inner chunk 3 changed
        ops.getattr("/a.bin")  # the change is noticed
        assert u2(ops, fh, 13) == [9]
        ops.fsync("/a.bin", 0, fh)  # merged with the other writer's shard
        assert u2(ops, fh, 12, 4) == [9, 9, 9, 9]
        assert u2(ops, fh, 0, 2) == [5, 1]
    finally:
        ops.release("/a.bin", fh)
    assert np.asarray(z[...]).tolist() == [5] + [1] * 11 + [9] * 4
