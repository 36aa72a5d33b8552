"""engine/growth.py and RawFile's appends, in process: records appended past the end, a partial
record held, truncate as zarr-python's resize, and the order in which a new shape is stored."""

import errno
import json
import random
import threading
from dataclasses import replace

import numpy as np
import pytest
import zarr

import zarrfs
from helpers import Worker, array_doc, open_raw_file, sharding
from mounting import wait_for
from servers.memory_store import MemoryStore
from zarrfs.engine import growth
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import MetadataError, OutOfBoundsError, StoreError, ZarrfsError
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.contract import Capabilities
from zarrfs.stores.local import TEMP_PREFIX, LocalStore

ROW = 4  # int16 elements a record: 8 bytes


def rows(first: int, count: int) -> np.ndarray:
    return np.arange(first * ROW, (first + count) * ROW, dtype="<i2").reshape(count, ROW)


def raw_file(tmp_path, count: int = 3, **options) -> RawFile:
    root = tmp_path / "s.zarr"
    zarr.create_array(str(root), shape=(count, ROW), chunks=(2, ROW), dtype="<i2", fill_value=-1,
                      **options)[...] = rows(0, count)
    store = LocalStore(str(root))
    return RawFile(open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20)), writable=True)


def stored_shape(tmp_path) -> list[int]:
    return json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())["shape"]


def test_records_are_appended_and_a_partial_one_is_held(tmp_path):
    raw = raw_file(tmp_path)
    new = rows(3, 2).tobytes()
    assert raw.write(24, new[:5], grow=True) == 5  # part of a record: held, not stored
    assert (raw.size, raw.file_size) == (24, 29) and raw.read(20, 100) == rows(2, 1).tobytes()[4:] + new[:5]
    assert raw.write(29, new[5:], grow=True) == len(new) - 5
    assert (raw.size, raw.pending) == (40, b"") and raw.read(0, 100) == rows(0, 5).tobytes()
    with pytest.raises(OutOfBoundsError, match="would leave a hole"):
        raw.write(41, b"x", grow=True)
    assert stored_shape(tmp_path) == [3, ROW]  # until the write-back
    raw.flush()
    assert stored_shape(tmp_path) == [5, ROW]
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], rows(0, 5))


def shards_past_the_shape(tmp_path) -> list[str]:
    """Keys of the shards (of 4 records) stored wholly past the stored shape."""
    end = stored_shape(tmp_path)[0]
    return sorted(str(p.relative_to(tmp_path / "s.zarr")) for p in (tmp_path / "s.zarr" / "c").iterdir()
                  if int(p.name) * 4 >= end)


@pytest.mark.parametrize("count, appended, early", [(3, 6, 9), (2, 1, 2)], ids=["edge-finished", "edge-filling"])
def test_an_early_write_back_stores_no_shard_past_the_shape_it_stores(tmp_path, count, appended, early):
    """An early write-back leaves out the shards still being filled; past the stored end it
    stores only what the shape stored with it shows (a second writer's rebase needs every
    record past that shape held in memory). The shard row holding the old end goes once every
    row of it past the end is written, merged with its stored records: appending rows 3-8 to 3
    rows in shards of 4, everything is stored with shape 9; appending row 2 to 2 rows, the
    shard holding the end is still being filled, and nothing is stored until the full flush."""
    raw = raw_file(tmp_path, count=count, shards=(4, ROW))
    raw.write(count * ROW * 2, rows(count, appended).tobytes(), grow=True)
    raw.flush(whole_only=True)
    assert stored_shape(tmp_path) == [early, ROW] and shards_past_the_shape(tmp_path) == []
    raw.flush()
    assert stored_shape(tmp_path) == [count + appended, ROW]
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], rows(0, count + appended))


@pytest.mark.parametrize("options", [{}, {"shards": (4, ROW)}])
def test_truncate_shrinks_as_resize_and_grows_with_the_fill_value(tmp_path, options):
    raw = raw_file(tmp_path, count=7, **options)
    raw.truncate(3 * ROW * 2)
    raw.flush()  # as the mount's truncate does
    assert stored_shape(tmp_path) == [3, ROW]
    raw.truncate(6 * ROW * 2)  # the old rows 3-5 must not come back
    raw.flush()
    grown = zarr.open_array(str(tmp_path / "s.zarr"))[...]
    assert np.array_equal(grown[:3], rows(0, 3)) and (grown[3:] == -1).all()
    assert raw.read(0, 1000) == grown.tobytes()


REMOTE = Capabilities(remote=True, conditional_writes=True, listing=True)


def memory_file(count: int, capabilities: Capabilities = REMOTE) -> tuple[MemoryStore, RawFile]:
    """Records 0..count-1 of int16s in chunks of 2 records, on a store in memory."""
    store = MemoryStore(capabilities)
    store.set("zarr.json", json.dumps(array_doc([count, ROW], "int16", [2, ROW], fill_value=-1)).encode())
    raw = open_raw_file(store)
    raw.write(0, rows(0, count).tobytes())
    raw.flush()
    return store, raw


@pytest.mark.parametrize("grow", [True, False], ids=["grow", "shrink"])
def test_a_commit_that_changes_the_shape_reads_the_document_once(grow):
    """The document read to check the stored shape is the one the new shape is written into:
    one GET and one (conditional) PUT a commit, not a second GET."""
    store, raw = memory_file(7)
    store.reads.clear()
    if grow:
        raw.write(7 * ROW * 2, rows(7, 2).tobytes(), grow=True)
        raw.flush()
    else:
        raw.truncate(3 * ROW * 2)
        raw.flush()
    assert [key for key, _ in store.reads if key == "zarr.json"] == ["zarr.json"]
    assert json.loads(store.get("zarr.json"))["shape"] == [9 if grow else 3, ROW]


def test_a_document_another_writer_replaced_meanwhile_is_read_again_not_overwritten():
    """The new shape's PUT is conditional on the version of the one read: another writer's
    change between them (an attribute) is a conflict, and the flush done again keeps it."""
    store, raw = memory_file(3)
    publish = store.publish

    def publish_then_another_writer(staged):
        publish(staged)
        if any(key.startswith("c/") for key, _ in staged) and "other" not in store.get("zarr.json").decode():
            store.other_writer("zarr.json", json.dumps(array_doc([3, ROW], "int16", [2, ROW], fill_value=-1,
                                                                 attributes={"other": 1})).encode())

    store.publish = publish_then_another_writer
    raw.write(3 * ROW * 2, rows(3, 2).tobytes(), grow=True)
    raw.flush()
    document = json.loads(store.get("zarr.json"))
    assert (document["shape"], document["attributes"]) == ([5, ROW], {"other": 1})
    assert np.frombuffer(open_raw_file(store, writable=False).read(0, 100), "<i2").tolist() == rows(0, 5).ravel().tolist()


@pytest.mark.parametrize("document", [b'{"shape": [3, ', b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"],
                         ids=["not-json", "nested-too-deeply"])
def test_a_document_that_is_no_json_object_stores_nothing_and_names_its_key(document):
    """The growth's document read back as any document is (its depth guard): one error naming
    the key, which the write-back logs in one line, and nothing of the batch stored."""
    store, raw = memory_file(3)
    store.other_writer("zarr.json", document)
    before = {key: store.get(key) for key, _ in store.files("")}
    raw.write(3 * ROW * 2, rows(3, 2).tobytes(), grow=True)
    with pytest.raises(MetadataError, match=r"^zarr\.json: not valid JSON .*: the new shape is not stored$"):
        raw.flush()
    assert {key: store.get(key) for key, _ in store.files("")} == before
    assert raw.array.dirty and raw.size == 5 * ROW * 2  # kept for the next flush


@pytest.mark.parametrize("listing", [True, False], ids=["listed", "not-listed"])
def test_a_shrink_deletes_the_chunks_stored_past_the_end_and_no_other(listing):
    """A shrink of a large, mostly empty array takes the chunks past the end from a listing: one
    DELETE each for those stored, none for the rest of the grid (every one where the store has
    no listing); and chunks written there and not stored yet are dropped, never stored."""
    store = MemoryStore(replace(REMOTE, listing=listing))
    store.set("zarr.json", json.dumps(array_doc([1000, ROW], "int16", [2, ROW], fill_value=-1)).encode())
    raw = open_raw_file(store)
    for row in (0, 1, 2, 997):
        raw.write(row * ROW * 2, rows(row, 1).tobytes())
    raw.flush()
    raw.write(600 * ROW * 2, rows(600, 1).tobytes())  # not stored yet
    deleted = []
    stage = store.stage
    store.stage = lambda key, data: (deleted.append(key) if data is None else None, stage(key, data))[1]
    raw.truncate(1 * ROW * 2)
    raw.flush()
    assert sorted(deleted) == (["c/1/0", "c/498/0"] if listing else sorted(f"c/{i}/0" for i in range(1, 500)))
    assert sorted(key for key, _ in store.files("")) == ["c/0/0", "zarr.json"]
    assert json.loads(store.get("zarr.json"))["shape"] == [1, ROW]
    raw.truncate(1000 * ROW * 2)  # nothing written comes back
    raw.flush()
    assert np.frombuffer(raw.read(0, 1000 * ROW * 2), "<i2").tolist() == [0, 1, 2, 3] + [-1] * 999 * ROW


@pytest.mark.parametrize("columns", [1, 20], ids=["chunks-asked", "rows-listed"])
def test_a_grow_by_truncate_asks_the_store_only_about_the_rows_it_adds(columns):
    """A truncate holds appenders off while it looks for chunks a crash left in the rows it
    adds: it asks only about those rows (each chunk of a few, or a listing of each row), never
    lists the whole array; and the leftover it finds is deleted."""
    width = 2 * columns
    store = MemoryStore(REMOTE)
    store.set("zarr.json", json.dumps(array_doc([1000, width], "int16", [2, 2], fill_value=-1)).encode())
    raw = open_raw_file(store)
    raw.write(0, np.arange(1000 * width, dtype="<i2").tobytes())
    raw.flush()
    store.set("c/501/0", store.get("c/0/0"))  # a crash's: stored past the end, without its shape
    asked, files, stat = [], store.files, store.stat

    def listing(prefix, *args, **kwargs):
        for relative, found in files(prefix, *args, **kwargs):
            asked.append(f"{prefix}/{relative}" if prefix else relative)
            yield relative, found

    store.files = listing
    store.stat = lambda key: (asked.append(key), stat(key))[1]
    raw.truncate(1003 * width * 2)
    assert asked and all(key.startswith(("c/500/", "c/501/")) for key in asked), sorted(asked)[:5]
    raw.flush()
    assert store.get("c/501/0") is None
    assert np.frombuffer(raw.read(1000 * width * 2, 3 * width * 2), "<i2").tolist() == [-1] * 3 * width


def test_the_size_of_a_file_being_written_is_answered_while_a_write_waits_for_the_store():
    """stat of an open NAME.bin (file_size) takes no lock: a write holds the array's lock while
    it reads an edge chunk from the store, and a stat must not wait for that GET."""
    store, raw = memory_file(3)
    raw.write(3 * ROW * 2, rows(3, 1).tobytes()[:5], grow=True)  # a partial record pending
    raw.array.forget_stored()  # the edge chunk is read from the store again
    in_get, release = threading.Event(), threading.Event()
    get_versioned = store.get_versioned

    def slow_get(key, *args, **kwargs):
        if key.startswith("c/"):
            in_get.set()
            assert release.wait(60)
        return get_versioned(key, *args, **kwargs)

    store.get_versioned = slow_get
    writer = Worker(raw.write, 0, np.array([9], "<i2").tobytes()).start()  # its chunk is read
    try:
        assert in_get.wait(60)
        sizes = []
        stat = threading.Thread(target=lambda: sizes.append(raw.file_size))
        stat.start()
        stat.join(60)  # bounded: with the lock taken, it would wait for the GET, released only below
        assert sizes == [3 * ROW * 2 + 5]
    finally:
        release.set()
        assert writer.wait(60)
        writer.join()  # what the write raised, if it did
    assert raw.read(0, 4) == np.array([9, 1], "<i2").tobytes()


class WatchedLock:
    """An array's lock that tells when a thread starts waiting for it while another holds it."""

    def __init__(self):
        self._lock, self._owner, self._depth = threading.RLock(), None, 0
        self.contended = threading.Event()

    def acquire(self, blocking=True, timeout=-1):
        if self._owner not in (None, threading.get_ident()):
            self.contended.set()
        if not self._lock.acquire(blocking, timeout):
            return False
        self._owner, self._depth = threading.get_ident(), self._depth + 1
        return True

    def release(self):
        self._depth -= 1
        if not self._depth:
            self._owner = None
        self._lock.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def test_an_append_racing_a_truncate_waits_for_it():
    """truncate takes the append lock: an append arriving while a grow by truncate asks the
    store about the rows it adds waits, then lands where the grown file has it. Without the lock it ran in between and
    the grow's fill of the edge chunk (rows 9 and 10 in one chunk) covered the record it wrote."""
    store, raw = memory_file(9)
    raw.array.shared.lock = lock = WatchedLock()
    appender = threading.Thread(target=raw.write, args=(9 * ROW * 2, rows(9, 1).tobytes()), kwargs={"grow": True})
    stat = store.stat

    def asked(key):  # the truncate asks whether a chunk a crash left is stored: the append comes now
        if not appender.is_alive() and appender.ident is None:
            appender.start()
            wait_for(lambda: not appender.is_alive() or lock.contended.is_set(), 60, "the append to end or wait")
        return stat(key)

    store.stat = asked
    raw.truncate(14 * ROW * 2)
    appender.join(60)
    assert not appender.is_alive() and raw.size == 14 * ROW * 2
    expected = np.concatenate([rows(0, 10), np.full((4, ROW), -1, "<i2")])
    assert np.frombuffer(raw.read(0, 1000), "<i2").reshape(-1, ROW).tolist() == expected.tolist()
    raw.flush()
    assert np.frombuffer(open_raw_file(store, writable=False).read(0, 1000), "<i2").tolist() == expected.ravel().tolist()


def test_an_append_whose_write_fails_leaves_the_shape_size_and_pending_bytes_as_they_were():
    """The records an append completes are written after dimension 0 grows; when that write
    fails (the edge chunk cannot be read), the shape goes back and the file is as before it."""
    store, raw = memory_file(3)
    raw.write(3 * ROW * 2, rows(3, 1).tobytes()[:5], grow=True)
    raw.array.forget_stored()  # the edge chunk (rows 2-3) is read from the store again
    store.fail("get", "c/1/0", error=StoreError("cannot read 'c/1/0': connection reset", errno.EIO))
    with pytest.raises(StoreError, match="c/1/0"):
        raw.write(3 * ROW * 2 + 5, rows(3, 2).tobytes()[5:], grow=True)
    assert (raw.array.shape, raw.size, raw.pending) == ((3, ROW), 3 * ROW * 2, rows(3, 1).tobytes()[:5])
    assert not raw.array.dirty and raw.array.write_back.shape == (3, ROW)
    raw.write(3 * ROW * 2 + 5, rows(3, 2).tobytes()[5:], grow=True)  # the same append, again
    raw.flush()
    assert np.frombuffer(open_raw_file(store, writable=False).read(0, 100), "<i2").tolist() == \
        rows(0, 5).ravel().tolist()


def test_what_cannot_grow(tmp_path):
    scalar = tmp_path / "scalar.zarr"
    zarr.create_array(str(scalar), shape=(), dtype="<i2", zarr_format=3)
    store = LocalStore(str(scalar))
    array = open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20))
    assert growth.why_fixed(array) == "a scalar array has no dimension to grow"
    wide = tmp_path / "wide.zarr"
    zarr.create_array(str(wide), shape=(1, growth.MAX_RECORD), chunks=(1, 1 << 20), dtype="u1")
    store = LocalStore(str(wide))
    array = open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20))
    assert growth.why_fixed(array) is None
    wider = tmp_path / "wider.zarr"
    zarr.create_array(str(wider), shape=(1, growth.MAX_RECORD + 1), chunks=(1, 1 << 20), dtype="u1")
    store = LocalStore(str(wider))
    array = open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20))
    assert "more than the 67108864 a partial one may hold" in growth.why_fixed(array)


def reopened(tmp_path) -> RawFile:
    """A second writer of the array raw_file made: another process's view of the same store."""
    store = LocalStore(str(tmp_path / "s.zarr"))
    return RawFile(open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20)), writable=True)


@pytest.mark.parametrize("theirs", [1, 2, 3], ids=["one", "a-chunk-row", "three"])
def test_a_second_appender_s_records_follow_the_first_one_s(tmp_path, theirs):
    """Two writers append to one stored array of 3 records (chunks of 2: the end is inside a
    chunk); the first stores its records between the second's writes and its flush. The
    second's write-back finds the shape changed, moves its records (and the edge chunk it had
    made for the old end) after the first one's, and stores them: nothing is overwritten."""
    first, second = raw_file(tmp_path), reopened(tmp_path)
    mine = (rows(100, 3) + 0).tobytes()  # distinct from the first writer's records
    assert second.write(3 * ROW * 2, mine[:10], grow=True) == 10
    first.write(3 * ROW * 2, rows(50, theirs).tobytes(), grow=True)
    first.flush()
    second.write(3 * ROW * 2 + 10, mine[10:], grow=True)
    second.flush()
    expected = np.concatenate([rows(0, 3), rows(50, theirs), rows(100, 3)])
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], expected)
    assert stored_shape(tmp_path) == [6 + theirs, ROW] and second.rebases == 1
    assert (second.size, second.pending) == ((6 + theirs) * ROW * 2, b"")
    assert second.read(0, 1000) == expected.tobytes()  # the second writer's own view follows
    assert not second.array.dirty and not list((tmp_path / "s.zarr").rglob(f"{TEMP_PREFIX}*"))  # none left staged


def test_an_append_after_a_rebase_goes_after_both_writers_records(tmp_path):
    """After its records moved, the second writer appends at the new end, and a partial record
    it held stays pending after its whole ones."""
    first, second = raw_file(tmp_path), reopened(tmp_path)
    second.write(3 * ROW * 2, rows(100, 1).tobytes() + rows(101, 1).tobytes()[:3], grow=True)
    first.write(3 * ROW * 2, rows(50, 2).tobytes(), grow=True)
    first.flush()
    second.flush()
    assert (second.size, second.pending) == (6 * ROW * 2, rows(101, 1).tobytes()[:3])
    second.write(6 * ROW * 2 + 3, rows(101, 1).tobytes()[3:], grow=True)
    second.flush()
    expected = np.concatenate([rows(0, 3), rows(50, 2), rows(100, 2)])
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], expected)


@pytest.mark.parametrize("case", ["shrunk", "sharded-shrunk", "sharded-record-shape"])
def test_records_are_not_moved_where_that_would_not_be_an_append(tmp_path, case):
    """When the other writer shrank the array, or stored another record shape, moving the
    records appended here would not be an append. The write-back stores nothing and fails as
    before, naming the document and why."""
    first = raw_file(tmp_path, count=4, **({"shards": (4, ROW)} if case.startswith("sharded") else {}))
    second = reopened(tmp_path)
    second.write(4 * ROW * 2, rows(100, 1).tobytes(), grow=True)
    if case.endswith("record-shape"):
        zarr.open_array(str(tmp_path / "s.zarr")).resize((4, ROW + 1))  # zarr-python, as another writer
        found = [4, ROW + 1]
    else:
        first.truncate(2 * ROW * 2)
        first.flush()
        found = [2, ROW]
    with pytest.raises(StoreError, match=rf"zarr.json: shape \[{found[0]}, {found[1]}\] where this mount stored "
                                         r"\[4, 4\].*kept, not stored \(the other writer did not append"):
        second.flush()
    assert stored_shape(tmp_path) == found and second.array.dirty and second.rebases == 0
    assert zarr.open_array(str(tmp_path / "s.zarr"))[...].shape == tuple(found)
    assert (zarr.open_array(str(tmp_path / "s.zarr"))[...] != 100 * ROW).all()  # none of the second's stored


def sharded_pair(tmp_path, count: int) -> tuple[RawFile, RawFile]:
    """Two writers of one array of `count` records in shards of 4 records, inner chunks of 2."""
    return raw_file(tmp_path, count=count, shards=(4, ROW)), reopened(tmp_path)


@pytest.mark.parametrize("count, theirs", [(3, 1), (3, 2), (3, 3), (4, 1), (4, 4), (5, 4)],
                         ids=["to-a-shard-end", "inside-an-inner-chunk", "to-an-inner-chunk-end",
                              "from-a-shard-end", "a-whole-shard", "past-a-shard-end"])
def test_a_second_appender_to_a_sharded_array_follows_the_first_one(tmp_path, count, theirs):
    """Two writers append to one sharded array (shards of 4 records, inner chunks of 2); the
    first stores its records between the second's writes and its flush. The second's 3
    records, which straddle inner chunk and shard boundaries, move after the first one's: the
    shard row holding the old end takes the first writer's inner chunks, the shard holding
    their end is merged with theirs, and nothing is overwritten."""
    first, second = sharded_pair(tmp_path, count)
    mine = rows(100, 3).tobytes()
    second.write(count * ROW * 2, mine[:10], grow=True)
    first.write(count * ROW * 2, rows(50, theirs).tobytes(), grow=True)
    first.flush()
    second.write(count * ROW * 2 + 10, mine[10:], grow=True)
    second.flush()
    expected = np.concatenate([rows(0, count), rows(50, theirs), rows(100, 3)])
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], expected)
    assert stored_shape(tmp_path) == [count + theirs + 3, ROW] and second.rebases == 1
    assert second.read(0, 1000) == expected.tobytes() and not second.array.dirty
    assert second.array.shared.dirty_nbytes == 0  # the inner chunks dropped pin nothing
    assert not list((tmp_path / "s.zarr").rglob(f"{TEMP_PREFIX}*"))


@pytest.mark.parametrize("case", ["grown-by-truncate", "nested-shards"])
def test_a_sharded_array_s_records_are_not_moved_where_they_are_not_all_held(case):
    """Records are moved only when every row added here is held in memory: not after a grow
    by truncate (its rows are the fill value, stored as nothing), nor through shards nested in
    inner chunks. The write-back stores nothing and fails, naming why; the first writer's
    records stay as stored."""
    inner = sharding([2, ROW], codecs=[sharding([1, ROW])]) if case == "nested-shards" else sharding([2, ROW])
    store = MemoryStore(REMOTE)
    store.set("zarr.json", json.dumps(array_doc([3, ROW], "int16", [4, ROW], fill_value=-1, codecs=[inner])).encode())
    first = open_raw_file(store)
    first.write(0, rows(0, 3).tobytes())
    first.flush()
    second = open_raw_file(store)
    if case == "grown-by-truncate":
        second.truncate(6 * ROW * 2)  # rows 3-5 the fill value, 4-5 held nowhere (stored by the next flush)
    else:
        second.write(3 * ROW * 2, rows(100, 2).tobytes(), grow=True)
    first.write(3 * ROW * 2, rows(50, 2).tobytes(), grow=True)
    first.flush()
    why = "rows added here are not all written here" if case == "grown-by-truncate" else \
        "its shards hold shards: records are not moved through two levels of them"
    with pytest.raises(StoreError, match=rf"shape \[5, 4\] where this mount stored \[3, 4\].*kept, not stored "
                                         rf"\({why}\)"):
        second.flush()
    assert json.loads(store.get("zarr.json"))["shape"] == [5, ROW] and second.array.dirty and second.rebases == 0
    assert np.frombuffer(open_raw_file(store, writable=False).read(0, 1000), "<i2").tolist() == \
        np.concatenate([rows(0, 3), rows(50, 2)]).ravel().tolist()


def test_a_sharded_appender_s_early_write_back_leaves_its_records_movable(tmp_path):
    """The second writer's early write-back stores its 7 records appended to 3 (shards of 4)
    with the shape that shows them; the first writer's 2 records, appended meanwhile, then
    move after them, and the second's next record after the first's: never one over another."""
    first, second = sharded_pair(tmp_path, 3)
    second.write(3 * ROW * 2, rows(100, 7).tobytes(), grow=True)
    first.write(3 * ROW * 2, rows(50, 2).tobytes(), grow=True)
    second.flush(whole_only=True)
    assert stored_shape(tmp_path) == [10, ROW] and shards_past_the_shape(tmp_path) == []
    first.flush()
    assert stored_shape(tmp_path) == [12, ROW] and first.rebases == 1
    second.write(10 * ROW * 2, rows(107, 1).tobytes(), grow=True)
    second.flush()
    expected = np.concatenate([rows(0, 3), rows(100, 7), rows(50, 2), rows(107, 1)])
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], expected)
    assert second.rebases == 1 and not first.array.dirty and not second.array.dirty


def memory_sharded_file(count: int) -> tuple[MemoryStore, RawFile]:
    """As memory_file, in shards of 4 records (inner chunks of 2)."""
    store = MemoryStore(REMOTE)
    store.set("zarr.json", json.dumps(array_doc([count, ROW], "int16", [4, ROW], fill_value=-1,
                                                codecs=[sharding([2, ROW])])).encode())
    raw = open_raw_file(store)
    raw.write(0, rows(0, count).tobytes())
    raw.flush()
    return store, raw


@pytest.mark.parametrize("make", [memory_file, memory_sharded_file], ids=["chunk", "shard"])
def test_a_rebase_on_an_object_store_keeps_what_the_other_writer_changed_at_the_edge(make):
    """The first writer rewrites record 2 (in the chunk, or the shard's inner chunk, that holds
    the old end) and appends one; the second appended two, holding record 2 as it read it. After
    the rebase the edge's PUT is conditional on the version read then, and takes every element
    the second did not write from it: record 2 stays the first writer's."""
    store, first = make(3)
    second = open_raw_file(store)
    second.write(3 * ROW * 2, rows(100, 2).tobytes(), grow=True)
    first.write(2 * ROW * 2, rows(60, 1).tobytes())
    first.write(3 * ROW * 2, rows(50, 1).tobytes(), grow=True)
    first.flush()
    second.flush()
    expected = np.concatenate([rows(0, 2), rows(60, 1), rows(50, 1), rows(100, 2)])
    assert np.frombuffer(open_raw_file(store, writable=False).read(0, 1000), "<i2").tolist() == \
        expected.ravel().tolist()
    assert json.loads(store.get("zarr.json"))["shape"] == [6, ROW] and second.rebases == 1


def random_appenders(seed: int, remote: bool, tmp_path) -> None:
    """Two writers of one sharded array (random shard and inner chunk rows, 0 to 9 records
    stored before) append runs of records and write back (early or in full) in an order
    seeded by `seed`; writer i's records are rows(1000 * (i + 1) + n), numbered in order."""
    rng = random.Random(seed)
    count, (shard, inner) = rng.randint(0, 9), rng.choice([(4, 2), (4, 1), (6, 2), (8, 4)])
    document = array_doc([count, ROW], "int16", [shard, ROW], fill_value=-1, codecs=[sharding([inner, ROW])])
    if remote:
        store = MemoryStore(REMOTE)
    else:
        tmp_path.mkdir()
        store = LocalStore(str(tmp_path))
    store.set("zarr.json", json.dumps(document).encode())
    first = open_raw_file(store)
    first.write(0, rows(0, count).tobytes())
    first.flush()
    writers, appended = [first, open_raw_file(store)], [0, 0]
    for _ in range(rng.randint(1, 12)):
        i, action = rng.randrange(2), rng.random()
        if action < 0.6:
            n = rng.randint(1, 6)
            writers[i].write(writers[i].file_size, rows(1000 * (i + 1) + appended[i], n).tobytes(), grow=True)
            appended[i] += n
        else:
            writers[i].flush(whole_only=action < 0.8)
    for i in rng.sample([0, 1], 2):
        writers[i].flush()
    stored = np.frombuffer(open_raw_file(store, writable=False).read(0, 1 << 20), "<i2").reshape(-1, ROW)
    assert np.array_equal(stored[:count], rows(0, count)), seed
    firsts = stored[count:, 0] // ROW  # the number of each record appended
    assert np.array_equal(stored[count:], rows(0, len(firsts)) % ROW + firsts[:, None] * ROW), seed  # whole records
    for i in (0, 1):  # every record of each writer once, in the order it appended them
        base = 1000 * (i + 1)
        assert firsts[(firsts >= base) & (firsts < base + 1000)].tolist() == list(range(base, base + appended[i])), seed
    assert len(firsts) == sum(appended), seed


@pytest.mark.parametrize("remote", [False, True], ids=["local", "object-store"])
def test_two_sharded_appenders_in_random_orders_never_lose_or_reorder_a_record(tmp_path, remote):
    """random_appenders, 25 seeds: whichever writes back first, and however early write-backs
    fall, the stored array holds every record of both, each writer's in its order."""
    for seed in range(25):
        random_appenders(seed, remote, tmp_path / str(seed))


def test_open_raw_appends_as_a_mount_does(tmp_path):
    """zarrfs.open_raw: a write past the end appends the records it completes to an array that
    grows (`grow`, the rule of -o grow), stored at flush with the consolidated copy of the shape;
    a partial record is held and refused at flush; an array that does not grow keeps its size."""
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w")
    group.create_array("empty", shape=(0, ROW), chunks=(2, ROW), dtype="<i2", fill_value=-1)  # marked: made empty
    group.create_array("fixed", shape=(3, ROW), chunks=(2, ROW), dtype="<i2", fill_value=-1)[...] = rows(0, 3)
    zarr.consolidate_metadata(str(root))
    with zarrfs.open_raw(str(root), "empty", mode="r+") as view:
        assert view.write(0, rows(0, 2).tobytes()) == 16
        assert view.append(rows(2, 1).tobytes()[:3]) == 3  # a partial record: held
        assert (view.size, view.shape) == (19, (2, ROW))
        with pytest.raises(ZarrfsError, match="the last 3 bytes written are a partial record"):
            view.flush()
        assert zarr.open_consolidated(str(root))["empty"].shape == (2, ROW)  # the whole records are stored
        view.append(rows(2, 1).tobytes()[3:])
    grown = zarr.open_consolidated(str(root))["empty"]
    assert grown.shape == (3, ROW) and np.array_equal(grown[...], rows(0, 3))
    with zarrfs.open_raw(str(root), "fixed", mode="r+") as view, pytest.raises(OutOfBoundsError):
        view.append(rows(3, 1).tobytes())
    with zarrfs.open_raw(str(root), "fixed", mode="r+", grow="all") as view:
        view.append(rows(3, 2).tobytes())
    assert np.array_equal(zarr.open_consolidated(str(root))["fixed"][...], rows(0, 5))
    with zarrfs.open_raw(str(root), "empty", mode="r+", grow="none") as view, pytest.raises(OutOfBoundsError):
        view.append(rows(3, 1).tobytes())


class SecondEntryWaits:
    """A flush lock whose second taking by another thread than its maker's waits for `go`: that
    thread's flush has failed once and comes back for the lock, while the test lets its own
    flush run first."""

    def __init__(self):
        self.maker, self.lock, self.entries = threading.current_thread(), threading.Lock(), 0
        self.waiting, self.go = threading.Event(), threading.Event()

    def __enter__(self):
        if threading.current_thread() is not self.maker:
            self.entries += 1
            if self.entries == 2:
                self.waiting.set()
                assert self.go.wait(60)
        self.lock.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()


def test_a_flush_whose_shape_error_another_flush_has_rebased_and_stored_meanwhile_stores_nothing_again(tmp_path):
    """Two flushes of the second appender (a background write-back and an fsync) both find the
    first appender's shape; one moves the records after the first's and stores them before the
    other takes the flush lock again. The other's error is stale: it neither moves the records
    again nor fails, and each record is stored once, in order."""
    first, second = raw_file(tmp_path), reopened(tmp_path)
    second.write(3 * ROW * 2, rows(100, 3).tobytes(), grow=True)
    first.write(3 * ROW * 2, rows(50, 2).tobytes(), grow=True)
    first.flush()
    gate = SecondEntryWaits()
    second.array.shared.flush_lock = gate
    background = Worker(second.flush).start()
    assert gate.waiting.wait(60)  # its flush failed: the shape is the first appender's
    second.flush()  # the fsync's: moved and stored
    gate.go.set()
    assert background.wait(60)
    background.join()
    expected = np.concatenate([rows(0, 3), rows(50, 2), rows(100, 3)])
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], expected)
    assert stored_shape(tmp_path) == [8, ROW] and second.rebases == 1
    assert second.read(0, 1000) == expected.tobytes()


class PausedBeforeRebase(LocalStore):
    """Its second exclusive() (a flush's hold of the document before it moves its records, after
    the first one's write-back met another writer's shape) waits for `go`."""

    def __init__(self, root: str):
        super().__init__(root)
        self.calls = 0
        self.paused, self.go = threading.Event(), threading.Event()

    def exclusive(self, key):
        self.calls += 1
        if self.calls == 2:
            self.paused.set()
            assert self.go.wait(60)
        return super().exclusive(key)


def test_a_flush_whose_records_another_flush_of_the_array_moved_meanwhile_stores_them_once(tmp_path):
    """The background write-back and an fsync both flush the array and both meet another
    writer's shape: the one that moves the records second finds them moved and stored by the
    first, and flushes again rather than refusing on the shape it met (EIO at the fsync)."""
    first = raw_file(tmp_path)
    store = PausedBeforeRebase(str(tmp_path / "s.zarr"))
    second = RawFile(open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20)), writable=True)
    second.write(3 * ROW * 2, rows(100, 1).tobytes(), grow=True)
    first.write(3 * ROW * 2, rows(50, 2).tobytes(), grow=True)
    first.flush()
    background = Worker(second.flush).start()  # meets shape 5, then waits before it moves its records
    assert store.paused.wait(60)
    second.flush()  # the fsync: moves them and stores them
    store.go.set()
    background.join()  # raises what the background flush raised
    expected = np.concatenate([rows(0, 3), rows(50, 2), rows(100, 1)])
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], expected)
    assert second.rebases == 1
