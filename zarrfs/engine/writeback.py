"""Write-back: the flush that turns an Array's dirty chunks into stored values.

A flush takes the dirty chunks as its batch (take_batch) and encodes them without the lock,
on a small thread pool, so reads and writes go on meanwhile. Batch chunks are never changed in
place: a write to one starts a new dirty copy, which the next flush takes. Each new value is
staged beside its old one (_stage_batch), then all are published at once (_commit), every
touched chunk or shard replaced once; a shard is rebuilt from its view's encoded batch. When an
object store's conditional PUT finds another writer got there first, the chunks written here
only in part are merged with the stored ones and the flush is done again.

WriteBack is a component of Array (array.write_back): it holds the chunks written and not yet
stored (_dirty, _flushing, the shard views they touch, the written masks) and flushes them; the
array asks it for unflushed chunks when it reads and hands it the chunks it makes dirty. A
sharded array's write-back builds each shard from its shard view's own write-back.
"""

import logging
import math
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from typing import Protocol

import numpy as np

from zarrfs.codecs.base import ChunkSpec
from zarrfs.codecs.chain import CodecChain
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.chunk_sources import ChunkSource, ShardChunks, StoreChunks
from zarrfs.engine.written_masks import WrittenMasks, overlay
from zarrfs.errors import ConflictError, CorruptChunkError, StoreError, ZarrfsError
from zarrfs.geometry import Box, ChunkPart, ChunkShape, chunk_extent, chunk_origin, grid_shape
from zarrfs.stores.contract import Staged

log = logging.getLogger(__name__)

ENCODER_NICE = 10  # added to write-back threads' nice: they yield to request threads (see _yield_to_requests)
CONFLICT_RETRIES = 5  # flushes of one batch against writers that keep changing the same values


class ShardViewWriteBack(Protocol):
    """What a write-back asks of the write-back of one of its shard views (a WriteBack too)."""

    def take_batch(self, whole_only: bool = False) -> None: ...

    def wholly_dirty(self) -> bool: ...

    def built(self) -> bytes | None: ...

    def forget_index(self) -> None: ...

    def end_batch(self, committed: bool, stored: frozenset[str] = frozenset()) -> None: ...

    def merge_stored(self, keys: set[str] | None) -> None: ...

    def unstored(self) -> Iterator[tuple[Box, np.ndarray, np.ndarray | None]]: ...

    def holds_rows(self, start: int, stop: int) -> bool: ...

    def drop_from(self, first: int) -> set[tuple[int, ...]]: ...


class SharedState(Protocol):
    """array.Shared: the locks, the chunk cache, the dirty bytes of the array and its shard views."""

    name: str
    cache: ChunkCache
    lock: threading.RLock
    flush_lock: threading.Lock
    commit_lock: threading.Lock
    version: int
    dirty_nbytes: int


class WrittenArray(Protocol):
    """What a write-back asks of its Array (array.py), whose chunks it stores."""

    @property
    def shared(self) -> SharedState: ...

    @property
    def source(self) -> ChunkSource:
        """StoreChunks; a shard view's: its shard's ShardChunks."""

    @property
    def chain(self) -> CodecChain: ...

    @property
    def spec(self) -> ChunkSpec: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def chunk_shape(self) -> ChunkShape: ...

    @property
    def regular(self) -> bool: ...

    @property
    def cache_key(self) -> tuple: ...

    def spec_at(self, coords: tuple[int, ...]) -> ChunkSpec: ...

    def chain_at(self, coords: tuple[int, ...]) -> CodecChain: ...

    def decode(self, data: BytesLike | None, coords: tuple[int, ...]) -> np.ndarray | None: ...

    def stored(self, coords: tuple[int, ...]) -> bytes | None: ...

    def shard_write_back(self, coords: tuple[int, ...]) -> ShardViewWriteBack: ...


class WriteBack:
    """Flush, conflict merge and the unstored chunks of an Array and its shard views."""

    def __init__(self, array: WrittenArray):
        self.array = array
        # what an array is never changes: taken once, for the encoding and the store
        self.shared, self.source, self.chain, self.spec = array.shared, array.source, array.chain, array.spec
        self.shape, self.chunk_shape = array.shape, array.chunk_shape  # not cache_key: forget_stored renews it
        # the array's shape as its document stores it, and as the batch in flight was written for:
        # a growth along dimension 0 (growth.py) is stored with the chunks of the batch that made it
        self.stored_shape = self._batch_shape = array.shape
        # the shape the root's consolidated copy holds of the array, as far as this mount knows:
        # it follows stored_shape once the document holds it (consolidated_copy.py)
        self.copy_shape = array.shape
        self._deleted: set[tuple] = set()  # chunks (shards) to delete: wholly past a changed end
        self._deleting: set[tuple] = set()  # those the batch in flight deletes
        self._dirty: dict[tuple, np.ndarray] = {}
        self._flushing: dict[tuple, np.ndarray] = {}  # the batch a flush is encoding: read-only
        self._dirty_shards: set[tuple] = set()
        self._flushing_shards: set[tuple] = set()
        self._written_whole: set[tuple] = set()  # dirty chunks that no stored data went into
        # remote stores, which other machines write too: the elements written here (written_masks.py)
        self._written = WrittenMasks(self.spec.shape if array.regular else lambda c: array.spec_at(c).shape) \
            if self.source.capabilities.remote else None
        self._unmerged: set[str] = set()  # keys that met another writer and are not merged with it yet

    # what the array asks as it reads and writes (under shared.lock when it writes)

    def unflushed(self, coords: tuple[int, ...]) -> np.ndarray | None:
        """The chunk as written but not yet committed. _dirty is looked at first: a flush moves
        its chunks to _flushing before it empties _dirty, so a lock-free reader sees one."""
        chunk = self._dirty.get(coords)
        return self._flushing.get(coords) if chunk is None else chunk

    def dirty_chunk(self, coords: tuple[int, ...]) -> np.ndarray | None:
        """The chunk being written to, not yet taken by a flush."""
        return self._dirty.get(coords)

    def add_dirty(self, coords: tuple[int, ...], chunk: np.ndarray, complete: bool) -> None:
        """`chunk` is written to from now on; `complete`: wholly, with no stored data in it."""
        if complete:
            self._written_whole.add(coords)
        else:
            self._written_whole.discard(coords)
        self._dirty[coords] = chunk
        self._deleted.discard(coords)  # written after a shrink deleted it: stored, not deleted
        self.shared.dirty_nbytes += chunk.nbytes

    def mark_written(self, part: ChunkPart) -> None:
        """The elements of a ChunkPart were written here (remote stores merge by them)."""
        if self._written is not None:
            self._written.mark(part.coords, part.chunk_box, part.complete)

    def shard_written(self, coords: tuple[int, ...]) -> None:
        self._dirty_shards.add(coords)
        self._deleted.discard(coords)

    def holds_shard(self, coords: tuple[int, ...]) -> bool:
        """Shard `coords` has written chunks not stored yet: its view must be kept."""
        return coords in self._dirty_shards or coords in self._flushing_shards

    def _view(self, coords: tuple[int, ...]) -> ShardViewWriteBack:
        """The write-back of shard `coords`'s view."""
        return self.array.shard_write_back(coords)

    def flush(self, whole_only: bool = False) -> None:
        """Encode every dirty chunk and commit: each touched chunk or shard is replaced once.
        On failure the batch is dirty again, so a later flush retries it.

        whole_only leaves out shards not wholly dirty, which would have to be merged with their
        stored selves: early write-back while a writer is still filling them. Of a growing
        array, the shard row holding the stored end goes once it is filled, and nothing past
        a shard left out (_shards_taken); the root's consolidated copy of its shape waits for
        the next full flush (_copy_due).

        When another writer changed a value meanwhile (an object store's conditional PUT
        failed), the flush is done again: a shard is then merged anew with its stored self, so
        only the inner chunks written here replace theirs. After CONFLICT_RETRIES attempts the
        ConflictError is raised; the keys stay unmerged, and the next flush, whoever starts it,
        merges them before it writes anything (_flush_once)."""
        for attempt in range(CONFLICT_RETRIES):
            try:
                return self._flush_once(whole_only)
            except ConflictError as e:
                last = attempt + 1 == CONFLICT_RETRIES
                log.warning("%s: %s; %s", self.shared.name, e, "the next flush merges" if last else "merging and "
                            "writing again")
                if last:
                    raise

    def _merge_unmerged(self) -> None:
        """Under the flush lock, before a batch is taken: merge the keys a conflict left
        unmerged (its merge may have failed: a lost connection) and the chunks written in part
        whose version the store has forgotten, so that no PUT writes a stale chunk over another
        writer's values."""
        self._unmerged.update(self._versions_forgotten())
        if self._unmerged:
            self.merge_stored(set(self._unmerged))

    def _versions_forgotten(self) -> set[str]:
        """Keys of chunks written here only in part whose version, read when the write began,
        the store no longer remembers (it keeps a bounded number): their PUT would overwrite
        unconditionally whatever another writer stored since, so they are merged first."""
        if self._written is None:
            return set()
        known = self.source.version_known
        with self.shared.lock:  # writes mark the masks meanwhile
            partial = self._written.partial()
        return {self.source.key(coords) for coords, _ in partial if not known(coords)}

    def merge_stored(self, keys: set[str] | None) -> None:
        """After a conflict: each chunk written here only in part (of `keys`, or all of them)
        takes the elements it did not write from the chunk as stored now."""
        if self._written is not None:
            with self.shared.lock:  # writes mark the masks meanwhile
                partial = self._written.partial()
            for coords, _ in partial:
                if keys is None or self.source.key(coords) in keys:
                    stored = self.array.decode(self.array.stored(coords), coords)  # the new version, read whole
                    with self.shared.lock:
                        chunk, mask = self._dirty.get(coords), self._written.mask(coords)
                        if chunk is not None and mask is not None:  # still written only in part
                            overlay(stored, self.spec.fill_value, chunk, mask)
        for coords in list(self._dirty_shards):
            if keys is None or self.source.key(coords) in keys:
                self._view(coords).merge_stored(None)
        # merged: their next PUT builds on the version read here (a merge that raised keeps them,
        # lest a stale chunk be written over the other writer's values, conditionally on a
        # version some reader of this mount fetched meanwhile)
        self._unmerged.difference_update(keys or ())

    def _flush_once(self, whole_only: bool) -> None:
        with self.shared.flush_lock:  # no batch is in flight here: every dirty chunk is in _dirty
            self._merge_unmerged()
            with self.shared.lock:
                self.take_batch(whole_only)
                if not (self._flushing or self._flushing_shards or self._deleting or self._copy_due(whole_only)) \
                        and self._batch_shape == self.stored_shape:
                    return
            committed, stored = False, frozenset[str]()
            try:
                self._commit(self._stage_batch())
                committed = True
                if self._copy_due(whole_only):  # after the document (a failure leaves the batch stored)
                    self._follow_copy(self._stored_values())
            except StoreError as e:
                stored = frozenset(e.stored)  # stored all the same: not sent again
                if isinstance(e, ConflictError):
                    self._unmerged.update(e.keys)  # before the lock goes: no other flush may PUT them unmerged
                raise
            finally:
                with self.shared.lock:
                    self.end_batch(committed, stored)

    def _stage_batch(self) -> list[Staged]:
        """Encode the batch and write each new value beside its old one, in parallel."""
        pool = _encoder_pool()
        source = self._stored_values()
        jobs: list[Future[Staged]] = [pool.submit(self._stage_chunk, coords, chunk)
                                      for coords, chunk in self._flushing.items()]
        error: BaseException | None = None
        try:
            for coords in self._flushing_shards:  # inner chunks are encoded in parallel
                jobs.append(pool.submit(source.stage, coords, self._build_shard(coords)))
        except BaseException as e:
            error = e
        staged: list[Staged] = []
        try:
            staged += [source.stage(coords, None) for coords in self._deleting]
        except BaseException as e:
            error = error or e
        for job in jobs:
            try:
                staged.append(job.result())
            except BaseException as e:
                error = error or e
        if error is not None:
            source.discard(staged)
            raise error
        return staged

    def _stage_chunk(self, coords: tuple[int, ...], chunk: np.ndarray) -> Staged:
        return self._stored_values().stage(coords, self._encode(coords, chunk))

    def _stored_values(self) -> StoreChunks:
        """The array's own source, which stages and publishes: a shard view stages nothing (its
        shard is built whole, and staged by the array's write-back)."""
        if not isinstance(self.source, StoreChunks):
            raise ZarrfsError(f"{self.shared.name}: a shard view's write-back stages nothing")
        return self.source

    def _shard(self) -> ShardChunks:
        """A shard view's source: the shard it builds (built, forget_index)."""
        if not isinstance(self.source, ShardChunks):
            raise ZarrfsError(f"{self.shared.name}: only a shard view's write-back builds a shard")
        return self.source

    def _commit(self, staged: Sequence[Staged]) -> None:
        """Publish the staged values. Writers go on meanwhile (the batch is read-only, and
        readers find it in _flushing); a read that raced the change retries (see _chunk)."""
        source, shape = self._stored_values(), self._batch_shape
        with self.shared.commit_lock, ExitStack() as held:
            self.shared.version += 1  # odd: readers retry whatever they read meanwhile
            try:
                # a reader of the store sees the old array or the new one: growing, the records
                # are stored before the shape that shows them; shrinking, the shape that hides the
                # chunks goes first (zarr-python's resize does the same). The document is read
                # once, before either, and (a local store) other zarrfs processes store nothing
                # of it until the new shape is: no record goes where another writer's are. The
                # root's consolidated copy of the shape follows the document (consolidated_copy.py)
                try:
                    if shape != self.stored_shape:
                        held.enter_context(source.exclusive())
                    document = source.document_of(self.stored_shape) if shape != self.stored_shape else None
                    if document is not None and shape[:1] < self.stored_shape[:1]:
                        self._publish_shape(source, document, shape)
                    if self.copy_shape[:1] > self.stored_shape[:1]:  # shrunk: before the chunks go
                        self._follow_copy(source)
                except StoreError:  # no chunk of the batch is stored: its staged values go
                    source.discard(staged)
                    raise
                source.publish(staged)
                if document is not None and shape != self.stored_shape:
                    self._publish_shape(source, document, shape)
            finally:
                self._forget_shard_indices()  # stored shards may have changed, even on failure
                self.shared.version += 1

    def _publish_shape(self, source: StoreChunks, document: dict, shape: tuple[int, ...]) -> None:
        source.publish_shape(document, shape)
        self.stored_shape = shape

    @property
    def _copy_behind(self) -> bool:
        """The root's consolidated copy may hold another shape than the array's document."""
        return self.copy_shape != self.stored_shape and isinstance(self.source, StoreChunks) \
            and self.source.copy is not None

    def _copy_due(self, whole_only: bool) -> bool:
        """The copy is behind and this write-back is a full one: an early one (whole_only, every
        few MiB of a long append) leaves it to the next full one (fsync, close, the flusher's
        tick), as each rewrite costs the whole root document. A shrink's copy goes in _commit."""
        return self._copy_behind and not whole_only

    def _follow_copy(self, source: StoreChunks) -> None:
        """The consolidated copy takes the document's shape; on failure it is tried again by
        the next flush (the chunks and the document are stored: nothing waits on it)."""
        shape = self.stored_shape
        source.follow_copy()
        self.copy_shape = shape

    def take_batch(self, whole_only: bool = False) -> None:
        self._batch_shape = self.shape  # the batch's chunks hold what was written for this shape
        self._deleting, self._deleted = self._deleted, set()
        self._flushing, self._dirty = self._dirty, {}  # this order: see _unflushed
        shards = self._shards_taken() if whole_only else set(self._dirty_shards)
        self._flushing_shards, self._dirty_shards = shards, self._dirty_shards - shards
        for coords in self._flushing_shards:
            self._view(coords).take_batch()

    def _shards_taken(self) -> set[tuple[int, ...]]:
        """The shards an early write-back stores: those wholly dirty, and the shard row holding
        the stored end once every row of it past that end is written here (merged with its
        stored records once). Past the stored end, only shards the shape stored with the batch
        shows: the batch's shape reaches the first shard row left out (growth.py's rebase needs
        every record past the stored shape held here, never stored without the shape)."""
        taken = {c for c in self._dirty_shards if self._view(c).wholly_dirty()}
        stored, end = self.stored_shape[0] if self.stored_shape else 0, self.shape[0] if self.shape else 0
        rows = self.chunk_shape[0] if self.chunk_shape else 0
        if end <= stored or not isinstance(rows, int):  # no growth (a rectilinear grid never grows)
            return taken
        edge, inside = divmod(stored, rows)
        if inside and (edge + 1) * rows <= end:
            taken |= {c for c in self._dirty_shards if c[0] == edge and self._view(c).holds_rows(inside, rows)}
        cut = min((c[0] for c in self._dirty_shards - taken if c[0] >= edge), default=None)
        if cut is None:
            return taken
        self._batch_shape = (max(stored, min(end, cut * rows)), *self.shape[1:])
        return {c for c in taken if c[0] < cut}

    def wholly_dirty(self) -> bool:
        """Every chunk of this shard view is dirty: writing it back reads nothing stored."""
        return not self._dirty_shards and len(self._dirty) == math.prod(grid_shape(self.shape, self.chunk_shape))

    def _encode_batch(self) -> dict[tuple[int, ...], BytesLike | None]:
        """A shard view's batch, encoded: {inner chunk coords: bytes, or None to drop it}."""
        batch = list(self._flushing.items())
        updates = dict(zip(self._flushing, _encoder_pool().map(lambda item: self._encode(*item), batch), strict=False))
        for coords in self._flushing_shards:
            updates[coords] = self._build_shard(coords)
        return updates

    def _build_shard(self, coords: tuple[int, ...]) -> bytes | None:
        return self._view(coords).built()

    def built(self) -> bytes | None:
        """A shard view's new stored value: its batch encoded into the shard, None if it ends up empty."""
        shard = self._shard()
        stored = None
        partial = self._partial_in_batch()
        if partial:  # a remote shard with inner chunks written in part: merged with what the PUT builds on
            stored = shard.stored_chunks()  # read whole: the version the conditional PUT is on
            self._merge_batch(shard, stored, partial)
        return shard.build(self._encode_batch(), self._live_chunks(), stored)

    def _partial_in_batch(self) -> list[tuple[tuple[int, ...], np.ndarray]]:
        """(coords, mask) of the batch's chunks written here only in part (remote stores)."""
        if self._written is None:
            return []
        with self.shared.lock:
            return [(coords, mask) for coords, mask in self._written.partial() if coords in self._flushing]

    def _merge_batch(self, shard: ShardChunks, stored: Sequence[BytesLike | None],
                     partial: list[tuple[tuple[int, ...], np.ndarray]]) -> None:
        """The batch's chunks written here in part take their other elements from the shard as
        stored now (`stored`, its inner chunks): another machine may have written them since
        this mount read them, and the PUT is conditional on this version only. Each becomes a new array: a batch's
        chunks are never changed in place (readers may be copying from them)."""
        for coords, mask in partial:
            merged = self._flushing[coords].copy()
            overlay(self.array.decode(stored[shard.flat(coords)], coords), self.spec.fill_value, merged, mask)
            self._flushing[coords] = merged

    def _encode(self, coords: tuple[int, ...], chunk: np.ndarray) -> BytesLike | None:
        try:
            return self.array.chain_at(coords).encode_or_none(chunk)
        except CorruptChunkError as e:  # a shard that cannot be merged with its stored self
            raise CorruptChunkError(f"{self.shared.name}: chunk {self.source.key(coords)}: {e}") from None

    def _live_chunks(self) -> list[tuple[int, ...]]:
        return list(np.ndindex(*grid_shape(self.shape, self.chunk_shape)))

    def _forget_shard_indices(self) -> None:
        for coords in self._flushing_shards:
            self._view(coords).forget_index()

    def forget_index(self) -> None:
        """A shard view's shard was rewritten: its index, and those of shards inside it, are read again."""
        self._shard().forget_index()
        self._forget_shard_indices()

    def end_batch(self, committed: bool, stored: frozenset[str] = frozenset()) -> None:
        """Committed chunks become cached, but not those written whole: like chunks read whole,
        the kernel's page cache has their bytes. Uncommitted chunks are dirty again, unless
        rewritten since. `stored`: keys of a failed publish that were stored all the same, which
        count as committed (a shard's view whole)."""
        for coords, chunk in self._flushing.items():
            committed_here = committed or self.source.key(coords) in stored
            rewritten = coords in self._dirty
            if committed_here and not rewritten:
                if self._written is not None:
                    self._written.stored(coords)
                if coords not in self._written_whole:
                    self.shared.cache.put(self.array.cache_key + (coords,), chunk)
                self._written_whole.discard(coords)
            if committed_here or rewritten:
                self.shared.dirty_nbytes -= chunk.nbytes
            else:
                self._dirty[coords] = chunk
        self._flushing = {}
        if not committed:  # deleted again by the next flush, unless written since
            self._deleted |= {c for c in self._deleting if c not in self._dirty and c not in self._dirty_shards}
        self._deleting = set()
        for coords in self._flushing_shards:
            shard_committed = committed or self.source.key(coords) in stored
            self._view(coords).end_batch(shard_committed)
            if not shard_committed:
                self._dirty_shards.add(coords)
        self._flushing_shards = set()

    def unstored(self) -> Iterator[tuple[Box, np.ndarray, np.ndarray | None]]:
        """(box, values, mask) in this array's element coordinates for every chunk written and
        not stored: what a failed shutdown saves for recovery. `mask`, on a remote store for a
        chunk written in part, says which of `values` were written here (the others were read
        then, and a replay must not write them over another writer's); else None."""
        for coords, chunk in {**self._flushing, **self._dirty}.items():
            box = self._chunk_box(coords)
            inside = tuple(slice(0, s.stop - s.start) for s in box)
            mask = self._written.mask(coords) if self._written is not None else None
            yield box, chunk[inside], None if mask is None else mask[inside]
        for coords in self._dirty_shards | self._flushing_shards:
            origin = [s.start for s in self._chunk_box(coords)]
            for box, values, mask in self._view(coords).unstored():
                yield tuple(slice(o + s.start, o + s.stop) for o, s in zip(origin, box, strict=False)), values, mask

    def _chunk_box(self, coords: tuple[int, ...]) -> Box:
        """The elements of chunk `coords` that lie inside the array."""
        origin, extent = chunk_origin(self.chunk_shape, coords), chunk_extent(self.chunk_shape, coords)
        return tuple(slice(o, min(o + s, n)) for o, s, n in zip(origin, extent, self.shape, strict=False))

    @property
    def dirty(self) -> bool:
        """Some write is not committed yet (or is being committed), or a new shape."""
        return bool(self._dirty or self._dirty_shards or self._flushing or self._flushing_shards or self._deleted
                    or self._deleting) or self.shape != self.stored_shape

    # a changed shape (growth.py), under shared.lock

    def reshaped(self, shape: tuple[int, ...], stored: bool = False) -> None:
        """The array's shape is now `shape`: stored with the next flush; `stored`, a shard
        view's, clipped anew at the array's edge, which no document of its own holds."""
        self.shape = shape
        if stored:
            self.stored_shape = shape

    def drop_from(self, first: int) -> set[tuple[int, ...]]:
        """A shrink: what is written of chunks (shards) at index `first` or more along dimension
        0 is dropped, never stored. Returns those a flush is storing now, to delete after it."""
        self._drop({c for c in (*self._dirty, *self._dirty_shards) if c[0] >= first})
        return {c for c in (*self._flushing, *self._flushing_shards) if c[0] >= first}

    def delete(self, coords: set[tuple[int, ...]]) -> None:
        """Chunks (shards) wholly past a changed end: what is written of them is dropped, and the
        next flush deletes them from the store."""
        self._drop(coords)
        self._deleted |= coords

    def holds_rows(self, start: int, stop: int) -> bool:
        """Every chunk holding rows [start, stop) of dimension 0 is written here and not stored
        (nothing of them would be read from the store), and nothing waits to be deleted."""
        rows = self.chunk_shape[0]
        if self._deleted or not isinstance(rows, int):  # a rectilinear grid never grows
            return False
        grid = grid_shape(self.shape, self.chunk_shape)
        return all(self._holds((i, *rest), max(0, start - i * rows), min(rows, stop - i * rows))
                   for i in range(start // rows, -(-stop // rows)) for rest in np.ndindex(*grid[1:]))

    def _holds(self, coords: tuple[int, ...], start: int, stop: int) -> bool:
        """Rows [start, stop) of chunk `coords` are written here and not stored: the chunk is
        dirty, or it is a shard whose view holds those rows of its inner chunks."""
        if coords in self._dirty:
            return True
        return coords in self._dirty_shards and self._view(coords).holds_rows(start, stop)

    def unwrite_rows(self, coords: tuple[int, ...], first: int, stored: np.ndarray | None) -> None:
        """Dirty chunk `coords` from index `first` along dimension 0 holds `stored`'s values (the
        chunk as stored now; None: not stored, the fill value) and is no longer written there:
        a merge after a conflict takes another writer's values for them."""
        chunk = self._dirty[coords]
        chunk[first:] = self.spec.fill_value if stored is None else stored[first:]
        self._written_whole.discard(coords)  # stored values went into it
        if self._written is not None:
            self._written.forget_rows(coords, first)
            # and the elements not written here below `first` too: the conditional PUT is now
            # on the version read for `stored`, which may hold the other writer's changes of them
            if (mask := self._written.mask(coords)) is not None:
                overlay(stored, self.spec.fill_value, chunk, mask)

    def rebased(self, stored: tuple[int, ...]) -> None:
        """Another writer stored shape `stored`: the next flush's document check expects it."""
        self.stored_shape = stored

    def _drop(self, coords: set[tuple[int, ...]]) -> None:
        for c in coords:
            if self._written is not None:  # none of its elements is written here any more
                self._written.stored(c)
            chunk = self._dirty.pop(c, None)
            if chunk is not None:
                self.shared.dirty_nbytes -= chunk.nbytes
            if c in self._dirty_shards:  # its view's inner chunks go too, and the bytes they pinned
                self._view(c).drop_from(0)
                self._dirty_shards.discard(c)
            self._written_whole.discard(c)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _encoder_pool() -> ThreadPoolExecutor:
    """Threads that encode a flush's chunks in parallel (the codecs release the GIL) and write
    them out. Two per core: a thread waiting for its O_DIRECT write leaves its core to another.
    Made on first use, so that a daemon forks before any thread exists."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1), thread_name_prefix="encode",
                                       initializer=_yield_to_requests)
        return _pool


def _yield_to_requests() -> None:
    """Encoding is background work: a writer waits for each of its requests, and a request
    that waits for a core behind the encoders holds the writer up. When both want the same
    core, an encoder gets about a tenth of it."""
    try:
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + ENCODER_NICE))
    except OSError:
        pass
