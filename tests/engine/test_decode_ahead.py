"""Decode-ahead (ahead.py): a sequential reader's next chunks are decoded in the background,
once each, within their budget, and never served once a write or a commit has made them stale."""

import ctypes
import os
import threading

import numpy as np
import pytest
import zarr

from helpers import CountingStore, Worker, array_doc, write_doc
from mounting import mounted, wait_for
from zarrfs.engine.array import open_array
from zarrfs.engine.buffers import free
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.decode_ahead import DecodeAhead
from zarrfs.engine.flat_file import RawFile
from zarrfs.format.v3 import parse_document
from zarrfs.fuse.replies import FuseBufvec, read_buf

CHUNK = 1 << 16  # elements of uint8: 64 KiB, as large as a read that is not a small random one
ZSTD = [{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
N = 12


def make(tmp_path, store_class=CountingStore, ahead_chunks=4, sharded=False):
    codecs = ZSTD if not sharded else [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [CHUNK], "codecs": ZSTD, "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "index_location": "end"}}]
    write_doc(tmp_path, "", array_doc([N * CHUNK], "uint8", [4 * CHUNK if sharded else CHUNK], codecs))
    values = np.random.default_rng(0).integers(0, 255, N * CHUNK, dtype="u1")
    writer = RawFile(open_array(CountingStore(tmp_path), "", parse_document(
        (tmp_path / "zarr.json").read_bytes(), "zarr.json"), ChunkCache(64 << 20)), writable=True)
    writer.write(0, values.tobytes())
    writer.flush()
    store = store_class(tmp_path)
    meta = parse_document(store.get("zarr.json"), "zarr.json")
    cache = ChunkCache(64 << 20, ahead_chunks * CHUNK)
    return store, RawFile(open_array(store, "", meta, cache), writable=True), values


def chunk_reads(store) -> list[str]:
    return [key for key, _, _ in store.gets if key.startswith("c/")]


def test_a_sequential_reader_finds_its_next_chunks_decoded_once_each(tmp_path):
    store, raw, values = make(tmp_path)
    ahead = raw.array.shared.cache.ahead
    out = np.empty(CHUNK, "u1")
    for i in range(2):
        raw.read_into(i * CHUNK, out)
        np.testing.assert_array_equal(out, values[i * CHUNK:(i + 1) * CHUNK])
    ahead.settle(10)
    assert sorted(chunk_reads(store)) == [f"c/{i}" for i in range(6)]  # the two read, the budget's four after them
    assert ahead.nbytes == 4 * CHUNK
    for i in range(2, N):
        raw.read_into(i * CHUNK, out)
        np.testing.assert_array_equal(out, values[i * CHUNK:(i + 1) * CHUNK])
        ahead.settle(10)
        assert ahead.nbytes <= ahead.max_bytes
    assert sorted(chunk_reads(store), key=lambda k: int(k[2:])) == [f"c/{i}" for i in range(N)]  # each once
    assert ahead.nbytes == 0 and raw.array.shared.cache.nbytes == 0  # nothing kept: the page cache has them


def test_random_and_small_reads_decode_nothing_ahead(tmp_path):
    store, raw, values = make(tmp_path)
    out = np.empty(CHUNK, "u1")
    for i in (7, 2, 10, 5):
        raw.read_into(i * CHUNK, out)
    for offset in range(0, 4 * 4096, 4096):
        raw.read_into(offset, out[:4096])
    raw.array.shared.cache.ahead.settle(10)
    assert set(chunk_reads(store)) == {"c/7", "c/2", "c/10", "c/5", "c/0"}  # only what was read


@pytest.mark.parametrize("sharded", [False, True])
def test_a_whole_chunk_decoded_ahead_is_the_reply_itself(tmp_path, sharded):
    """read_buf answers a request for exactly one chunk (or inner chunk) decoded ahead with
    that chunk's memory, not a copy of it."""
    store, raw, values = make(tmp_path, sharded=sharded)
    ahead = raw.array.shared.cache.ahead
    vector = ctypes.c_void_p()
    for i in range(6):
        ahead.settle(10)
        decoded = {entry.result[0] for entry in list(ahead._entries.values()) if entry.result is not None}
        assert read_buf(raw, ctypes.pointer(vector), CHUNK, i * CHUNK) == 0
        reply = FuseBufvec.from_address(vector.value)
        data = ctypes.string_at(reply.buf[0].mem, reply.buf[0].size)
        assert data == values[i * CHUNK:(i + 1) * CHUNK].tobytes()
        if i >= 2:  # the stream's first two requests start it: the next ones were decoded ahead
            assert reply.buf[0].mem in decoded, f"request {i} was answered with a copy"
        free(reply.buf[0].mem)
        free(vector.value)
    ahead.settle(10)  # a decode still under way has its read counted
    reads = [(key, None if r is None else tuple(r)) for key, r, _ in store.gets]
    assert len(reads) == len(set(reads))


class GatedStore(CountingStore):
    """Reads a chunk's stored bytes, then waits at the gate before handing them over: a decode
    of the old bytes that ends after a write and its commit."""
    gated = "c/5"

    def __init__(self, root, read_only=False):
        super().__init__(root, read_only)
        self.reached, self.gate = threading.Event(), threading.Event()

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        found = super().get_versioned(key, byte_range, expect, limit)
        if key == self.gated:
            self.reached.set()
            self.gate.wait(10)
        return found


def test_a_chunk_decoded_ahead_is_never_served_after_a_write(tmp_path):
    store, raw, values = make(tmp_path, GatedStore)
    ahead = raw.array.shared.cache.ahead
    out = np.empty(CHUNK, "u1")
    raw.read_into(0, out)
    raw.read_into(CHUNK, out)  # chunks 2..5 decode ahead; 5 waits at the gate with its old bytes
    assert store.reached.wait(10)
    # the others decoded, 5 alone held at the gate: waited for, not given 0.2 s
    wait_for(lambda: [e.done.is_set() for e in list(ahead._entries.values())].count(False) == 1,
             timeout=10, what="every decode ahead but the gated one")
    assert len(ahead._entries) == 4  # 2, 3, 4 and 5
    new = np.full(CHUNK, 7, "u1")
    for i in (3, 5):  # 3 is decoded ahead already; 5 is being decoded
        raw.write(i * CHUNK, new.tobytes())
    raw.flush()  # whole chunks written are not cached: reads go back to the store, or to what was decoded ahead
    store.gate.set()
    ahead.settle(10)
    for i in range(2, 7):
        raw.read_into(i * CHUNK, out)
        np.testing.assert_array_equal(out, new if i in (3, 5) else values[i * CHUNK:(i + 1) * CHUNK], err_msg=str(i))


def test_a_sharded_array_decodes_inner_chunks_ahead(tmp_path):
    store, raw, values = make(tmp_path, sharded=True)
    out = np.empty(CHUNK, "u1")
    raw.read_into(0, out)
    raw.read_into(CHUNK, out)
    raw.array.shared.cache.ahead.settle(10)
    assert len([r for _, r, _ in store.gets if type(r).__name__ == "Range"]) == 6  # inner chunks 0-5, in 2 shards
    for i in range(2, N):  # read across shard boundaries (4 inner chunks a shard)
        raw.read_into(i * CHUNK, out)
        np.testing.assert_array_equal(out, values[i * CHUNK:(i + 1) * CHUNK])
    raw.array.shared.cache.ahead.settle(10)  # a decode still under way has its reads counted
    ranges = [(key, tuple(r)) for key, r, _ in store.gets if r is not None]
    assert len(ranges) == len(set(ranges)) == N + N // 4  # each inner chunk once, each shard's index once


def test_the_budget_bounds_what_is_decoded_ahead():
    ahead = DecodeAhead(max_bytes=3 << 20, workers=2)
    gate = threading.Event()
    started = [ahead.submit(i, (1 << 20,), np.dtype("u1"), lambda out: gate.wait(10) and 0) for i in range(5)]
    assert started == [True, True, True, False, False]
    assert ahead.nbytes == 3 << 20
    gate.set()
    ahead.settle(10)
    taken = ahead.take(0)
    assert taken is not None and taken[2] == 0
    free(taken[0])
    assert ahead.nbytes == 2 << 20
    ahead.forget(1)
    ahead.forget(2)
    assert ahead.nbytes == 0 and ahead.take(1) is None


def test_a_chunk_wanted_again_holds_back_no_other_stale_chunk():
    """A paused reader's chunk, wanted again, is kept; a gone reader's chunk decoded after it is
    still dropped as stale when room is needed (the oldest-first order follows `since`)."""
    from zarrfs.engine import decode_ahead as module
    ahead = DecodeAhead(max_bytes=2 << 20, workers=1)
    for key in ("paused", "gone"):
        assert ahead.submit(key, (1 << 20,), np.dtype("u1"), lambda out: 0)
    ahead.settle(10)
    for entry in ahead._entries.values():  # both decoded longer than STALE ago, as after a pause
        entry.since -= module.STALE + 1
    ahead.wanted("paused")
    assert ahead.left_behind()  # the gone reader's chunk is stale
    assert ahead.submit("next", (1 << 20,), np.dtype("u1"), lambda out: 0)  # it makes room
    ahead.settle(10)
    assert "paused" in ahead and "gone" not in ahead
    for key in ("paused", "next"):
        taken = ahead.take(key)
        assert taken is not None
        free(taken[0])


def test_a_chunk_taken_while_it_decodes_stays_within_the_budget_until_its_decode_ends():
    """A reader that takes a chunk still being decoded waits for it; its memory is being
    filled all that time, so it still counts, and no new decode may start in its place."""
    ahead = DecodeAhead(max_bytes=1 << 20, workers=2)
    gate = threading.Event()
    assert ahead.submit(0, (1 << 20,), np.dtype("u1"), lambda out: gate.wait(10) and 0)
    reader = Worker(ahead.take, 0).start()
    assert not reader.wait(0.2)  # waiting for the decode
    assert ahead.nbytes == 1 << 20 and not ahead.room(1 << 20)
    assert not ahead.submit(1, (1 << 20,), np.dtype("u1"), lambda out: 0)
    gate.set()
    assert reader.wait(10)
    reader.join()  # raises what take() raised
    assert reader.result is not None and ahead.nbytes == 0
    free(reader.result[0])


def test_decode_ahead_through_a_mount_sees_writes_through_another_view(tmp_path):
    """A stream through NAME.bin decodes ahead; a write through NAME.npy to a chunk ahead of it
    is what the stream then reads, and what the store keeps."""
    root = tmp_path / "data.zarr"
    z = zarr.create_array(str(root), shape=(16, 1 << 18), chunks=(1, 1 << 18), dtype="float32")  # 1 MiB chunks
    values = np.random.default_rng(1).random((16, 1 << 18), dtype="float32")
    z[...] = values
    mib = 1 << 20
    with mounted(root, tmp_path, "decode_ahead=4M") as m:
        fd = os.open(m / "data.zarr.bin", os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            for i in range(3):
                assert os.pread(fd, mib, i * mib) == values[i].tobytes()
            new = np.full(1 << 18, -1.5, "float32")
            with open(m / "data.zarr.npy", "r+b") as npy:
                header = len(npy.read(256).split(b"\n")[0]) + 1
                npy.seek(header + 5 * mib)
                npy.write(new.tobytes())
            values[5] = new
            for i in range(3, 8):
                assert os.pread(fd, mib, i * mib) == values[i].tobytes(), i
        finally:
            os.close(fd)
        assert (m / "data.zarr.bin").read_bytes() == values.tobytes()
    np.testing.assert_array_equal(zarr.open_array(str(root), mode="r")[...], values)


def test_a_decode_ahead_without_memory_ends_and_its_reader_decodes_itself(monkeypatch):
    """malloc failing in a decode-ahead thread: the entry still ends, so take() returns None
    (the reader decodes the chunk itself) instead of waiting for ever."""
    from zarrfs.engine import decode_ahead as ahead

    def no_memory(shape, dtype):
        raise MemoryError

    monkeypatch.setattr(ahead, "malloc_array", no_memory)
    decoder = ahead.DecodeAhead(1 << 20, workers=1)
    assert decoder.submit("k", (16,), "u1", lambda out: 0)
    taking = Worker(decoder.take, "k").start()
    assert taking.wait(10), "take() waited for a decode that never ended"
    taking.join()  # raises what take() raised
    assert taking.result is None and decoder.nbytes == 0


def test_a_stream_walks_each_chunk_once_to_decode_it_ahead(tmp_path, monkeypatch):
    """Each walk starts where the stream's last one stopped: the chunks a stream has already
    handed to decode-ahead are not looked at again on every request (a walk costs Python)."""
    store, raw, values = make(tmp_path, ahead_chunks=4)
    looked_at = []
    original = DecodeAhead.__contains__

    def counting(ahead, key):
        looked_at.append(key[-1][0])
        return original(ahead, key)

    monkeypatch.setattr(DecodeAhead, "__contains__", counting)
    out = np.empty(CHUNK, "u1")
    for i in range(N):
        raw.array.shared.cache.ahead.settle(10)
        raw.read_into(i * CHUNK, out)
        np.testing.assert_array_equal(out, values[i * CHUNK:(i + 1) * CHUNK])
    assert sorted(set(looked_at)) == list(range(2, N))  # every chunk after the first two
    assert len(looked_at) <= N + 4, looked_at  # each about once (a step with no room is tried again)


def test_a_decode_ahead_that_cannot_start_a_thread_ends_at_once():
    """No thread to be had (the executor cannot start one): the entry ends empty at once, its
    bytes and slot given back, so a reader that asks for the chunk decodes it itself instead
    of waiting for ever for a decode that never began."""
    decoder = DecodeAhead(1 << 20, workers=1)
    assert decoder.submit("warm", (16,), "u1", lambda out: 0)  # the executor exists now
    decoder.settle(10)

    def no_thread(*args, **kwargs):
        raise RuntimeError("can't start new thread")

    decoder._executor.submit = no_thread
    assert not decoder.submit("k", (16,), "u1", lambda out: 0)
    taking = Worker(decoder.take, "k").start()
    assert taking.wait(10), "take() waited for a decode that never began"
    taking.join()  # raises what take() raised
    assert "k" not in decoder and decoder._running == 0
    taken = decoder.take("warm")
    free(taken[0])
    assert decoder.nbytes == 0


class HeldStore(CountingStore):
    """Its get of chunk c/3 waits until `release` is set: a reader's fetch under way."""

    def __init__(self, root, read_only=False):
        super().__init__(root, read_only)
        self.release, self.held = threading.Event(), threading.Event()

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        if key == "c/3":
            self.held.set()
            assert self.release.wait(30)
        return super().get_versioned(key, byte_range, expect, limit)


def test_a_chunk_a_reader_is_fetching_is_not_fetched_again_ahead(tmp_path):
    """Two reads of a stream at once (the kernel's read-ahead sends two): a chunk the second is
    fetching when the first walks ahead is left to it, not fetched a second time (each fetch
    from an object store or an Icechunk repository is a request)."""
    store, raw, values = make(tmp_path, HeldStore)
    out = np.empty(CHUNK, "u1")
    reader = Worker(lambda: raw.read_into(3 * CHUNK, out)).start()
    wait_for(store.held.is_set, what="the reader's fetch of c/3")
    raw.array.decode_ahead((slice(3 * CHUNK, 6 * CHUNK),))  # the other read's walk ahead of the stream
    store.release.set()
    reader.join()
    raw.array.shared.cache.ahead.settle(10)
    np.testing.assert_array_equal(out, values[3 * CHUNK:4 * CHUNK])
    assert sorted(chunk_reads(store)) == ["c/3", "c/4", "c/5"]  # c/3 once: by its reader
