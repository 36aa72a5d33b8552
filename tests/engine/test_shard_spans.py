"""Runs of a shard's inner chunks read together ahead of a stream (shard_spans.py): fewer
requests, the same bytes, one read shared by the decodes that wait for it, bounded memory."""

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from helpers import Worker, write_sharded
from servers.fault_proxy import FaultProxy
from servers.memory_store import MemoryStore
from servers.seaweed import unique_prefix
from zarrfs.byte_ranges import Range, Suffix
from zarrfs.codecs.shard_format import EMPTY
from zarrfs.engine import decode_ahead, read_budget, shard_spans
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.chunk_sources import run_at, stored_runs
from zarrfs.engine.flat_file import RawFile
from zarrfs.engine.shard_spans import Spans
from zarrfs.format.v3 import parse_document
from zarrfs.stores.contract import Capabilities
from zarrfs.stores.object_store import ObjectStore

REMOTE = Capabilities(remote=True, conditional_writes=True, batched_reads=True, metadata_ttl=60)
INNER, PER_SHARD, SHARDS = 4096, 16, 4  # uint8 elements: 16 inner chunks of 4 KiB per shard


@pytest.fixture(autouse=True)
def reader_keeps_up(monkeypatch):
    """The streams here read on before what they fetched is STALE seconds old, as a reader that
    keeps up does, however busy the machine. A second's stall of a loaded machine between two
    reads would otherwise change what is fetched (the counts below would count a paused reader):
    the spans forget the chunks the first read fetched (its run is read again from its start,
    test_a_reader_that_pauses_after_its_first_read_...), and the next walk drops the chunks
    decoded ahead for the reader as left behind."""
    monkeypatch.setattr(decode_ahead, "STALE", 3600.0)
    monkeypatch.setattr(shard_spans, "STALE", 3600.0)


def sharded_store(values: np.ndarray, capabilities: Capabilities) -> MemoryStore:
    store = MemoryStore(capabilities)
    write_sharded(store, values, INNER, PER_SHARD)
    store.reads.clear()
    return store


def raw_file(store: MemoryStore, cache: ChunkCache) -> RawFile:
    """The flat file of the array at the store's root, read through `cache`."""
    return RawFile(open_array(store, "", parse_document(store.get("zarr.json"), "zarr.json"), cache))


def stream(store: MemoryStore, size: int, piece: int = 64 << 10, cache: ChunkCache | None = None) -> bytes:
    """The array's bytes read in `piece`s from the start, its decodes ahead let finish after each."""
    cache = cache or ChunkCache(64 << 20, ahead_bytes=16 << 20, ahead_workers=4)
    raw = raw_file(store, cache)
    pieces = []
    for offset in range(0, size, piece):
        pieces.append(raw.read(offset, piece))
        cache.ahead.settle(10)  # the decodes ahead keep up, as they do unless the machine is busy
    return b"".join(pieces)


def run(spans: Spans, stored: list[tuple[int, int]], offset: int) -> Callable[[], list[tuple[int, int]]]:
    """run() for Spans.read: the run of the chunk at `offset` among a shard's stored (offset,
    nbytes), cut as ShardChunks cuts a shard's index (stored_runs)."""
    index = np.array(stored, dtype="u8").reshape(-1, 2)
    return lambda: run_at(*stored_runs(index, spans.span_bytes, spans.span_chunks), offset)


@pytest.mark.parametrize("capabilities", [REMOTE, Capabilities()], ids=["remote", "local"])
def test_a_stream_reads_the_same_bytes(capabilities):
    values = np.random.default_rng(1).integers(0, 255, INNER * PER_SHARD * SHARDS, dtype="u1")
    assert stream(sharded_store(values, capabilities), values.size) == values.tobytes()


def test_a_stream_through_remote_shards_reads_runs_of_inner_chunks_at_once():
    values = np.arange(INNER * PER_SHARD * SHARDS, dtype="u1")
    store = sharded_store(values, REMOTE)
    assert stream(store, values.size) == values.tobytes()
    shard_reads = [r for key, r in store.reads if key.startswith("c/")]
    # one ranged read per inner chunk before; now a stream's decodes share ranges of several (a
    # shard that fits the read-ahead budget comes whole with its index: a suffix of the budget)
    assert len(shard_reads) < SHARDS * PER_SHARD // 2
    assert max(r.length for r in shard_reads) > INNER


def test_the_waiting_decodes_share_one_read():
    calls, release = [], threading.Event()

    def read_range(r: Range) -> bytes:
        calls.append(r)
        release.wait(10)
        return bytes(range(256)) * (r.length // 256)

    spans = Spans(1 << 20)
    run = [(256 * i, 256) for i in range(8)]
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.update(
        {i: spans.read(256 * i, 256, lambda: run, read_range)})) for i in range(8)]
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
        spans.read(0, 10, run(spans, [(0, 10), (10, 10)], 0), read_range)
    assert spans.read(10, 10, lambda: [], read_range) == b"x" * 10
    assert attempts == [Range(0, 20), Range(10, 10)]


def test_spans_stop_at_a_gap_at_span_bytes_and_at_what_is_held():
    calls = []

    def read(r: Range) -> bytes:
        calls.append(r)
        return b"\0" * r.length

    spans = Spans(max_held=600)  # spans of 300 bytes at most
    shard = [(0, 100), (100, 100), (250, 100), (1000, 100), (1100, 100), (1200, 100), (1300, 100)]
    spans.read(0, 100, run(spans, shard, 0), read)  # a gap after 200
    spans.read(1000, 100, run(spans, shard, 1000), read)
    assert calls == [Range(0, 200), Range(1000, 300)]
    spans.read(2000, 250, lambda: [], read)  # 200 + 300 + 250 > 600: the oldest span goes
    assert [(s.start, s.stop) for s in spans._spans] == [(1000, 1300)]  # the last one was taken whole
    spans.read(100, 100, lambda: [], read)  # its span went before it was taken: read alone
    spans.read(5000, 700, lambda: [], read)  # more than a shard may hold: read alone, held nowhere
    assert calls[-3:] == [Range(2000, 250), Range(100, 100), Range(5000, 700)]
    assert [(s.start, s.stop) for s in spans._spans] == [(1000, 1300)]
    spans.forget()
    assert not spans._spans


def test_a_span_no_decode_came_back_to_goes_after_a_while(monkeypatch):
    monkeypatch.setattr(shard_spans, "STALE", 0.0)
    spans = Spans(max_held=1200)
    read = lambda r: b"\0" * r.length  # noqa: E731
    spans.read(0, 100, run(spans, [(0, 100), (100, 100)], 0), read)  # its second chunk is never read
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
    shard = [(0, 100), (100, 100), (200, 100), (300, 100)]
    spans.read(0, 100, run(spans, shard, 0), read)
    assert calls == [Range(300, 100), Range(0, 300)]
    spans.forget()  # a new index: nothing is known to be brought any more
    spans.read(0, 100, run(spans, shard, 0), read)
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
    shard = [(0, 10), (10, 10), (20, 10), (30, 10), (40, 10), (50, 10)]
    spans.read(0, 10, run(spans, shard[:3], 0), read)  # a span of three chunks (a run: the index says so)
    assert spans.covered(10, 10) == bytes(range(10, 20)) and calls == [Range(0, 30)]
    spans.brought([(40, 10)])  # a request read the chunk at 40 itself
    spans.read(30, 10, run(spans, shard[3:], 30), read)
    assert calls[-1] == Range(30, 10)


def test_a_run_is_read_whole_whichever_of_its_chunks_plans_first():
    """Decodes ahead start in any order: the second chunk's decode planning first reads the run
    from its first chunk, and the first chunk's decode takes it from there (one GET, not two)."""
    calls = []

    def read(r: Range) -> bytes:
        calls.append(r)
        return bytes(range(r.start, r.start + r.length))

    spans = Spans(max_held=1 << 20)
    shard = [(0, 10), (10, 10), (20, 10), (30, 10)]
    assert spans.read(10, 10, run(spans, shard, 10), read) == bytes(range(10, 20))
    assert spans.read(0, 10, run(spans, shard, 0), read) == bytes(range(10))
    assert calls == [Range(0, 40)]


def test_a_chunk_taken_twice_leaves_the_span_to_the_chunks_not_yet_taken():
    """A request that outran the decodes ahead takes its chunk from their span, and the decode
    ahead of that chunk takes it again: the span still serves every other chunk (it counted
    takes, went one chunk early, and the last chunk was read alone)."""
    calls = []

    def read(r: Range) -> bytes:
        calls.append(r)
        return bytes(range(r.start, r.start + r.length))

    spans = Spans(max_held=1 << 20)
    shard = [(0, 10), (10, 10), (20, 10)]
    assert spans.read(0, 10, run(spans, shard, 0), read) == bytes(range(10))  # a decode ahead
    assert spans.covered(0, 10) == bytes(range(10))  # the request that outran it
    assert spans.read(10, 10, run(spans, shard, 10), read) == bytes(range(10, 20))
    assert spans.read(20, 10, run(spans, shard, 20), read) == bytes(range(20, 30))
    assert calls == [Range(0, 30)]
    assert spans.taken(20, 10) and not spans._spans  # each taken: gone, and remembered


def test_a_decode_ahead_whose_chunk_a_request_took_makes_no_read():
    """On a busy machine a request outruns the decodes ahead and takes its chunk from their span;
    that chunk's decode ahead, starting after the span was taken whole, has nothing left to do:
    it made a GET of that one chunk (a dozen of them through a throttled mount)."""
    values = np.random.default_rng(6).integers(0, 255, INNER * PER_SHARD, dtype="u1")
    store = sharded_store(values, REMOTE)
    cache = ChunkCache(64 << 20, ahead_bytes=16 << 20, ahead_workers=4)
    source = open_array(store, "", parse_document(store.get("zarr.json"), "zarr.json"), cache).shard_view((0,)).source
    assert source.read_ahead((0,)) == values[:INNER].tobytes()  # the first decode reads the shard
    assert source.read((1,)) == values[INNER:2 * INNER].tobytes()  # the request that outran the decodes
    for i in range(2, PER_SHARD):
        assert source.read_ahead((i,)) == values[i * INNER:(i + 1) * INNER].tobytes()
    reads = len(store.reads)
    assert source.read_ahead((1,)) is None  # the request has it
    assert len(store.reads) == reads


def test_a_shard_that_fits_the_budget_is_one_run():
    """Whole where its stored bytes and the bytes its chunks decode to fit the read-ahead budget
    (one GET, as tensorstore reads a shard); else runs of half the budget, one in flight while
    the decodes take the other's."""
    spans = Spans(max_held=600, chunk_nbytes=100)
    assert spans.run_bounds(600, 6) == (600, 6)
    assert spans.run_bounds(601, 6) == (300, 3)  # more stored bytes than the budget
    assert spans.run_bounds(300, 7) == (300, 3)  # more decoded bytes than the budget


def test_a_shards_chunks_are_cut_into_runs_by_the_index_alone():
    """Runs stop at a gap, at span_bytes from their stretch's first byte, in stored order."""
    index = np.array([[300, 100], [0, 100], [EMPTY, EMPTY], [100, 100], [600, 100], [400, 100]], dtype="u8")
    starts, sizes, ids = stored_runs(index, 300)
    assert starts.tolist() == [0, 100, 300, 400, 600] and sizes.tolist() == [100] * 5
    assert ids == [0, 0, 1, 1, 2]  # [0, 200), a gap, [300, 500), a gap, [600, 700)
    assert stored_runs(index, 150)[2] == [0, 1, 2, 3, 4]  # two chunks would be 200 bytes: one a run


# The bench's proportions scaled down (issue #41 item 3): shards of 64 inner chunks, a read-ahead
# budget of one shard (64 MiB shards of 1 MiB chunks and the default prefetch_size of 64 MiB).
SCALED_INNER, SCALED_PER_SHARD, SCALED_SHARDS = 16 << 10, 64, 4


def scaled_shards(seed: int) -> tuple[np.ndarray, MemoryStore]:
    """Random bytes in SCALED_SHARDS shards of the bench's proportions, on a remote-like store."""
    values = np.random.default_rng(seed).integers(0, 255, SCALED_INNER * SCALED_PER_SHARD * SCALED_SHARDS, dtype="u1")
    store = MemoryStore(REMOTE)
    write_sharded(store, values, SCALED_INNER, SCALED_PER_SHARD)
    return values, store


WHOLE_SHARD_AHEAD = 2 * SCALED_INNER * SCALED_PER_SHARD  # a read-ahead budget with room for a whole shard and its index


def five_shards(workers: int = 32) -> tuple:
    """(values, store, cache): five scaled shards, no read counted yet, read through a cache
    whose read-ahead budget is WHOLE_SHARD_AHEAD, decoded ahead by `workers` threads."""
    values, store = scaled_shards(5)
    store.reads.clear()
    return values, store, ChunkCache(256 << 20, ahead_bytes=WHOLE_SHARD_AHEAD, ahead_workers=workers)


def scaled_stream(store: MemoryStore, size: int) -> bytes:
    ahead = SCALED_INNER * SCALED_PER_SHARD  # a read-ahead budget of one shard
    return stream(store, size, 128 << 10, ChunkCache(256 << 20, ahead_bytes=ahead, ahead_workers=32))


def test_a_stream_reads_each_shard_that_fits_the_budget_in_one_request_after_its_index():
    """tensorstore reads a sharded stream as one GET a shard. A shard whose stored bytes fit the
    read-ahead budget is read in one span after its index, however its decodes ahead are
    scheduled (they start in any order: a span covers its whole run); the first read, before
    any stream, reads its own chunks. In runs of half the budget it was 13 requests."""
    values, store = scaled_shards(2)
    store.reads.clear()
    batched, get_ranges = [], store.get_ranges  # a request's own inner chunks: one call, a GET at least

    def counted(key, ranges, expect=None):
        batched.append(key)
        return get_ranges(key, ranges, expect)
    store.get_ranges = counted
    assert scaled_stream(store, values.size) == values.tobytes()
    shard_reads = [key for key, _ in store.reads if key.startswith("c/")] + batched
    assert len(shard_reads) <= 2 * SCALED_SHARDS + 1, (store.reads, batched)


def test_a_stream_reads_the_index_with_the_shard_once_the_arrays_shards_fit():
    """The first shard's index says the array's shards fit the read-ahead budget, index and all:
    the stream then reads each next shard whole with its index, one GET (a suffix one byte
    longer than the budget, which a shorter value answers whole), as tensorstore does."""
    values, store, cache = five_shards()
    ahead = WHOLE_SHARD_AHEAD
    assert stream(store, values.size, 128 << 10, cache) == values.tobytes()
    reads = [(key, r) for key, r in store.reads if key.startswith("c/")]
    assert_each_later_shard_whole_with_its_index(reads, ahead)
    # the first shard: its index, read before any stream, then the stream's span (the first
    # read's own chunks come in one call of several ranges, get_ranges, not counted here)
    assert [r for key, r in reads if key == "c/0"] == [Suffix(16 * SCALED_PER_SHARD + 4), Range(128 << 10, ahead // 2 - (128 << 10))]


class Clock:
    """A module's clock (its `time`), moved on by the test: a pause between two reads, with no wait."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def assert_each_later_shard_whole_with_its_index(reads: list[tuple[str, Range | Suffix]], ahead: int) -> None:
    """Each shard after the first read in one GET, whatever the order the shards' reads came in
    (the index reads ahead run on the pool's threads, beside the stream's span of shard 0)."""
    later = sorted(((key, r) for key, r in reads if key != "c/0"), key=lambda read: int(read[0][2:]))
    assert later == [(f"c/{s}", Suffix(ahead + 1)) for s in range(1, SCALED_SHARDS)], reads


def test_a_reader_that_pauses_after_its_first_read_reads_the_first_shards_run_again_at_most(monkeypatch):
    """The spans remember the chunks a request read alone for STALE seconds: a reader whose
    second read comes later (a loaded machine stalls it; here the spans' clock is moved on) has
    its stream's span of the first shard planned from the run's start, the first read's chunks
    again: one GET all the same, and the later shards still whole with their index."""
    values, store, cache = five_shards()
    ahead = WHOLE_SHARD_AHEAD
    raw = raw_file(store, cache)
    piece = 128 << 10
    assert raw.read(0, piece) == values[:piece].tobytes()  # no stream yet: its own chunks
    clock = Clock()
    monkeypatch.setattr(shard_spans, "time", clock)  # from now on: the first read was long ago
    clock.now = time.monotonic() + 2 * shard_spans.STALE  # the pause: what it brought is forgotten
    for offset in range(piece, values.size, piece):
        assert raw.read(offset, piece) == values[offset:offset + piece].tobytes()
        cache.ahead.settle(10)
    reads = [(key, r) for key, r in store.reads if key.startswith("c/")]
    assert_each_later_shard_whole_with_its_index(reads, ahead)
    assert [r for key, r in reads if key == "c/0"] == [Suffix(16 * SCALED_PER_SHARD + 4), Range(0, ahead // 2)], reads


def test_a_small_read_of_a_remote_shard_fetches_its_index_and_one_inner_chunk():
    values, store = scaled_shards(3)
    cache = ChunkCache(256 << 20, ahead_bytes=SCALED_INNER * SCALED_PER_SHARD, ahead_workers=32)
    raw = raw_file(store, cache)
    store.reads.clear()
    offset = 5 * SCALED_INNER + 100
    assert raw.read(offset, 4096) == values[offset:offset + 4096].tobytes()
    offset = 9 * SCALED_INNER + 100
    assert raw.read(offset, 4096) == values[offset:offset + 4096].tobytes()
    index, first, second = store.reads
    assert index[0] == first[0] == second[0] == "c/0" and index[1].length < SCALED_INNER
    assert first[1] == Range(5 * SCALED_INNER, SCALED_INNER) and second[1] == Range(9 * SCALED_INNER, SCALED_INNER)


def test_a_reader_that_outruns_its_decodes_ahead_joins_their_run(seaweed):
    """Issue #41: on a busy machine the decodes ahead of a stream start late, and the reader
    reaches chunks of the run their first one was to fetch before it has: it fetched its own
    chunks alone, and the decodes the rest of the run after them (through a mount, 31 requests
    where 13 were counted quietly). Here the decodes ahead's only thread is held busy while the
    reader continues its stream: the reader reads its chunks' run in one GET, which the decodes
    take once they start, so the stream costs each shard its index and its runs, and the first
    read (no stream yet) its own chunks. Counted by a proxy before SeaweedFS."""
    prefix = unique_prefix("outrun")
    shards, piece = 2, 128 << 10
    values = np.random.default_rng(4).integers(0, 255, SCALED_INNER * SCALED_PER_SHARD * shards, dtype="u1")
    write_sharded(ObjectStore(seaweed.store(prefix), seaweed.url(prefix)), values, SCALED_INNER, SCALED_PER_SHARD)
    ahead = SCALED_INNER * SCALED_PER_SHARD  # a read-ahead budget of one shard: a shard is one run
    host, port = seaweed.endpoint.removeprefix("http://").split(":")
    with FaultProxy((host, int(port))) as proxy:
        store = ObjectStore(seaweed.store(prefix, endpoint=proxy.endpoint), seaweed.url(prefix), read_only=True)
        cache = ChunkCache(256 << 20, ahead_bytes=ahead, ahead_workers=1)
        raw = raw_file(store, cache)
        busy = threading.Event()
        cache.ahead.fetch(("busy",), lambda: busy.wait(60))  # the decode-ahead pool's one thread
        try:
            assert raw.read(0, piece) == values[:piece].tobytes()  # starts the stream
            assert raw.read(piece, piece) == values[piece:2 * piece].tobytes()  # ahead of its decodes
        finally:
            busy.set()
        cache.ahead.settle(10)
        for offset in range(2 * piece, values.size, piece):  # the rest, the decodes ahead keeping up
            assert raw.read(offset, piece) == values[offset:offset + piece].tobytes()
            cache.ahead.settle(10)
        gets = [seen.path for seen in proxy.seen if seen.method == "GET" and "/c/" in seen.path]
    assert len(gets) <= shards * 2 + 1, gets  # each shard's index and the shard, the first read's chunks


def test_a_request_waits_for_a_span_no_longer_than_its_reads_deadline():
    """A request that joins a span another thread is reading waits until its own read's
    deadline (-o timeout), then EIO naming the shard and the bytes; the span's read goes on."""
    release, started = threading.Event(), threading.Event()

    def slow(r: Range) -> bytes:
        started.set()
        release.wait(30)
        return b"\0" * r.length

    spans = Spans(1 << 20, name="c/0")
    planner = Worker(spans.read, 0, 10, lambda: [(0, 10), (10, 10)], slow).start()
    assert started.wait(10)
    outcome: list[object] = []

    def request() -> None:
        try:
            with read_budget.reading("a.bin", 10, 10, 0.05, streaming=True):
                outcome.append(spans.covered(10, 10))
        except read_budget.ReadBudgetError as e:
            outcome.append(e)

    reader = Worker(request).start()
    assert reader.wait(10)
    release.set()
    assert planner.wait(10)
    planner.join()  # the span's read went on and ended without an error
    assert outcome and isinstance(outcome[0], read_budget.ReadBudgetError), outcome
    assert "c/0 bytes [0, 20)" in str(outcome[0]) and "a.bin" in str(outcome[0])
    assert spans.covered(10, 10) == b"\0" * 10  # the span arrived all the same, for whoever comes next


def test_a_reader_that_pauses_between_its_reads_takes_what_was_decoded_for_it(monkeypatch):
    """A reader that comes back to its stream after more than STALE seconds (a consumer that
    works on each piece; a loaded machine's stall) finds the chunks decoded for it: the walk its
    read starts made room for the chunks further on by dropping them as left behind, and the
    read fetched each of them again alone (over 100 GETs here, where a reader that keeps up
    makes one a shard)."""
    clock = Clock()
    monkeypatch.setattr(decode_ahead, "STALE", 1.0)
    monkeypatch.setattr(decode_ahead, "time", clock)
    values, store, cache = five_shards()
    ahead = WHOLE_SHARD_AHEAD
    raw = raw_file(store, cache)
    piece = 128 << 10
    for offset in range(0, values.size, piece):
        assert raw.read(offset, piece) == values[offset:offset + piece].tobytes()
        cache.ahead.settle(10)
        clock.now += 2 * decode_ahead.STALE  # the pause: every chunk decoded so far is as old as a gone reader's
    reads = [(key, r) for key, r in store.reads if key.startswith("c/")]
    assert_each_later_shard_whole_with_its_index(reads, ahead)
    assert [r for key, r in reads if key == "c/0"] == [Suffix(16 * SCALED_PER_SHARD + 4), Range(piece, ahead // 2 - piece)]


def test_a_reader_ahead_of_its_decodes_and_index_reads_still_reads_each_shard_whole_with_its_index():
    """The decode-ahead pool's one thread held busy while the stream starts: the second read's
    walk queues the index reads of the next shards and the decodes of the first shard's run, and
    the read plans the run's span itself. The stream then reads as when the decodes plan it: the
    first shard's index and its run, each later shard whole with its index."""
    values, store, cache = five_shards(workers=1)
    ahead = WHOLE_SHARD_AHEAD
    raw = raw_file(store, cache)
    busy, piece = threading.Event(), 128 << 10
    cache.ahead.fetch(("busy",), lambda: busy.wait(60))  # the pool's one thread
    try:
        assert raw.read(0, piece) == values[:piece].tobytes()  # starts the stream
        assert raw.read(piece, piece) == values[piece:2 * piece].tobytes()  # its walk's work all queued
        assert [key for key, _ in store.reads if key.startswith("c/") and key != "c/0"] == []  # none ran
    finally:
        busy.set()
    for offset in range(2 * piece, values.size, piece):
        cache.ahead.settle(10)
        assert raw.read(offset, piece) == values[offset:offset + piece].tobytes()
    reads = [(key, r) for key, r in store.reads if key.startswith("c/")]
    assert_each_later_shard_whole_with_its_index(reads, ahead)
    assert [r for key, r in reads if key == "c/0"] == [Suffix(16 * SCALED_PER_SHARD + 4), Range(piece, ahead // 2 - piece)]


def test_a_shards_index_is_known_only_once_the_shard_read_with_it_is_held(monkeypatch):
    """A decode ahead that finds the index known takes its chunk from the spans without the
    shard's lock: were the index known before the whole shard read with it is held, the decode
    planned a span of its own and read the shard again (once in 30 runs of this module beside
    two CPU burners, a later shard was read whole and then again)."""
    values, store = scaled_shards(5)
    cache = ChunkCache(256 << 20, ahead_bytes=2 * SCALED_INNER * SCALED_PER_SHARD, ahead_workers=1)
    source = open_array(store, "", parse_document(store.get("zarr.json"), "zarr.json"), cache).shard_view((1,)).source
    known_while_held, hold = [], Spans.hold

    def holding(spans, data, chunks):
        known_while_held.append(source.index_known())  # what another thread sees at this moment
        hold(spans, data, chunks)
    monkeypatch.setattr(Spans, "hold", holding)
    store.reads.clear()
    source.index_ahead()
    assert known_while_held == [False]
    assert source.read_ahead((5,)) == values[SCALED_INNER * (SCALED_PER_SHARD + 5):SCALED_INNER * (SCALED_PER_SHARD + 6)].tobytes()
    assert len(store.reads) == 1  # the shard with its index, the chunk from it
