"""A growing array of a hierarchy with consolidated metadata shows the shape its own document
stores, whether or not the root's consolidated copy has followed yet (engine/consolidated_copy.py
follows at full write-backs, and may fail): the copy lags behind, the mount must not."""

import errno
import json
import os

import numpy as np
import pytest
import zarr

from core import core_of
from servers.memory_store import MemoryStore
from zarrfs.errors import StoreError

RECORD = 12  # bytes: a record of 3 int32
NPY_HEADER = 128  # bytes before NAME.npy's data


def records(first: int, count: int) -> np.ndarray:
    return np.arange(first * 3, (first + count) * 3, dtype="<i4").reshape(count, 3)


def consolidated(tmp_path) -> MemoryStore:
    """A group with array `a` of 3 records (chunks of 2) and consolidated metadata, made by
    zarr-python on disk and copied into a memory store (which can fail a write)."""
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    group.create_array("a", shape=(3, 3), chunks=(2, 3), dtype="<i4", fill_value=-1)[...] = records(0, 3)
    zarr.consolidate_metadata(str(root))
    store = MemoryStore()
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            store.other_writer(os.path.relpath(path, root), open(path, "rb").read())
    return store


def shown_shape(c) -> tuple[int, int, list]:
    """NAME.bin's and NAME.npy's sizes as `ls -l` lists them, and the sidecar's shape."""
    sizes = {name: c.stat(f"/{name}")["st_size"] for name in c.listdir("/")}
    return sizes["a.bin"], sizes["a.npy"], json.loads(c.read_bytes("/a.json"))["shape"]


FIVE = (5 * RECORD, NPY_HEADER + 5 * RECORD, [5, 3])


def copied(store: MemoryStore) -> list:
    return json.loads(store.get("zarr.json"))["consolidated_metadata"]["metadata"]["a"]["shape"]


def test_an_early_write_back_shows_the_new_shape_before_the_copy_follows(tmp_path):
    store = consolidated(tmp_path)
    with core_of(tmp_path / "g.zarr", tmp_path, "grow=all", store=store) as c:
        fh = c.open("/a.bin", os.O_WRONLY | os.O_APPEND)
        c.pwrite(fh, records(3, 2).tobytes(), 3 * RECORD)
        c.fs.arrays.flush_all(whole_only=True)  # the flusher's early write-back, a long append going on
        assert copied(store) == [3, 3]  # the copy waits for a full write-back
        assert shown_shape(c) == FIVE
        c.close(fh)
        assert copied(store) == [5, 3]
        assert shown_shape(c) == FIVE
        assert "stale" not in c.log()  # the mount's own lag is no stale copy to warn of


def test_a_copy_that_cannot_be_written_leaves_the_mount_showing_the_stored_shape(tmp_path):
    store = consolidated(tmp_path)
    with core_of(tmp_path / "g.zarr", tmp_path, "grow=all", store=store) as c:
        fh = c.open("/a.bin", os.O_WRONLY | os.O_APPEND)
        c.pwrite(fh, records(3, 2).tobytes(), 3 * RECORD)
        store.fail("publish", "zarr.json", error=StoreError("no space left", errno.ENOSPC))
        with pytest.raises(OSError):
            c.fsync(fh)
        assert json.loads(store.get("a/zarr.json"))["shape"] == [5, 3] and copied(store) == [3, 3]
        assert shown_shape(c) == FIVE
        c.close(fh)
        assert copied(store) == [5, 3]


class CountingRootReads(MemoryStore):
    """Counts the reads of the root's zarr.json, the document holding the copy."""

    root_reads = 0

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        self.root_reads += key == "zarr.json"
        return super().get_versioned(key, byte_range, expect, limit)


def test_the_root_is_read_again_when_the_copy_follows_not_at_each_early_write_back(tmp_path):
    """The root document (megabytes, for many arrays) is read and parsed again once the copy
    has followed, so the mount's own reading of the copy holds the new shape, and not at the
    early write-backs that leave the copy as it was."""
    store, source = CountingRootReads(), consolidated(tmp_path)
    for key, _ in source.files(""):
        store.other_writer(key, source.get(key))
    with core_of(tmp_path / "g.zarr", tmp_path, "grow=all", store=store) as c:
        fh = c.open("/a.bin", os.O_WRONLY | os.O_APPEND)
        before = store.root_reads
        for first in range(3, 13, 2):
            c.pwrite(fh, records(first, 2).tobytes(), first * RECORD)
            c.fs.arrays.flush_all(whole_only=True)
        assert store.root_reads == before  # five early write-backs: the copy, and the root, as they were
        c.close(fh)
        assert copied(store) == [13, 3]
        entry = json.loads(c.fs.hierarchy.consolidated.entries["a"].documents["zarr.json"])
        assert entry["shape"] == [13, 3]  # the mount's reading of the copy followed it
