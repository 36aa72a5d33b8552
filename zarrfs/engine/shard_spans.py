"""Spans: one ranged read for a run of a shard's inner chunks, shared by the decodes ahead of a
stream that want them.

On an object store each GET is a round trip and a request's own cost (CPU on both sides, and a
price per request on the clouds); a stream through a shard of 1 MiB inner chunks would make one
GET per inner chunk. Instead, a decode ahead that finds its inner chunk in no span reads a span:
the run of the shard its chunk belongs to, in one ranged GET. The shard's stored chunks are cut
into runs once per index (chunk_sources.stored_runs): chunks stored one after the other, at most
`span_bytes` from the run's first byte to its last and at most `span_chunks` of them, or the
whole shard where it fits in the budget (run_bounds: one GET a shard, as tensorstore). The
decodes of the run's other chunks, on other threads, wait for that read instead of making their
own. Runs are fixed by the index, not by the decode that comes first: decodes ahead start in any
order, and the chunk after a run's first one planning first still reads the run whole, so a
stream makes one GET per run whatever the order. (A stream that starts inside a run reads the
run from its start: at most the budget it does not want, once.)

Bounded: a shard holds at most `max_held` bytes of spans (the decode-ahead budget: what the
stream's decodes hold anyway, read earlier), a span at most half of that, in stored bytes and in
the bytes its chunks decode to (two in flight, so the stream does not wait at a run's end), or
all of it for a whole shard that fits (the next shard's span is then the one in flight), and at
most SPAN; a span is dropped once each of its chunks was taken or STALE seconds after its
read ended or a chunk was last taken from it (a stream slowed by a busy machine still takes
the rest of its run from it), and the oldest go first when there is no room (a chunk then is read alone). The
spans belong to one index: a shard whose index is read again forgets them.

A request reads the chunks no decode ahead was started for. A request that continues the stream
(read_budget.streaming) reads them as a decode ahead does: from the span that holds them, or in a
new span over their run. A reader that outruns its decodes ahead (on a busy machine their threads
start late) so joins the run's GET, or makes it for them, instead of fetching its own chunks
alone and the decodes the rest of the run after them (31 GETs where 13 did); a chunk of its
batch that a decode ahead took from the span while it waited is left to that decode, and a
decode ahead whose chunk such a request took gives up (taken()).
Any other request
takes a chunk a span holds from it (covered) and reads the others alone. A span taken whole, and
a chunk a request read alone, are remembered (their range, not their bytes) for STALE seconds,
and a new span leaves them out (the part of the run on this chunk's side of them). So no chunk
is fetched twice. A request waits for a span until its read's deadline (read_budget.wait).
"""

import enum
import threading
import time
from concurrent.futures import Future
from typing import Callable, Literal

from zarrfs.byte_ranges import Range
from zarrfs.engine import read_budget

# Bytes one ranged read covers at most: a whole 64 MiB shard, where the read-ahead budget holds two
# (issue #41: tensorstore reads a shard in one GET; spans of 8 MiB made 192 GETs a GiB).
SPAN = 64 << 20
STALE = 1.0  # seconds after its last use a span no decode came back to is dropped (its stream went away)
TAKEN = 256  # ranges taken or read otherwise that planning remembers, at most


class _NotCovered(enum.Enum):
    """covered()'s answer when no span holds the bytes (an enum, so that `is` narrows it)."""

    NOT_COVERED = enum.auto()


NOT_COVERED = _NotCovered.NOT_COVERED


class _Span:
    __slots__ = ("start", "stop", "future", "left", "read_at")

    def __init__(self, start: int, stop: int, chunks: set[int]):
        self.start, self.stop = start, stop
        self.future: Future[bytes | memoryview | None] = Future()
        # the offsets of its chunks not yet taken: a set, not a count, for a chunk is taken twice
        # where a request that outran the decodes ahead takes it and its decode ahead still does
        # (counted twice, the span went before its last chunks were taken, and those were read alone)
        self.left = chunks
        self.read_at: float | None = None  # monotonic time its read ended, or a chunk was last taken


class WholeShards:
    """Whether an array's shards fit the read-ahead budget with their index, learnt from each
    index read: where they do, a stream reads a shard's index with the whole shard, in one GET
    (ShardChunks._layout), as tensorstore reads a shard. The shards of one array are much alike;
    one that does not fit ends it for the array (a read that brought the budget's bytes for its
    index: at most once per shard whose index a stream reads before the first is known)."""

    def __init__(self) -> None:
        self.fit: bool | None = None  # None: no index read yet

    def learn(self, fits: bool) -> None:
        if self.fit is not False:
            self.fit = fits


class Spans:
    """The spans of one shard."""

    def __init__(self, max_held: int, chunk_nbytes: int = 1, name: str = "a shard"):
        """`max_held`: the decode-ahead budget; `chunk_nbytes`: an inner chunk decoded; `name`:
        the shard's, for messages. A span is at most half the budget in stored bytes and in
        decoded ones: the decodes of two spans fit in the budget, so the next span is in flight
        while the decodes of one take theirs."""
        self.name = name
        self.max_held = max_held
        self.span_bytes = min(SPAN, max_held // 2)
        self.span_chunks = max(1, max_held // 2 // max(1, chunk_nbytes))
        self.whole_bytes = min(SPAN, max_held)
        self.whole_chunks = max(1, max_held // max(1, chunk_nbytes))
        self._spans: list[_Span] = []  # oldest first
        self._taken: list[tuple[int, int, float]] = []  # (start, stop, when) of spans taken whole
        self._lock = threading.Lock()

    def run_bounds(self, stored_bytes: int, chunks: int) -> tuple[int, int]:
        """(bytes, chunks) one run of a shard whose `chunks` stored inner chunks hold
        `stored_bytes` may cover: the whole shard where it fits in the budget, in stored bytes and
        in the bytes its chunks decode to (one GET for the shard, as tensorstore reads it; the
        next shard's is in flight while this one's chunks are decoded); else half the budget, so
        that one run of the shard is fetched while the decodes take the other's."""
        if stored_bytes <= self.whole_bytes and chunks <= self.whole_chunks:
            return self.whole_bytes, self.whole_chunks
        return self.span_bytes, self.span_chunks

    def read(self, offset: int, nbytes: int, run: Callable[[], list[tuple[int, int]]],
             read_range: Callable[[Range], bytes | memoryview | None]) -> bytes | memoryview | None:
        """The bytes [offset, offset + nbytes) of the shard, from a span. `run()` lists the
        (offset, nbytes) of the chunks of this chunk's run, this one among them, in the order they
        are stored one after the other: a new span covers the run but for chunks read otherwise;
        `read_range(Range)` reads the shard (the version its index came from)."""
        with self._lock:
            span = self._covering(offset, nbytes)
            new = span is None
            if new:
                span = self._plan(offset, nbytes, run())
        if span is None:  # no room: read alone
            return read_range(Range(offset, nbytes))
        if new:
            self._fill(span, read_range)
        return self._take(span, offset, nbytes)

    def hold(self, data: bytes | memoryview, chunks: list[int]) -> None:
        """The whole shard, `data`, read with its index (ShardChunks._layout): a span over all of
        it, from which the decodes take the chunks stored at `chunks` (offsets)."""
        span = _Span(0, len(data), set(chunks))
        span.read_at = time.monotonic()
        span.future.set_result(data)
        with self._lock:
            while self._spans and sum(s.stop - s.start for s in self._spans) + len(data) > self.max_held:
                self._spans.pop(0)
            self._spans.append(span)

    def covered(self, offset: int, nbytes: int) -> memoryview | None | Literal[_NotCovered.NOT_COVERED]:
        """The bytes [offset, offset + nbytes) from a span that holds them (waiting for its read),
        for a read that is not a decode ahead; NOT_COVERED when no span does."""
        with self._lock:
            span = self._covering(offset, nbytes)
        return NOT_COVERED if span is None else self._take(span, offset, nbytes)

    def taken(self, offset: int, nbytes: int) -> bool:
        """Whether no span holds the chunk at `offset` and one did lately, from which it was
        taken: a request that continues a stream and finds it so leaves it to the decode ahead
        that took it while the request waited for the span (read() would read it alone)."""
        with self._lock:
            return self._covering(offset, nbytes) is None and self._held(offset, nbytes)

    def brought(self, ranges: list[tuple[int, int]]) -> None:
        """(offset, nbytes) of chunks read otherwise (a request's own reads): spans planned from
        now on stop before them, as before a span taken whole."""
        now = time.monotonic()
        with self._lock:
            self._taken.extend((offset, offset + nbytes, now) for offset, nbytes in ranges)

    def _take(self, span: _Span, offset: int, nbytes: int) -> memoryview | None:
        data = read_budget.wait(span.future, f"{self.name} bytes [{span.start}, {span.stop}), read for it")
        with self._lock:
            span.read_at = time.monotonic()  # in use: stale only STALE seconds after its last chunk was taken
            span.left.discard(offset)
            if not span.left and span in self._spans:
                self._spans.remove(span)
                self._taken.append((span.start, span.stop, time.monotonic()))
        if data is None:
            return None
        # A view, not a copy: the decode ahead that asked decodes it and lets it go, and the span's
        # memory goes with the last of its chunks.
        return memoryview(data)[offset - span.start:offset - span.start + nbytes]

    def forget(self) -> None:
        """The shard was rewritten, or its index read again: no span is valid any more."""
        with self._lock:
            self._spans.clear()
            self._taken.clear()

    def _covering(self, offset: int, nbytes: int) -> _Span | None:
        for span in self._spans:
            if span.start <= offset and offset + nbytes <= span.stop:
                return span
        return None

    def _plan(self, offset: int, nbytes: int, run: list[tuple[int, int]]) -> _Span | None:
        """A span over this chunk and the chunks of its run on either side of it that no span
        covers and nothing brought; None when even this chunk does not fit in what a shard may hold.
        The run is contiguous and within span_bytes and span_chunks already (stored_runs cut it)."""
        now = time.monotonic()
        self._taken = [t for t in self._taken[-TAKEN:] if now - t[2] <= STALE]
        here = next((i for i, (start, _) in enumerate(run) if start == offset), None)
        start, stop, chunks = offset, offset + nbytes, {offset}
        if here is not None:
            for before, size in reversed(run[:here]):
                if self._held(before, size):
                    break
                start = before
                chunks.add(before)
            for after, size in run[here + 1:]:
                if self._held(after, size):
                    break
                stop += size
                chunks.add(after)
        if stop - start > self.max_held:
            return None
        self._spans = [s for s in self._spans if s.read_at is None or now - s.read_at <= STALE]
        while self._spans and sum(s.stop - s.start for s in self._spans) + stop - start > self.max_held:
            self._spans.pop(0)  # its waiters hold it still; later readers read alone
        span = _Span(start, stop, chunks)
        self._spans.append(span)
        return span

    def _held(self, start: int, size: int) -> bool:
        """Whether the chunk at `start` is in a span, or was brought lately (no second fetch)."""
        return self._covering(start, size) is not None or any(a <= start < b for a, b, _ in self._taken)

    def _fill(self, span: _Span, read_range: Callable[[Range], bytes | memoryview | None]) -> None:
        try:
            data = read_range(Range(span.start, span.stop - span.start))
            span.read_at = time.monotonic()
            span.future.set_result(data)
        except BaseException as e:  # every waiter gets the error, and the span goes
            with self._lock:
                if span in self._spans:
                    self._spans.remove(span)
            span.future.set_exception(e)
