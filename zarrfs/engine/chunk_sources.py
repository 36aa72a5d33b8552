"""Where an Array's chunks come from: a store (StoreChunks), or a shard (ShardChunks), which is
itself a source of inner chunks over a value of the source around it, so nested sharding needs
no special code. Both carry the capabilities of the store beneath them (stores/contract.py).
"""

import bisect
import errno
import logging
import math
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Callable, Protocol

import numpy as np

from zarrfs.byte_ranges import ByteRange, Range, Suffix
from zarrfs.codecs.chain import ShardingCodec
from zarrfs.codecs.shard_format import EMPTY
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.engine import read_budget
from zarrfs.engine.consolidated_copy import ConsolidatedCopy
from zarrfs.engine.shard_spans import NOT_COVERED, Spans, WholeShards
from zarrfs.errors import CorruptChunkError, MetadataError, StoreError, ValueChangedError
from zarrfs.format.v3 import ArrayMetadata, dump_document, load_document
from zarrfs.geometry import flat_index
from zarrfs.stores import bounded_get
from zarrfs.stores.contract import Capabilities, Staged, Store

log = logging.getLogger(__name__)
SPAN_CHUNKS = 1024  # inner chunks one span may cover: small chunks coalesce too, within bounded work
Runs = tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]  # (index, starts, sizes, run ids) in stored order

Encoded = bytes | memoryview  # a stored chunk's bytes: a view where they are part of a larger read (a span)
Fetched = dict[tuple[int, ...], Encoded | None]  # read_many's: coords -> encoded bytes, None: not stored


class ChunkSource(Protocol):
    """What an Array asks of where its chunks are."""

    @property
    def capabilities(self) -> Capabilities:
        """The store's (read-only: StoreChunks hands on its store's)."""

    def key(self, coords: tuple[int, ...]) -> str: ...

    def read(self, coords: tuple[int, ...], byte_range: ByteRange = None) -> Encoded | None: ...

    def read_many(self, coords_list: list[tuple[int, ...]], max_bytes: int) -> Fetched: ...

    def read_ahead(self, coords: tuple[int, ...]) -> Encoded | None:
        """As read(coords), for a decode ahead of a stream: it may fetch the chunks stored after
        this one with it (shard_spans.py)."""

    def read_versioned(self, coords: tuple[int, ...], byte_range: ByteRange = None,
                       expect: object = None) -> tuple[Encoded | None, object]:
        """(as read(), the version of the stored value read); see Store.get_versioned."""

    def version_known(self, coords: tuple[int, ...]) -> bool: ...

    def refresh(self, changed: bool = False) -> bool:
        """Forget what is kept of the stored layout; True when that may change what a read of a
        chunk returns (a shard's index on a store other machines write, or `changed`: a read
        found the stored value replaced)."""


class ShapeChangedError(StoreError):
    """The array's document holds another shape than the one this writer stored: another writer
    resized the array. `found`: the shape stored now (None: no document, or no shape in it);
    `expected`: the one the writer checked for, its stored shape then (None: not said)."""

    def __init__(self, message: str, found: tuple[int, ...] | None, expected: tuple[int, ...] | None = None):
        super().__init__(message, errno.EIO)
        self.found, self.expected = found, expected


class StoreChunks:
    """The chunks of an array stored as values of a store, named by the chunk key encoding."""

    def __init__(self, store: Store, path: str, meta: ArrayMetadata, document_key: str, limit: int | None = None,
                 copy: ConsolidatedCopy | None = None):
        self.store = store
        self.path = path
        self.prefix = f"{path}/" if path else ""
        self.encoding = meta.chunk_key_encoding
        self.document_key = document_key  # zarr.json or .zarray: its shape changes as the array grows
        # the most bytes a stored chunk can hold (CodecChain.stored_limit): a server that sends
        # more for one chunk is refused before its bytes are taken (Store contract)
        self.limit = limit
        # the root's consolidated metadata, whose entry of the array follows its document's shape
        # (consolidated_copy.py); None where the hierarchy has none
        self.copy = copy

    def key(self, coords: tuple[int, ...]) -> str:
        return self.prefix + self.encoding.key(coords)

    def read(self, coords: tuple[int, ...], byte_range: ByteRange = None) -> bytes | None:
        read_budget.check_deadline(self.key(coords))
        data = self.store.get_versioned(self.key(coords), byte_range, limit=self.limit)[0]  # bytes-like: no copy
        if log.isEnabledFor(logging.DEBUG):
            log.debug("store read %s %s -> %s", self.key(coords), tuple(byte_range) if byte_range else "whole",
                      "not stored" if data is None else f"{len(data)} bytes")
        return data

    def read_ahead(self, coords: tuple[int, ...]) -> bytes | None:
        """Each chunk is a value of its own: read alone (decode-ahead reads many at once)."""
        return self.read(coords)

    @property
    def capabilities(self) -> Capabilities:
        return self.store.capabilities

    def read_many(self, coords_list: list[tuple[int, ...]], max_bytes: int) -> Fetched:
        """{coords: bytes, or None if not stored} for the first chunks, fetched concurrently (see
        batched_fetch.py): as many as fit in max_bytes at the most each may hold (self.limit),
        whatever their servers send; the others are read one by one."""
        if self.limit:
            coords_list = coords_list[:max(1, max_bytes // self.limit)]
        keys = {self.key(coords): coords for coords in coords_list}
        if keys:
            read_budget.check_deadline(next(iter(keys)))
        return {keys[key]: data for key, data in self.store.get_many(list(keys), self.limit).items()}

    def read_ranges(self, coords: tuple[int, ...], ranges: list[Range], expect: object = None) -> list[bytes] | None:
        read_budget.check_deadline(self.key(coords))
        return self.store.get_ranges(self.key(coords), ranges, expect)

    def read_versioned(self, coords: tuple[int, ...], byte_range: ByteRange = None,
                       expect: object = None) -> tuple[bytes | None, object]:
        """(as read(), the version read); with `expect`, from that version or ValueChangedError."""
        read_budget.check_deadline(self.key(coords))
        return self.store.get_versioned(self.key(coords), byte_range, expect, limit=self.limit)

    def version_known(self, coords: tuple[int, ...]) -> bool:
        """Whether the store remembers the version of the chunk that a conditional PUT needs
        (object stores; a local store needs none)."""
        return self.store.version_known(self.key(coords))

    def refresh(self, changed: bool = False) -> bool:
        """Nothing is kept of stored values here: a read gets each chunk as stored now."""
        return False

    def stage(self, coords: tuple[int, ...], data: BytesLike | None) -> Staged:
        return self.store.stage(self.key(coords), data)

    def stored_keys(self) -> Iterator[str] | None:
        """The keys, relative to the array, of every value stored under it (its chunks and
        documents), from the store's listing; None where the store has none (HTTP)."""
        if not self.store.capabilities.listing:
            return None
        return (relative for relative, _ in self.store.files(self.prefix.rstrip("/")))

    def rows_are_directories(self, ndim: int) -> bool:
        """Whether the chunks of one index along dimension 0 are the values below one key
        prefix ("c/5/..."), which row_keys lists alone: with separator "/" and more than one
        dimension."""
        return ndim > 1 and self.encoding.separator == "/"

    def row_keys(self, row: int) -> Iterator[str]:
        """The keys, relative to the array, of the values stored below chunk row `row` (see
        rows_are_directories), from a listing of that row alone."""
        below = self.encoding.key((row,))
        return (f"{below}/{relative}" for relative, _ in self.store.files(self.prefix + below))

    def is_stored(self, coords: tuple[int, ...]) -> bool:
        """Whether the chunk is stored, asked of the store alone (a stat; a HEAD on an object store)."""
        found = self.store.stat(self.key(coords))
        return found is not None and stat.S_ISREG(found.st_mode)

    def publish(self, staged: Sequence[Staged]) -> None:
        self.store.publish(staged)

    def discard(self, staged: Sequence[Staged]) -> None:
        self.store.discard(staged)

    def publish_shape(self, document: dict, shape: tuple[int, ...]) -> None:
        """Replace the array's document (zarr.json, .zarray) by `document` (document_of's) with
        `shape`, every other member kept, as zarr-python's resize writes it; one atomic
        replacement, conditional on an object store on the version document_of read."""
        self.store.set(self.document_key, dump_document({**document, "shape": list(shape)}))

    def exclusive(self) -> AbstractContextManager[None]:
        """The array's document held against other zarrfs processes' writes (Store.exclusive):
        a growth's look at the stored shape, its chunks and its new shape are one step."""
        return self.store.exclusive(self.document_key)

    def follow_copy(self) -> None:
        """The consolidated copy's entry of the array takes the shape its document holds now
        (StoreError naming the copy when it cannot); nothing where the hierarchy has no copy."""
        if self.copy is not None:
            self.copy.follow(self.path, self.document_key)

    def document_of(self, stored: tuple[int, ...]) -> dict:
        """The array's document as stored now, checked to hold shape `stored` (StoreError
        otherwise: another writer resized the array, and rows written for the shape this
        mount knows would land on its records). A document that is no JSON object raises
        MetadataError naming it; either way nothing of the batch is stored."""
        raw = self.store.get_versioned(self.document_key, limit=bounded_get.DOCUMENT_LIMIT)[0]
        try:
            document = None if raw is None else load_document(bytes(raw), self.document_key)
        except MetadataError as e:
            raise MetadataError(f"{e}: the new shape is not stored") from None
        if document is None or document.get("shape") != list(stored):
            found = None if document is None else document.get("shape")
            shape = tuple(found) if isinstance(found, list) and all(type(n) is int and n >= 0 for n in found) else None
            raise ShapeChangedError(f"{self.document_key}: shape {found} where this mount stored {list(stored)} "
                                    f"(another writer changed the array)", shape, tuple(stored))
        return document


class ShardChunks:
    """One shard as a chunk source for an Array over its inner chunk grid.

    `codec` is the ShardingCodec; `read_value(byte_range, expect)` returns (the shard's bytes or a
    range of them, None if the shard does not exist; the version read), as Store.get_versioned.
    The index is read once and kept with its version, and every later read of the shard asks for
    that version: bytes of a shard another writer replaced never meet an index of the old one
    (ValueChangedError, and the index is read again).
    """

    def __init__(self, read_value: Callable[..., tuple[Encoded | None, object]], codec: ShardingCodec, key: str,
                 read_ranges: Callable[..., list[bytes] | None] | None = None,
                 capabilities: Capabilities | None = None, spans_held: int = 0, chunk_nbytes: int = 1,
                 whole: WholeShards | None = None):
        self.read_value = read_value
        self.read_ranges = read_ranges  # several ranges of the shard in one call (batched_fetch.py)
        # remote: written by other machines too (its writers keep written masks); metadata_ttl:
        # another machine may rewrite the shard, so its index is read again after that long
        around = capabilities or Capabilities()
        self.capabilities = replace(around, listing=False, batched_reads=around.batched_reads and read_ranges is not None)
        self.codec = codec
        self.shard_key = key
        self._index: np.ndarray | None = None
        self._version: object = None  # the shard's version the index was read from
        self._runs: Runs | None = None  # the index's stored chunks cut into runs (_run_of)
        self.spans = Spans(spans_held, chunk_nbytes, key)  # runs of inner chunks read together ahead of a stream
        self.whole = whole or WholeShards()  # whether the array's shards fit the budget: read whole with the index
        self._loaded = False
        self._loaded_at = 0.0
        self._lock = threading.Lock()  # decode-ahead threads start on a shard's inner chunks together

    def key(self, coords: tuple[int, ...]) -> str:
        return f"{self.shard_key} inner chunk {list(coords)}"

    def version_known(self, coords: tuple[int, ...]) -> bool:
        """Always: an inner chunk is written with its shard, whose version the outer source keeps."""
        return True

    def refresh(self, changed: bool = False) -> bool:
        """Another machine may have rewritten the shard since its index was read (`changed`: a
        read found it replaced): read it again."""
        if not self.capabilities.remote and not changed:
            return False
        self.forget_index()
        return True

    def index(self) -> np.ndarray | None:
        """The (n, 2) index, None when the shard does not exist."""
        return self._layout()[0]

    def index_ahead(self) -> None:
        """The index, read for a stream's decodes ahead (Array.read_indexes_ahead): with the
        whole shard where the array's shards fit the read-ahead budget."""
        self._layout(streamed=True)

    def _layout(self, streamed: bool = False) -> tuple[np.ndarray | None, object]:
        """(the index, the shard's version it was read from), read once whichever thread comes
        first. `streamed`: for a stream, which reads the shard whole where it fits the budget
        and the array's shards read so far did: one GET for the index and the chunks (a span)."""
        if not self._fresh():
            with self._lock:
                if not self._fresh():
                    size = self.codec.index_nbytes
                    if size is None:  # ShardingCodec refuses index_codecs without a fixed size when it is made
                        raise MetadataError(f"{self.shard_key}: the shard index has no fixed size")
                    whole = streamed and not self._loaded and self._spanned() and self._fits()
                    raw, version, shard = self._read_index(size, whole)
                    self._index = None if raw is None else self.codec.decode_index(raw)
                    self._version = version
                    if self._index is not None:
                        stored = self._index[self._index[:, 0] != EMPTY]
                        self.whole.learn(int(stored[:, 1].sum()) + size <= self.spans.whole_bytes)
                        if shard is not None and len(stored):
                            self.spans.hold(shard, stored[:, 0].tolist())
                    # known only now: a decode that found it known before the shard was held planned
                    # a span of its own, and read the shard a second time (a test met it under load)
                    self._loaded_at = time.monotonic()
                    self._loaded = True
        return self._index, self._version

    def _fits(self) -> bool:
        """Whether this shard likely fits the read-ahead budget with its index: as the array's
        shards read so far did; before any, where its chunks decoded fit (compressed, they are
        rarely more)."""
        if self.whole.fit is not None:
            return self.whole.fit
        return bool(math.prod(self.codec.chunks_per_shard) <= self.spans.whole_chunks)

    def _read_index(self, size: int, whole: bool) -> tuple[Encoded | None, object, Encoded | None]:
        """(the index's bytes, the version read, the whole shard or None). `whole`: the read asks
        for one byte more than the budget, from the index's end of the shard: a shard that fits
        comes whole (a suffix longer than a value is all of it); of a longer one, only the index
        is kept (the index a copy: a view would hold the whole read)."""
        start = self.codec.index_location == "start"
        most = self.spans.whole_bytes + 1 if whole else size
        raw, version = self.read_value(Range(0, most) if start else Suffix(most))
        if raw is None or not whole:
            return raw, version, None
        index = bytes(raw[:size] if start else raw[-size:])
        return index, version, (raw if len(raw) < most else None)

    def index_known(self) -> bool:
        """Whether index() would answer without reading the store."""
        return self._fresh()

    def _fresh(self) -> bool:
        ttl = self.capabilities.metadata_ttl
        return self._loaded and (ttl is None or time.monotonic() - self._loaded_at <= ttl)

    def forget_index(self) -> None:
        """The shard was rewritten: read its index again next time."""
        self._loaded = False
        self._index = self._version = None
        self.spans.forget()

    def stored_chunks(self) -> Sequence[BytesLike | None]:
        """The shard as stored, read whole: its encoded inner chunks in flat order (None for an
        empty one, all None when the shard is not stored)."""
        old, _ = self.read_value(None)
        return [None] * math.prod(self.codec.chunks_per_shard) if old is None else self.codec.split(old)

    def flat(self, coords: tuple[int, ...]) -> int:
        """The position of inner chunk `coords` in the flat order of the index."""
        return flat_index(coords, self.codec.chunks_per_shard)

    def _entry(self, coords: tuple[int, ...], streamed: bool = False) -> tuple[np.ndarray, object, int, int] | None:
        """(index, version, offset, nbytes) of a stored inner chunk; None when it is empty or the
        shard is not stored. `streamed`: for a stream (_layout)."""
        index, version = self._layout(streamed)
        if index is None:
            return None
        offset, nbytes = (int(v) for v in index[self.flat(coords)])
        return None if offset == EMPTY else (index, version, offset, nbytes)

    @staticmethod
    def _checked(data: Encoded | None, length: int, offset: int, nbytes: int) -> Encoded:
        if data is None or len(data) != length:
            raise CorruptChunkError(f"truncated shard: index entry [{offset}, {offset + nbytes}) points "
                                    f"outside the shard")
        return data

    def read(self, coords: tuple[int, ...], byte_range: ByteRange = None) -> Encoded | None:
        """The encoded inner chunk (or a range of it), None when it is empty."""
        entry = self._entry(coords, read_budget.streaming())
        if entry is None:
            return None
        _, version, offset, nbytes = entry
        if isinstance(byte_range, Suffix):
            length = min(byte_range.length, nbytes)
            start = offset + nbytes - length
        elif isinstance(byte_range, Range):
            start = offset + min(byte_range.start, nbytes)
            length = max(0, min(byte_range.length, nbytes - byte_range.start))
        else:
            start, length = offset, nbytes
        if self._spanned() and length == nbytes:  # a span may hold it; else the spans learn it was read
            streamed = read_budget.streaming()  # a stream's request reads as its decodes ahead
            data = self._from_run(*entry) if streamed else self.spans.covered(offset, nbytes)
            if data is not NOT_COVERED:
                return self._checked(data, nbytes, offset, nbytes)
            self.spans.brought([(offset, nbytes)])
        return self._checked(self.read_value(Range(start, length), version)[0], length, offset, nbytes)

    def _spanned(self) -> bool:
        """Whether decodes ahead read runs of inner chunks here (shard_spans.py)."""
        return self.capabilities.remote and bool(self.spans.span_bytes)

    def read_versioned(self, coords: tuple[int, ...], byte_range: ByteRange = None,
                       expect: object = None) -> tuple[Encoded | None, object]:
        """For a shard nested in an inner chunk: its bytes, with no version of their own (this
        shard's reads already ask for this shard's version)."""
        return self.read(coords, byte_range), None

    def read_ahead(self, coords: tuple[int, ...]) -> Encoded | None:
        """The encoded inner chunk for a decode ahead of a stream. Where each request is a round
        trip, it comes in one ranged read with the other inner chunks of its run (shard_spans.py),
        which the decodes of those then take."""
        if not self._spanned():
            return self.read(coords)
        entry = self._entry(coords, streamed=True)
        if entry is None:
            return None
        _, _, offset, nbytes = entry
        if self.spans.taken(offset, nbytes):  # a request that outran this decode took it: nothing left to do
            return None
        return self._checked(self._from_run(*entry), nbytes, offset, nbytes)

    def _from_run(self, index: np.ndarray, version: object, offset: int, nbytes: int) -> Encoded | None:
        """The stored inner chunk at `offset`, from the span that holds it or a new one over its
        run (shard_spans.py), read from the shard's version `version`."""
        return self.spans.read(offset, nbytes, lambda: self._run_of(index, offset),
                               lambda r: self.read_value(r, version)[0])

    def _run_of(self, index: np.ndarray, offset: int) -> list[tuple[int, int]]:
        """(offset, nbytes) of the stored inner chunks of the run the one at `offset` belongs to,
        in the order they are stored (shard_spans.py); the runs are cut once per index."""
        if self._runs is None or self._runs[0] is not index:
            stored = index[index[:, 0] != EMPTY, 1]
            bounds = self.spans.run_bounds(int(stored.sum()), len(stored))
            self._runs = (index, *stored_runs(index, *bounds))
        return run_at(*self._runs[1:], offset)

    def read_many(self, coords_list: list[tuple[int, ...]], max_bytes: int) -> Fetched:
        """{coords: encoded bytes, or None if empty} for inner chunks, up to max_bytes of them,
        from one ranged read of several ranges. Entries that do not fit the shard are left out:
        read one by one, they raise the precise error. None of them when the shard changed since
        its index was read: read one by one, they read it again."""
        index, version = self._layout(read_budget.streaming())
        if index is None:
            return {coords: None for coords in coords_list}
        found: Fetched = {}
        wanted: list[tuple[tuple[int, ...], int, int]] = []
        total = 0
        streamed = self._spanned() and read_budget.streaming()  # a stream's request reads as its decodes ahead
        for coords in coords_list:
            offset, nbytes = (int(v) for v in index[self.flat(coords)])
            if offset == EMPTY:
                found[coords] = None
            elif streamed and self.spans.taken(offset, nbytes):
                continue  # a decode ahead took it while this request waited: read one by one, it is found decoded
            elif streamed:
                try:
                    data = self._from_run(index, version, offset, nbytes)
                except ValueChangedError:
                    return {}  # read one by one, they read the index again
                if data is not None and len(data) == nbytes:  # else read alone: it raises the precise error
                    found[coords] = data
            elif self._spanned() and (covered := self.spans.covered(offset, nbytes)) is not NOT_COVERED:
                if covered is not None and len(covered) == nbytes:  # else read alone: it raises the precise error
                    found[coords] = covered
            elif total + nbytes <= max_bytes:
                total += nbytes
                wanted.append((coords, offset, nbytes))
        if wanted and self._spanned():
            self.spans.brought([(offset, nbytes) for _, offset, nbytes in wanted])
        if wanted and self.read_ranges is not None:  # it is where capabilities.batched_reads says so
            try:
                values = self.read_ranges([Range(offset, nbytes) for _, offset, nbytes in wanted], version)
            except ValueChangedError:
                return {}
            for (coords, _, nbytes), value in zip(wanted, values or (), strict=False):
                if len(value) == nbytes:
                    found[coords] = value
        return found

    def build(self, updates: dict[tuple[int, ...], BytesLike | None], live: list[tuple[int, ...]],
              stored: Sequence[BytesLike | None] | None = None) -> bytes | None:
        """The new shard with `updates` applied, None if it ends up empty.

        `live` lists the inner chunks that lie inside the array; others are dropped. The old
        shard is read (once, whole) only if some live inner chunk is not being replaced, unless
        the caller has read it already: `stored` (stored_chunks()).
        """
        if stored is None and any(c not in updates for c in live):
            stored = self.stored_chunks()
        chunks: list[BytesLike | None] = list(stored) if stored is not None else [None] * math.prod(self.codec.chunks_per_shard)
        for coords, data in updates.items():
            chunks[self.flat(coords)] = data
        live_flat = {self.flat(c) for c in live}
        return self.codec.assemble([c if i in live_flat else None for i, c in enumerate(chunks)])


def stored_runs(index: np.ndarray, span_bytes: int, span_chunks: int = SPAN_CHUNKS) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """A shard's stored inner chunks in the order they are stored, cut into runs: (starts, sizes,
    run id of each). A run is chunks stored one right after the other, at most span_bytes from
    its first byte to its last (a longer chunk is a run alone) and at most span_chunks (and
    SPAN_CHUNKS) of them.
    Fixed by the index alone: every decode of a run plans the same span."""
    stored = np.flatnonzero(index[:, 0] != EMPTY)
    order = stored[np.argsort(index[stored, 0], kind="stable")]
    starts, sizes = index[order, 0], index[order, 1]
    ids: list[int] = []
    run, first, end, count, most = -1, 0, None, 0, min(span_chunks, SPAN_CHUNKS)
    for start, size in zip(starts.tolist(), sizes.tolist(), strict=True):  # once per index read
        if start != end or start + size - first > span_bytes or count == most:
            run, first, count = run + 1, start, 0
        ids.append(run)
        end, count = start + size, count + 1
    return starts, sizes, ids


def run_at(starts: np.ndarray, sizes: np.ndarray, ids: list[int], offset: int) -> list[tuple[int, int]]:
    """(offset, nbytes) of the chunks of the run (stored_runs') that the chunk stored at `offset`
    belongs to, in stored order; [] when no chunk is stored there."""
    i = int(np.searchsorted(starts, offset))
    if i == len(starts) or int(starts[i]) != offset:
        return []
    lo, hi = bisect.bisect_left(ids, ids[i]), bisect.bisect_right(ids, ids[i])
    return list(zip(starts[lo:hi].tolist(), sizes[lo:hi].tolist(), strict=True))
