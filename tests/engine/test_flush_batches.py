"""A flush encodes its batch without the array lock: reads and writes go on meanwhile, and
nothing written during a flush, or before a failed one, is lost."""

import threading

import numpy as np
import pytest

from helpers import CountingStore, array_doc, open_raw_file, sharding, write_doc
from zarrfs.engine.writeback import WriteBack
from zarrfs.errors import ConflictError, StoreError
from zarrfs.stores.contract import Capabilities
from zarrfs.stores.local import TEMP_PREFIX, LocalStore

ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]
LAYOUTS = {"plain": ZSTD, "sharded": [sharding([4], ZSTD)]}


def stored(tmp_path) -> np.ndarray:
    """The array as a fresh reader of the store sees it."""
    return np.frombuffer(open_raw_file(LocalStore(tmp_path)).read(0, 64), "<i4")


class Paused:
    """Holds every flush inside its encoding until released."""

    def __init__(self, monkeypatch):
        self.encoding = threading.Event()
        self.release = threading.Event()
        original = WriteBack._encode

        def encode(write_back, coords, chunk):
            self.encoding.set()
            assert self.release.wait(10)
            return original(write_back, coords, chunk)

        monkeypatch.setattr(WriteBack, "_encode", encode)

    def flush_in_background(self, raw) -> threading.Thread:
        self.errors = []

        def flush():
            try:
                raw.flush()
            except BaseException as e:  # whatever it is: a test asserts on the errors its flush met
                self.errors.append(e)

        thread = threading.Thread(target=flush)
        thread.start()
        assert self.encoding.wait(10)
        return thread


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reads_and_writes_go_on_while_a_flush_encodes(tmp_path, monkeypatch, layout):
    write_doc(tmp_path, "", array_doc([16], "int32", [8], LAYOUTS[layout]))
    raw = open_raw_file(LocalStore(tmp_path))
    raw.write(0, np.arange(16, dtype="<i4").tobytes())
    paused = Paused(monkeypatch)
    flushing = paused.flush_in_background(raw)
    try:
        assert raw.read(0, 64) == np.arange(16, dtype="<i4").tobytes()  # the batch, not the store
        raw.write(4, np.int32(-1).tobytes())  # into a chunk of the batch: a new dirty copy
        raw.write(40, np.int32(-2).tobytes())
        expected = np.arange(16, dtype="<i4")
        expected[[1, 10]] = -1, -2
        assert np.array_equal(np.frombuffer(raw.read(0, 64), "<i4"), expected)
    finally:
        paused.release.set()
        flushing.join()
    assert paused.errors == []
    assert np.array_equal(stored(tmp_path), np.arange(16))  # what the batch held
    assert np.array_equal(np.frombuffer(raw.read(0, 64), "<i4"), expected)  # not the cached batch
    assert raw.array.dirty
    raw.flush()
    assert not raw.array.dirty and raw.array.shared.dirty_nbytes == 0
    assert np.array_equal(stored(tmp_path), expected)


class FailingStore(LocalStore):
    def __init__(self, root):
        super().__init__(root)
        self.fail = True

    def publish(self, staged):
        if self.fail:
            self.discard(staged)
            raise StoreError("no space left on device", 28)
        super().publish(staged)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_failed_flush_keeps_its_batch_and_what_was_written_meanwhile(tmp_path, monkeypatch, layout):
    write_doc(tmp_path, "", array_doc([16], "int32", [8], LAYOUTS[layout]))
    store = FailingStore(tmp_path)
    raw = open_raw_file(store)
    raw.write(0, np.arange(16, dtype="<i4").tobytes())
    paused = Paused(monkeypatch)
    flushing = paused.flush_in_background(raw)
    raw.write(0, np.int32(-1).tobytes())  # rewrites a chunk of the failing batch
    paused.release.set()
    flushing.join()
    assert [e.errno for e in paused.errors] == [28]
    expected = np.arange(16, dtype="<i4")
    expected[0] = -1
    assert raw.array.dirty and raw.array.shared.dirty_nbytes == 64
    assert np.array_equal(np.frombuffer(raw.read(0, 64), "<i4"), expected)
    store.fail = False
    raw.flush()
    assert np.array_equal(stored(tmp_path), expected)
    assert raw.array.shared.dirty_nbytes == 0


def test_an_early_flush_writes_only_wholly_dirty_shards(tmp_path):
    """Early write-back (a writer is still going) skips a shard it would have to merge with
    its stored self and rewrite again soon; a full flush then writes it."""
    write_doc(tmp_path, "", array_doc([16], "int32", [8], [sharding([4], ZSTD)]))
    store = CountingStore(tmp_path)
    raw = open_raw_file(store)
    raw.write(0, np.full(16, 7, dtype="<i4").tobytes())
    raw.flush()
    store.reset()
    raw.write(0, np.arange(12, dtype="<i4").tobytes())  # shard 0 whole, shard 1 half
    raw.flush(whole_only=True)
    assert [key for key, _ in store.sets] == ["c/0"] and store.gets == []
    assert np.array_equal(stored(tmp_path), [*range(8), 7, 7, 7, 7, 7, 7, 7, 7])
    assert raw.array.dirty
    raw.flush()
    assert [key for key, _ in store.sets] == ["c/0", "c/1"]
    assert np.array_equal(stored(tmp_path), [*range(12), 7, 7, 7, 7])
    assert not raw.array.dirty


class FailingStage(LocalStore):
    """Fails to write one value, as a full disk would."""

    def __init__(self, root, key):
        super().__init__(root)
        self.key = key

    def stage(self, key, data):
        if key == self.key:
            raise StoreError(f"cannot write {key!r}: no space left on device", 28)
        return super().stage(key, data)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_value_that_cannot_be_staged_fails_the_flush_and_leaves_no_temporary(tmp_path, layout):
    write_doc(tmp_path, "", array_doc([16], "int32", [8], LAYOUTS[layout]))
    store = FailingStage(tmp_path, "c/1")
    raw = open_raw_file(store)
    raw.write(0, np.arange(1, 17, dtype="<i4").tobytes())
    with pytest.raises(StoreError, match="c/1"):
        raw.flush()
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(TEMP_PREFIX)]
    assert np.array_equal(stored(tmp_path), np.zeros(16))  # nothing published, not even chunk 0
    assert raw.array.dirty
    store.key = None
    raw.flush()
    assert np.array_equal(stored(tmp_path), np.arange(1, 17))


def test_write_back_threads_yield_the_cores_to_requests(tmp_path):
    """Encoders run at a lower priority than the threads that answer requests: a writer waits
    for each of its writes, and a write that waited for a core behind the encoders slowed it."""
    import os

    from zarrfs.engine.writeback import ENCODER_NICE

    write_doc(tmp_path, "", array_doc([64], "int32", [4], ZSTD))
    raw = open_raw_file(LocalStore(tmp_path))
    raw.write(0, np.arange(64, dtype="<i4").tobytes())
    raw.flush()
    encoders = [t for t in threading.enumerate() if t.name.startswith("encode")]
    assert encoders
    for thread in encoders:
        fields = open(f"/proc/self/task/{thread.native_id}/stat").read().rpartition(")")[2].split()
        assert int(fields[16]) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + ENCODER_NICE), thread.name


class VersionedStore(LocalStore):
    """A local store with an object store's versions: a PUT is conditional on the version of
    the chunk last read whole, and a conflict forgets it (as objectstore.py does)."""

    def __init__(self, root):
        super().__init__(root)
        self.capabilities = Capabilities(remote=True, conditional_writes=True)
        self.versions = {}

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        data, version = super().get_versioned(key, byte_range, expect, limit)
        if byte_range is None and key.startswith("c/"):
            self.versions[key] = data
        return data, version

    def version_known(self, key):
        return key in self.versions

    def publish(self, staged):
        for key, _ in staged:
            if key in self.versions and LocalStore.get_versioned(self, key)[0] != self.versions[key]:
                del self.versions[key]
                self.discard(staged)
                raise ConflictError(f"changed by another writer meanwhile: {key}", keys=[key])
        super().publish(staged)
        for key, temporary in staged:
            if temporary is not None:
                self.versions[key] = LocalStore.get_versioned(self, key)[0]


def test_a_flush_waiting_while_another_meets_a_conflict_merges_before_it_writes(tmp_path):
    """The flusher and a request's fsync flush at once: the one that takes the flush lock after
    the other met a conflict must merge the chunk before writing it, not PUT it stale and
    unconditionally over the other writer's values (found in review)."""
    write_doc(tmp_path, "", array_doc([8], "int32", [8], [{"name": "bytes", "configuration": {"endian": "little"}}]))
    (tmp_path / "c").mkdir()
    np.full(8, 5, "<i4").tofile(tmp_path / "c" / "0")
    store = VersionedStore(tmp_path)
    raw = open_raw_file(store)
    raw.write(0, np.full(4, 1, "<i4").tobytes())  # this mount writes elements 0-3
    errors = []
    second = threading.Thread(target=lambda: _recording(errors, raw.array.flush))
    publish = store.publish

    def raced(staged):  # the other machine writes elements 4-7 first, and a second flush starts
        store.publish = publish
        np.array([5, 5, 5, 5, 9, 9, 9, 9], "<i4").tofile(tmp_path / "c" / "0")
        second.start()
        publish(staged)

    store.publish = raced
    raw.array.flush()
    second.join(10)
    assert not second.is_alive() and not errors
    assert np.fromfile(tmp_path / "c" / "0", "<i4").tolist() == [1, 1, 1, 1, 9, 9, 9, 9]


def _recording(errors: list, call) -> None:
    try:
        call()
    except BaseException as e:
        errors.append(e)
