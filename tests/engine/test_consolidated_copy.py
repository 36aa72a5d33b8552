"""engine/consolidated_copy.py: a growth's new shape reaches the root's consolidated copy after
the array's own document, conditionally on a store with conditional writes, and a copy that
cannot be written fails the flush with one message and is written by the next one."""

import json
import os
import threading

import numpy as np
import pytest
import zarr

from servers.memory_store import MemoryStore
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.consolidated_copy import ConsolidatedCopy
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import StoreError
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.contract import Capabilities
from zarrfs.stores.local import LocalStore

ROW = 4  # int16 elements a record: 8 bytes


def rows(first: int, count: int) -> np.ndarray:
    return np.arange(first * ROW, (first + count) * ROW, dtype="<i2").reshape(count, ROW)


def memory_hierarchy(tmp_path, store: MemoryStore, zarr_format: int = 3) -> None:
    """A group with array `frames` of 3 records (chunks of 2) and consolidated metadata, made by
    zarr-python on disk and copied into `store`."""
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
    group.create_array("frames", shape=(3, ROW), chunks=(2, ROW), dtype="<i2", fill_value=-1)[...] = rows(0, 3)
    zarr.consolidate_metadata(str(root))
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            store.other_writer(os.path.relpath(path, root), open(path, "rb").read())


def frames(store: MemoryStore, zarr_format: int = 3) -> RawFile:
    meta = read_metadata(store, "frames")
    copy = ConsolidatedCopy(store, zarr_format)
    return RawFile(open_array(store, "frames", meta, ChunkCache(1 << 20), copy), writable=True)


def copied_shape(store: MemoryStore) -> list[int]:
    return json.loads(store.get("zarr.json"))["consolidated_metadata"]["metadata"]["frames"]["shape"]


def own_shape(store: MemoryStore) -> list[int]:
    return json.loads(store.get("frames/zarr.json"))["shape"]


class RootRewrittenMeanwhile(MemoryStore):
    """Another writer rewrites the root's zarr.json (an attribute added) once, just after this
    store's first read of frames' own document: between the copy's read and its write."""

    def __init__(self):
        super().__init__(Capabilities(remote=True, conditional_writes=True))
        self.armed = False

    def get(self, key, byte_range=None, limit=None):
        data = super().get(key, byte_range, limit)
        if self.armed and key == "frames/zarr.json":
            self.armed = False
            root = json.loads(super().get("zarr.json"))
            root["attributes"]["written"] = "elsewhere"
            self.other_writer("zarr.json", json.dumps(root).encode())
        return data


def test_the_copy_is_rewritten_again_when_another_writer_rewrote_it_meanwhile(tmp_path):
    store = RootRewrittenMeanwhile()
    memory_hierarchy(tmp_path, store)
    raw = frames(store)
    raw.write(raw.size, rows(3, 2).tobytes(), grow=True)
    store.armed = True
    raw.flush()
    assert not store.armed  # the other writer came between the copy's read and its write
    root = json.loads(store.get("zarr.json"))
    assert root["attributes"]["written"] == "elsewhere"  # kept: the copy was read again, not overwritten
    assert copied_shape(store) == own_shape(store) == [5, ROW]


def test_a_copy_that_cannot_be_written_fails_the_flush_and_the_next_one_writes_it(tmp_path):
    store = MemoryStore()
    memory_hierarchy(tmp_path, store)
    raw = frames(store)
    raw.write(raw.size, rows(3, 2).tobytes(), grow=True)
    store.fail("publish", "zarr.json", error=StoreError("no space left", 28))
    with pytest.raises(StoreError) as info:
        raw.flush()
    assert str(info.value) == "zarr.json: the consolidated metadata keeps the old shape of frames: no space left"
    # the records and the document are stored; the copy shows the old shape, within them
    assert (own_shape(store), copied_shape(store)) == ([5, ROW], [3, ROW])
    raw.flush()
    assert copied_shape(store) == [5, ROW]
    group = zarr.open_consolidated(zarr.storage.MemoryStore({k: zarr.core.buffer.cpu.Buffer.from_bytes(store.get(k))
                                                              for k in ("zarr.json", "frames/zarr.json", "frames/c/0/0",
                                                                        "frames/c/1/0", "frames/c/2/0")}))
    assert np.array_equal(group["frames"][...], rows(0, 5))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_shrink_changes_the_copy_before_the_chunks_past_the_end_go(tmp_path, zarr_format):
    """Shrinking: the document, then the copy, then the chunks; the delete of a chunk failing
    leaves both shapes shrunk (a reader of either sees no chunk past them missing)."""
    store = MemoryStore()
    memory_hierarchy(tmp_path, store, zarr_format)
    raw = frames(store, zarr_format)
    chunk = "frames/1.0" if zarr_format == 2 else "frames/c/1/0"
    store.fail("publish", chunk, error=StoreError("connection reset", 104))
    raw.truncate(8)  # one record
    with pytest.raises(StoreError, match="connection reset"):
        raw.flush()
    if zarr_format == 3:
        assert own_shape(store) == copied_shape(store) == [1, ROW]
    else:
        copy = json.loads(store.get(".zmetadata"))["metadata"]["frames/.zarray"]["shape"]
        assert json.loads(store.get("frames/.zarray"))["shape"] == copy == [1, ROW]
    assert store.get(chunk) is not None
    raw.flush()
    assert store.get(chunk) is None


class PausedAfterRootRead(MemoryStore):
    """A store without conditional writes (as a local one) whose first read of frames' own
    document waits for `go`: one rewrite of the copy is held between its read and its write."""

    def __init__(self):
        super().__init__()
        self.held, self.go = threading.Event(), threading.Event()

    def get(self, key, byte_range=None, limit=None):
        if key == "frames/zarr.json" and not self.held.is_set() and threading.current_thread().name == "first":
            self.held.set()
            self.go.wait(30)
        return super().get(key, byte_range, limit)


def test_two_arrays_of_one_hierarchy_rewrite_the_copy_in_turn(tmp_path):
    """Two arrays growing in one process (a mount, two open_raw views) each rewrite the one
    document holding the copy: on a store whose writes are no condition, they take turns, so
    neither puts back the other's entry with its old shape."""
    store = PausedAfterRootRead()
    memory_hierarchy(tmp_path, store)
    group = json.loads(store.get("zarr.json"))
    group["consolidated_metadata"]["metadata"]["other"] = {**group["consolidated_metadata"]["metadata"]["frames"]}
    store.other_writer("zarr.json", json.dumps(group).encode())
    for key in [k for k, _ in store.files("frames")]:
        store.other_writer(f"other/{key}", store.get(f"frames/{key}"))
    first, second = frames(store), RawFile(open_array(store, "other", read_metadata(store, "other"), ChunkCache(1 << 20),
                                                      ConsolidatedCopy(store, 3)), writable=True)
    for raw in (first, second):
        raw.write(raw.size, rows(3, 2).tobytes(), grow=True)
    one = threading.Thread(target=first.flush, name="first")
    one.start()
    assert store.held.wait(30)
    two = threading.Thread(target=second.flush)
    two.start()
    two.join(1.0)  # with no turns taken, the second rewrite is done by now; with them, it waits
    store.go.set()
    one.join(30)
    two.join(30)
    entries = json.loads(store.get("zarr.json"))["consolidated_metadata"]["metadata"]
    assert entries["frames"]["shape"] == entries["other"]["shape"] == [5, ROW]


class ZarrPythonConsolidatesMeanwhile(LocalStore):
    """A local store (writes are no condition) where zarr-python, once, adds an array `labels`
    to the group and consolidates its metadata just as this store stages the root's zarr.json:
    between the copy's read and its write."""

    armed = False

    def stage(self, key, data):
        if self.armed and key == "zarr.json":
            self.armed = False
            group = zarr.open_group(self.root, mode="r+")
            group.create_array("labels", shape=(2,), chunks=(2,), dtype="<i4")
            zarr.consolidate_metadata(self.root)
        return super().stage(key, data)


def test_a_local_copy_keeps_what_zarr_python_consolidated_while_it_was_rewritten(tmp_path):
    """On a local store the copy is compared before it is renamed over: zarr-python's
    consolidate_metadata that came between its read and its write is kept, not overwritten."""
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    group.create_array("frames", shape=(3, ROW), chunks=(2, ROW), dtype="<i2", fill_value=-1)[...] = rows(0, 3)
    zarr.consolidate_metadata(str(root))
    store = ZarrPythonConsolidatesMeanwhile(str(root))
    raw = frames(store)
    raw.write(raw.size, rows(3, 2).tobytes(), grow=True)
    store.armed = True
    raw.flush()
    assert not store.armed  # zarr-python wrote between the copy's read and its write
    reopened = zarr.open_consolidated(str(root), mode="r")
    assert sorted(reopened.array_keys()) == ["frames", "labels"]
    assert np.array_equal(reopened["frames"][...], rows(0, 5))
    assert not [name for name in os.listdir(root) if name not in ("zarr.json", "frames", "labels")]  # no temporary left


class CountingRootWrites(MemoryStore):
    """Counts the writes of the root's zarr.json, the document holding the copy."""

    root_writes = 0

    def publish(self, staged):
        self.root_writes += sum(s.key == "zarr.json" for s in staged)
        super().publish(staged)


def test_early_write_backs_of_a_long_append_leave_the_copy_to_the_next_full_one(tmp_path):
    """The copy is the whole root document (megabytes, for a hierarchy of many arrays): the
    early write-backs a long append starts every few MiB (whole_only) store its records and
    shape, and the copy follows once, at the next full write-back (fsync, close, the flusher's
    tick), not once per early one."""
    store = CountingRootWrites()
    memory_hierarchy(tmp_path, store)
    raw = frames(store)
    for first in range(3, 23, 4):  # five early write-backs, two chunks each
        raw.write(raw.size, rows(first, 4).tobytes(), grow=True)
        raw.flush(whole_only=True)
    assert own_shape(store) == [23, ROW] and copied_shape(store) == [3, ROW]  # within the stored chunks
    assert store.root_writes == 0
    raw.flush()
    assert store.root_writes == 1 and copied_shape(store) == [23, ROW]
