"""Runs of a shard's inner chunks read together ahead of a stream (shard_spans.py): fewer
requests, the same bytes, one read shared by the decodes that wait for it, bounded memory."""

import threading

import numpy as np
import pytest

from helpers import write_sharded
from servers.memory_store import MemoryStore
from zarrfs.byte_ranges import Range
from zarrfs.engine import shard_spans
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.engine.shard_spans import Spans
from zarrfs.format.v3 import parse_document
from zarrfs.stores.contract import Capabilities

REMOTE = Capabilities(remote=True, conditional_writes=True, batched_reads=True, metadata_ttl=60)
INNER, PER_SHARD, SHARDS = 4096, 16, 4  # uint8 elements: 16 inner chunks of 4 KiB per shard


def sharded_store(values: np.ndarray, capabilities: Capabilities) -> MemoryStore:
    store = MemoryStore(capabilities)
    write_sharded(store, values, INNER, PER_SHARD)
    store.reads.clear()
    return store


def stream(store: MemoryStore, size: int, piece: int = 64 << 10) -> bytes:
    meta = parse_document(store.get("zarr.json"), "zarr.json")
    cache = ChunkCache(64 << 20, ahead_bytes=16 << 20, ahead_workers=4)
    raw = RawFile(open_array(store, "", meta, cache))
    out = b"".join(raw.read(offset, piece) for offset in range(0, size, piece))
    cache.ahead.settle(10)
    return out


@pytest.mark.parametrize("capabilities", [REMOTE, Capabilities()], ids=["remote", "local"])
def test_a_stream_reads_the_same_bytes(capabilities):
    values = np.random.default_rng(1).integers(0, 255, INNER * PER_SHARD * SHARDS, dtype="u1")
    assert stream(sharded_store(values, capabilities), values.size) == values.tobytes()


def test_a_stream_through_remote_shards_reads_runs_of_inner_chunks_at_once():
    values = np.arange(INNER * PER_SHARD * SHARDS, dtype="u1")
    store = sharded_store(values, REMOTE)
    assert stream(store, values.size) == values.tobytes()
    chunk_reads = [r for key, r in store.reads if key.startswith("c/") and isinstance(r, Range)]
    # one ranged read per inner chunk before; now a stream's decodes share ranges of several
    assert len(chunk_reads) < SHARDS * PER_SHARD // 2
    assert max(r.length for r in chunk_reads) > INNER


def test_the_waiting_decodes_share_one_read():
    calls, release = [], threading.Event()

    def read_range(r: Range) -> bytes:
        calls.append(r)
        release.wait(10)
        return bytes(range(256)) * (r.length // 256)

    spans = Spans(1 << 20)
    following = [(256 * i, 256) for i in range(1, 8)]
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.update(
        {i: spans.read(256 * i, 256, lambda: following[i:], read_range)})) for i in range(8)]
    threads[0].start()
    while not calls:
        threading.Event().wait(0.01)
    for t in threads[1:]:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert calls == [Range(0, 8 * 256)]
    assert all(results[i] == bytes(range(256)) for i in range(8))
    assert not spans._spans  # each chunk taken: the span is gone


def test_a_failed_read_reaches_every_waiter_and_the_next_read_tries_again():
    attempts = []

    def read_range(r: Range) -> bytes:
        attempts.append(r)
        if len(attempts) == 1:
            raise OSError("connection reset")
        return b"x" * r.length

    spans = Spans(1 << 20)
    with pytest.raises(OSError):
        spans.read(0, 10, lambda: [(10, 10)], read_range)
    assert spans.read(10, 10, lambda: [], read_range) == b"x" * 10
    assert attempts == [Range(0, 20), Range(10, 10)]


def test_spans_stop_at_a_gap_at_span_bytes_and_at_what_is_held():
    calls = []

    def read(r: Range) -> bytes:
        calls.append(r)
        return b"\0" * r.length

    spans = Spans(max_held=1200)  # spans of 300 bytes at most
    spans.read(0, 100, lambda: [(100, 100), (250, 100)], read)  # a gap after 200
    spans.read(1000, 100, lambda: [(1100, 100), (1200, 100), (1300, 100)], read)
    assert calls == [Range(0, 200), Range(1000, 300)]
    spans.read(2000, 800, lambda: [], read)  # 200 + 300 + 800 > 1200: the oldest span goes
    assert [(s.start, s.stop) for s in spans._spans] == [(1000, 1300)]  # the last one was taken whole
    spans.read(100, 100, lambda: [], read)  # its span went before it was taken: read alone
    spans.read(5000, 1300, lambda: [], read)  # more than a shard may hold: read alone, held nowhere
    assert calls[-3:] == [Range(2000, 800), Range(100, 100), Range(5000, 1300)]
    assert [(s.start, s.stop) for s in spans._spans] == [(1000, 1300)]
    spans.forget()
    assert not spans._spans


def test_a_span_no_decode_came_back_to_goes_after_a_while(monkeypatch):
    monkeypatch.setattr(shard_spans, "STALE", 0.0)
    spans = Spans(max_held=1200)
    read = lambda r: b"\0" * r.length  # noqa: E731
    spans.read(0, 100, lambda: [(100, 100)], read)  # its second chunk is never read
    assert len(spans._spans) == 1
    spans.read(1000, 100, lambda: [], read)
    assert not spans._spans  # the first one was read long enough ago, the second taken whole


def test_a_span_stops_before_chunks_another_span_already_brought():
    """Decodes ahead start in any order: the shard's last chunk was read in a span of its own and
    taken before the first chunk's decode planned; the first one's span stops before it."""
    calls = []

    def read(r: Range) -> bytes:
        calls.append(r)
        return b"\0" * r.length

    spans = Spans(max_held=1 << 20)
    spans.read(300, 100, lambda: [], read)  # the last chunk, taken: its span is gone
    assert not spans._spans
    spans.read(0, 100, lambda: [(100, 100), (200, 100), (300, 100)], read)
    assert calls == [Range(300, 100), Range(0, 300)]
    spans.forget()  # a new index: nothing is known to be brought any more
    spans.read(0, 100, lambda: [(100, 100), (200, 100), (300, 100)], read)
    assert calls[-1] == Range(0, 400)


def test_a_request_takes_a_chunk_a_span_holds_and_spans_stop_before_what_it_read():
    """A request's own read (not a decode ahead) of a chunk a span holds takes it from the span;
    a chunk a request read is not fetched again by a span planned after."""
    calls = []

    def read(r: Range) -> bytes:
        calls.append(r)
        return bytes(range(r.start, r.start + r.length))

    spans = Spans(max_held=1 << 20)
    assert spans.covered(0, 10) is shard_spans.NOT_COVERED
    spans.read(0, 10, lambda: [(10, 10), (20, 10)], read)  # a span of three chunks
    assert spans.covered(10, 10) == bytes(range(10, 20)) and calls == [Range(0, 30)]
    spans.brought([(40, 10)])  # a request read the chunk at 40 itself
    spans.read(30, 10, lambda: [(40, 10), (50, 10)], read)
    assert calls[-1] == Range(30, 10)
