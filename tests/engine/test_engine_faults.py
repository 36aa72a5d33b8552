"""The engine over a store that fails: reads, flushes and conflicts, with faults injected into
the in-memory store (no disk, no server). Nothing written is lost, and errors name the chunk."""

import json

import numpy as np
import pytest

from helpers import array_doc, open_raw_file, write_sharded
from servers.memory_store import MemoryStore
from zarrfs.engine.writeback import CONFLICT_RETRIES
from zarrfs.errors import ConflictError, CorruptChunkError, StoreError
from zarrfs.stores.contract import Capabilities

REMOTE = Capabilities(remote=True, conditional_writes=True, batched_reads=True, metadata_ttl=0)


def int32s(*values) -> bytes:
    return np.array(values, "<i4").tobytes()


def array_store(capabilities: Capabilities | None = None, chunks=((5,) * 8,)) -> MemoryStore:
    """An 8-element int32 array in chunks of 8, with its stored chunks."""
    store = MemoryStore(capabilities)
    store.set("zarr.json", json.dumps(array_doc([8 * len(chunks)], "int32", [8])).encode())
    for i, values in enumerate(chunks):
        store.set(f"c/{i}", int32s(*values))
    return store


def stored(store: MemoryStore) -> list[int]:
    """The array as a fresh reader of the store sees it."""
    return np.frombuffer(open_raw_file(store, writable=False).read(0, 32), "<i4").tolist()


@pytest.mark.parametrize("capabilities", [None, REMOTE], ids=["local", "remote"])
def test_a_failed_read_names_the_chunk_and_a_retry_reads_it(capabilities):
    store = array_store(capabilities)
    raw = open_raw_file(store)
    store.fail("get", "c/*")  # a StoreError naming the key, as every store's
    with pytest.raises(StoreError, match="'c/0'"):
        raw.read(0, 32)
    assert np.frombuffer(raw.read(0, 32), "<i4").tolist() == [5] * 8


def test_a_truncated_chunk_is_a_corrupt_chunk_naming_its_key():
    store = array_store()
    raw = open_raw_file(store)
    store.fail("get", "c/0", truncate=True)
    with pytest.raises(CorruptChunkError, match="c/0"):
        raw.read(0, 32)
    assert np.frombuffer(raw.read(0, 32), "<i4").tolist() == [5] * 8


@pytest.mark.parametrize("operation", ["stage", "publish"])
def test_a_flush_that_cannot_store_keeps_the_data_for_the_next(operation):
    store = array_store()
    raw = open_raw_file(store)
    raw.write(0, int32s(1, 2, 3))
    store.fail(operation, "c/0", error=StoreError("cannot write 'c/0': no space left on device", 28))
    with pytest.raises(StoreError, match="'c/0'"):
        raw.flush()
    assert stored(store) == [5] * 8  # nothing half-written
    assert raw.array.dirty and np.frombuffer(raw.read(0, 12), "<i4").tolist() == [1, 2, 3]
    raw.flush()
    assert stored(store) == [1, 2, 3, 5, 5, 5, 5, 5] and not raw.array.dirty


@pytest.mark.parametrize("capabilities", [None, REMOTE], ids=["local", "remote"])
def test_a_failed_flush_sends_again_only_what_was_not_stored(capabilities):
    """A publish that stored c/0 and then failed on c/1 (an object store PUTs each value on its
    own): the next flush sends c/1 alone. A fault armed on c/0 would fail it if it sent c/0."""
    store = array_store(capabilities, chunks=((5,) * 8, (5,) * 8))
    raw = open_raw_file(store)
    raw.write(0, int32s(*range(1, 17)))
    store.fail("publish", "c/1")
    with pytest.raises(StoreError, match="'c/1'"):
        raw.flush()
    store.fail("publish", "c/0", error=StoreError("c/0 was sent again"))
    raw.flush()
    assert np.frombuffer(open_raw_file(store, writable=False).read(0, 64), "<i4").tolist() == list(range(1, 17))
    assert not raw.array.dirty


@pytest.mark.parametrize("capabilities", [None, REMOTE], ids=["local", "remote"])
def test_a_failed_flush_sends_again_only_the_shards_not_stored(capabilities):
    """The same with two shards of four inner chunks: shard c/0 stored, c/1 failed; the next
    flush rebuilds and sends c/1 alone, and every inner chunk reads back as written."""
    store = MemoryStore(capabilities)
    write_sharded(store, np.zeros(32, "u1"), inner=4, per_shard=4)
    raw = open_raw_file(store)
    raw.write(0, bytes(range(1, 33)))
    store.fail("publish", "c/1")
    with pytest.raises(StoreError, match="'c/1'"):
        raw.flush()
    store.fail("publish", "c/0", error=StoreError("c/0 was sent again"))
    raw.flush()
    assert open_raw_file(store, writable=False).read(0, 32) == bytes(range(1, 33)) and not raw.array.dirty


def test_a_conflict_during_flush_merges_the_other_writers_elements():
    store = array_store(REMOTE)
    raw = open_raw_file(store)
    raw.read(0, 32)  # this mount's version of c/0: the publish is conditional on it
    raw.write(0, int32s(1, 1, 1, 1))
    store.other_writer("c/0", int32s(5, 5, 5, 5, 9, 9, 9, 9))
    raw.flush()
    assert stored(store) == [1, 1, 1, 1, 9, 9, 9, 9]


def test_conflicts_on_every_retry_leave_the_data_dirty_and_the_next_flush_merges():
    store = array_store(REMOTE)
    raw = open_raw_file(store)
    raw.read(0, 32)
    raw.write(0, int32s(1, 1, 1, 1))
    store.other_writer("c/0", int32s(5, 5, 5, 5, 9, 9, 9, 9))
    store.fail("publish", "c/0", times=CONFLICT_RETRIES, error=ConflictError("c/0", keys=["c/0"]))
    with pytest.raises(ConflictError):
        raw.flush()
    assert stored(store) == [5, 5, 5, 5, 9, 9, 9, 9] and raw.array.dirty
    store.other_writer("c/0", int32s(5, 5, 5, 5, 7, 7, 7, 7))  # and again, before the next flush
    raw.flush()
    assert stored(store) == [1, 1, 1, 1, 7, 7, 7, 7] and not raw.array.dirty


def test_a_shard_another_writer_rewrote_is_read_through_its_new_index():
    """A remote shard's index is kept for metadata_ttl; when another machine rewrites the shard
    meanwhile, an inner chunk read through the old index meets other bytes: the index is read
    again and the chunk read anew, instead of failing as corrupt (seen with two writers on one
    shard of SeaweedFS)."""
    import zarr
    from zarr.codecs import ZstdCodec
    from zarr.storage import MemoryStore as ZarrMemory

    def shard(values) -> tuple[bytes, bytes]:  # a zarr-python written store: (zarr.json, the shard)
        z = zarr.create_array(ZarrMemory(), shape=(16,), chunks=(4,), shards=(16,), dtype="<i4",
                              compressors=[ZstdCodec(level=1)], fill_value=0)
        z[...] = values
        return (z.store._store_dict["zarr.json"].to_bytes(), z.store._store_dict["c/0"].to_bytes())

    document, old = shard(np.arange(16))
    store = MemoryStore(Capabilities(remote=True, conditional_writes=True, metadata_ttl=None))
    store.set("zarr.json", document)
    store.set("c/0", old)
    raw = open_raw_file(store, writable=False)
    assert np.frombuffer(raw.read(0, 16), "<i4").tolist() == [0, 1, 2, 3]  # the index is kept now
    new_values = np.concatenate([np.zeros(4, int), np.full(8, 7), np.random.default_rng(0).integers(0, 1 << 30, 4)])
    store.other_writer("c/0", shard(new_values)[1])  # the first inner chunk all fill value, not stored: others move
    assert np.frombuffer(raw.read(48, 16), "<i4").tolist() == new_values[12:].tolist()


def test_one_batch_of_whole_chunks_holds_at_most_its_bytes_at_the_most_each_chunk_can_be():
    """A server decides how much of its limit each answer fills: a batch may take only as many
    chunks as fit in its bytes if every one were as large as its array allows."""
    from zarrfs.engine.chunk_sources import StoreChunks
    from zarrfs.format.v3 import parse_object

    store = MemoryStore(Capabilities(remote=True, batched_reads=True))
    meta = parse_object(array_doc([64], "uint8", [1]), "a")
    for i in range(64):
        store.set(f"a/c/{i}", b"x")
    got = StoreChunks(store, "a", meta, "a/zarr.json", limit=1000).read_many([(i,) for i in range(64)], 10_000)
    assert sorted(got) == [(i,) for i in range(10)]
    assert len(StoreChunks(store, "a", meta, "a/zarr.json").read_many([(i,) for i in range(64)], 10_000)) == 64
