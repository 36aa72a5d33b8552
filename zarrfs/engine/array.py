"""Array: read and write boxes of a chunked array, decoding and re-encoding only touched chunks.

A sharded array (codecs = [sharding_indexed]) sees each shard as an Array of its own over
ShardChunks, so nested sharding needs no special code. Dirty chunks are kept decoded, pinned
outside the cache, until flush() encodes them and commits every touched shard once: the
write-back, a component (array.write_back, writeback.py).
"""

import functools
import itertools
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from zarrfs.codecs.chain import ChunkSpec, CodecChain
from zarrfs.engine import batched_fetch as batchread
from zarrfs.engine import stored_parts
from zarrfs.engine.buffers import free, scratch
from zarrfs.engine.chunk_cache import MISSING, ChunkCache
from zarrfs.engine.chunk_sources import ChunkSource, ShardChunks, StoreChunks
from zarrfs.engine.consolidated_copy import ConsolidatedCopy
from zarrfs.engine.decodes_in_progress import NOT_SHARED
from zarrfs.engine.shard_spans import WholeShards
from zarrfs.engine.writeback import WriteBack
from zarrfs.errors import CorruptChunkError, StoreError, ValueChangedError
from zarrfs.format.v3 import ArrayMetadata
from zarrfs.geometry import (
    Box,
    box_shape,
    chunk_extent,
    chunk_origin,
    chunk_parts,
    chunks_spanned,
    flat_index,
    largest_chunk,
    regular,
)
from zarrfs.stores.contract import Capabilities, Store

log = logging.getLogger(__name__)

MAX_SHARD_VIEWS = 4096  # clean shard views kept (each holds its decoded index)
CHANGED_RETRIES = 3  # reads of a chunk that find its shard replaced again and again before giving up


@dataclass
class Shared:
    """State shared by an array and all its shard views."""

    name: str
    cache: ChunkCache
    lock: threading.RLock = field(default_factory=threading.RLock)
    flush_lock: threading.Lock = field(default_factory=threading.Lock)  # one flush at a time
    commit_lock: threading.Lock = field(default_factory=threading.Lock)  # held while stored values change
    version: int = 0  # bumped on every commit, so a read racing a flush caches nothing stale
    dirty_nbytes: int = 0  # decoded bytes pinned by dirty chunks and by the flush in progress


class Array:
    def __init__(self, shape, chunk_shape, chain: CodecChain, source: ChunkSource, shared: Shared, cache_key: tuple):
        self.shape = tuple(shape)
        self.chunk_shape = tuple(chunk_shape)
        self.chain = chain
        self.spec: ChunkSpec = chain.spec
        self.source = source
        self.shared = shared
        self.cache_key = cache_key
        self.sharding = chain.sharding
        self.regular = regular(self.chunk_shape)
        self._chains: dict[tuple, CodecChain] = {}  # rectilinear grids: chunk shape -> its chain
        self._shards: OrderedDict[tuple, Array] = OrderedDict()
        self._whole_shards = WholeShards()  # whether its shards fit the read-ahead budget (shard_spans.py)
        self.write_back = WriteBack(self)  # the chunks written and not yet stored, and their flush
        # a store where each request is a round trip: a read's chunks are fetched together (batched_fetch.py)
        self._batched = not self.sharding and source.capabilities.batched_reads

    @functools.cached_property
    def leaf_nbytes(self) -> int:
        """Decoded bytes of one chunk, or of one inner chunk when sharded: what a decode makes."""
        return self._leaf_chain.spec.nbytes

    @functools.cached_property
    def _leaf_chain(self) -> CodecChain:
        chain = self.chain
        while chain.sharding:
            chain = chain.sharding.inner_chain
        return chain

    @property
    def dtype(self) -> np.dtype:
        return self.spec.data_type.numpy

    # the write-back (writeback.py)

    def flush(self, whole_only: bool = False) -> None:
        """Store every written chunk (see WriteBack.flush)."""
        self.write_back.flush(whole_only)

    @property
    def dirty(self) -> bool:
        """Some write is not committed yet (or is being committed)."""
        return self.write_back.dirty

    def unstored(self):
        """(box, values, mask) of every chunk written and not stored (see WriteBack.unstored)."""
        return self.write_back.unstored()

    def chain_at(self, coords) -> CodecChain:
        """The chain of chunk `coords`: the array's, or on a rectilinear grid its shape's."""
        if self.regular:
            return self.chain
        shape = chunk_extent(self.chunk_shape, coords)
        chain = self._chains.get(shape)
        if chain is None:
            chain = self._chains[shape] = self.chain if shape == self.spec.shape else self.chain.rebound(shape)
        return chain

    def spec_at(self, coords) -> ChunkSpec:
        return self.chain_at(coords).spec

    # reads

    def read(self, box: Box) -> np.ndarray:
        out = np.empty(box_shape(box), self.dtype)
        self.read_into(box, out)
        return out

    def read_into(self, box: Box, out: np.ndarray, sparse: bool = False, whole: bool = False) -> None:
        """Fill `out` with `box`. sparse: the read is small and likely random, so a chunk it
        wants only part of is cached only when read again (see _read_small). whole: the same
        read comes back to its chunks in other boxes, so none is decoded only in part."""
        if not self._batched:  # the local store's hot path: nothing to fetch ahead of the decodes
            return self._read_parts(box, out, sparse, whole)
        with batchread.fetched(self, box):
            self._read_parts(box, out, sparse, whole)

    def _read_parts(self, box: Box, out: np.ndarray, sparse: bool, whole: bool) -> None:
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            target = out[(*part.out_box, ...)]  # a view, even for 0-d arrays
            if self.sharding:
                self.shard_view(part.coords).read_into(part.chunk_box, target, sparse, whole)
            elif part.complete and target.shape == self.spec_at(part.coords).shape and target.flags.c_contiguous:
                self._copy_part(part, target, self._chunk(part.coords, into=target))
            elif sparse:
                self._read_small(part, target, whole)
            else:
                self._copy_part(part, target, self._chunk(part.coords))

    @property
    def leaf_grid(self):
        """The chunk shape whose chunks a read decodes: the inner chunks', which tile the shards."""
        return self._leaf_chain.spec.shape if self.sharding else self.chunk_shape

    def keep_room(self, boxes: list[Box]) -> None:
        """Room among the kept decodes (recent_chunks.py) for every chunk `boxes` meet: a small
        read of several boxes comes back to its chunks from one box to the next."""
        self.shared.cache.recent.make_room(chunks_spanned(boxes, self.leaf_grid))

    def _read_small(self, part, target: np.ndarray, whole: bool) -> None:
        """Part of a chunk for a small read: copied from the chunk's last scratch decode if that
        reaches far enough (recent_chunks.py); else, the first time, decoded into scratch (a blosc chunk
        only in the blocks wanted) and kept there; else decoded and cached (ChunkCache.admit)."""
        key, cache = self.cache_key + (part.coords,), self.shared.cache
        shape = self.spec_at(part.coords).shape
        wanted = None if whole else self._span_nbytes(part.chunk_box, shape)  # a decode may widen it
        if self._unflushed(part.coords) is None and cache.get(key) is None \
                and cache.recent.copy_out(key, part.chunk_box, target, wanted):
            return
        if cache.admit(key):
            self._copy_part(part, target, self._chunk(part.coords))
            return
        base, buffer = scratch.take(shape, self.dtype)
        version = self.shared.version
        try:
            chunk = self._chunk(part.coords, into=buffer, wanted=wanted)
            self._copy_part(part, target, chunk)
        except BaseException:
            scratch.give(base)
            raise
        with self.shared.lock:  # a write since the decode makes it stale: keep nothing then
            if chunk is buffer and version == self.shared.version and self._unflushed(part.coords) is None:
                parts = wanted and self.chain_at(part.coords).decodes_parts
                cache.recent.keep(key, base, buffer, tuple(wanted) if parts else None)
            else:
                scratch.give(base)

    def _copy_part(self, part, target: np.ndarray, chunk: np.ndarray | None) -> None:
        if chunk is not target:
            target[...] = self.spec.fill_value if chunk is None else chunk[part.chunk_box]

    def _span_nbytes(self, box: Box, shape: tuple[int, ...]) -> list[int]:
        """The bytes of the decoded chunk (of `shape`) from the first to the last element of
        `box`, in C order."""
        if not box:
            return [0, self.dtype.itemsize]
        first = flat_index([s.start for s in box], shape)
        last = flat_index([s.stop - 1 for s in box], shape)
        return [first * self.dtype.itemsize, (last + 1) * self.dtype.itemsize]

    def _chunk(self, coords, into: np.ndarray | None = None, wanted: list[int] | None = None) -> np.ndarray | None:
        """The decoded chunk (dirty, cached or read now), None when it is not stored.

        A chunk read now is decoded into `into` if given, and then not cached: the reader wants
        all of it, and the kernel's page cache keeps what it reads; or `into` is scratch, of
        which only the bytes `wanted` may be decoded."""
        chunk = self._unflushed(coords)
        if chunk is not None:
            return chunk
        key = self.cache_key + (coords,)
        chunk = self.shared.cache.get(key)
        if chunk is not None:
            return None if chunk is MISSING else chunk
        chunk = self._chunk_ahead(coords, key, into)
        if chunk is not MISSING:
            return chunk
        refreshed, changes = False, 0
        while True:
            version = self.shared.version
            if version % 2:  # a commit is replacing stored values: wait for it
                with self.shared.commit_lock:
                    continue
            try:
                chunk, version = self._read_shared(key, coords, into, wanted, version)
            except ValueChangedError as e:  # the shard was replaced since its index was read
                changes += 1
                if changes > CHANGED_RETRIES:
                    raise StoreError(f"{self.shared.name}: chunk {self.source.key(coords)}: {e}, "
                                     f"{CHANGED_RETRIES} times in a row") from None
                self.source.refresh(changed=True)
                continue
            except CorruptChunkError as e:
                if version != self.shared.version:
                    continue  # read during a commit, perhaps through a stale shard index
                if not refreshed and self.source.refresh():
                    refreshed = True  # another machine rewrote the shard since its index was read
                    continue
                raise CorruptChunkError(f"{self.shared.name}: chunk {self.source.key(coords)}: {e}") from None
            with self.shared.lock:
                if version != self.shared.version:
                    continue
                newer = self._unflushed(coords)
                if newer is not None:  # written while we read: that is the truth
                    return newer
                if chunk is None or chunk is not into:  # "not stored" is cheap to remember
                    self.shared.cache.put(key, MISSING if chunk is None else chunk)
                return chunk

    def _read_shared(self, key, coords, into: np.ndarray | None, wanted: list[int] | None,
                     version: int) -> tuple[np.ndarray | None, int]:
        """_read_decoded, or the chunk another reader is decoding now, taken when it is done
        (decodes_in_progress.py); with the array's version the chunk is current for."""
        decodes = self.shared.cache.decodes
        flight, leading = decodes.join(key, version)
        if not leading:
            if log.isEnabledFor(logging.DEBUG):  # the key is made only for the line
                log.debug("%s chunk %s: waiting for the decode another read began", self.shared.name,
                          self.source.key(coords))
            chunk = flight.wait()
            if chunk is not NOT_SHARED:
                return chunk, flight.version
            return self._read_decoded(coords, into, wanted)[0], version
        try:
            chunk, whole = self._read_decoded(coords, into, wanted)
        except BaseException as e:  # an interrupt is the leader's alone: the waiters decode for themselves
            decodes.end(key, flight, error=e if isinstance(e, Exception) else None)
            raise
        # memory the reader owns (the kernel's buffer, scratch) is copied for the waiters
        decodes.end(key, flight, share=(lambda: chunk if chunk is None or chunk is not into else chunk.copy())
                    if whole else None)
        return chunk, version

    def _read_decoded(self, coords, into: np.ndarray | None, wanted: list[int] | None) -> tuple[np.ndarray | None, bool]:
        """Chunk `coords` read from its source and decoded (see _chunk), or for a small read,
        only the stored parts it wants (stored_parts.py); and whether it was decoded whole."""
        if wanted is not None and into is not None and stored_parts.readable(self, coords):
            chunk = stored_parts.decode_part(self, coords, into, wanted)
            if chunk is not stored_parts.NOT_READ:
                log.debug("decoded %s chunk %s, bytes %d-%d, from the stored blocks that hold them",
                          self.shared.name, self.source.key(coords), *wanted)
                return chunk, False
        data = batchread.take(self.source, coords) if self._batched else batchread.NOT_FETCHED
        if data is batchread.NOT_FETCHED:
            data = self.source.read(coords)
        started = time.perf_counter()
        chunk = self._decode(data, into, wanted, coords)
        if data is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("decoded %s chunk %s (%d stored bytes%s) in %.2f ms", self.shared.name,
                      self.source.key(coords), len(data), "" if wanted is None else ", bytes %d-%d wanted" % tuple(wanted),
                      (time.perf_counter() - started) * 1e3)
        return chunk, wanted is None or into is None or not self.chain_at(coords).decodes_parts

    def stored(self, coords) -> bytes | None:
        """The chunk's encoded bytes as stored now (None: not stored), through a fresh index when
        its shard was replaced since the index was read (a merge after a conflict reads them)."""
        for _ in range(CHANGED_RETRIES):
            try:
                return self.source.read(coords)
            except ValueChangedError:
                self.source.refresh(changed=True)
        return self.source.read(coords)

    def _chunk_ahead(self, coords, key, into: np.ndarray | None) -> np.ndarray:
        """The chunk decoded ahead (decode_ahead.py), copied into `into` if given, else cached as a
        read would cache it; MISSING when there is none, or it is older than a commit or write."""
        found = self.take_ahead(coords, key)
        if found is None:
            return MISSING
        address, chunk = found
        try:
            if into is None:
                into = chunk.copy()
                self.shared.cache.put(key, into)
            else:
                into[...] = chunk
        finally:
            del chunk
            free(address)
        return into

    def take_ahead(self, coords, key=None) -> tuple[int, np.ndarray] | None:
        """(address, chunk) decoded ahead and still current; the caller frees the address."""
        key = key or self.cache_key + (coords,)
        found = self.shared.cache.ahead.take(key)
        if found is None:
            return None
        address, chunk, version = found
        if version != self.shared.version or self._unflushed(coords) is not None:
            del chunk
            free(address)
            return None
        return address, chunk

    def whole_chunk(self, box: Box) -> tuple["Array", tuple] | None:
        """(the array or shard view, chunk coords) when `box` is exactly one whole chunk (an
        inner chunk when sharded) whose C-order bytes are the box's; else None."""
        parts = chunk_parts(box, self.chunk_shape, self.shape)
        part = next(parts, None)
        if part is None or next(parts, None) is not None:
            return None
        if self.sharding:  # one inner chunk is part of its shard
            return self.shard_view(part.coords).whole_chunk(part.chunk_box)
        return (self, part.coords) if part.complete and box_shape(box) == self.spec_at(part.coords).shape else None

    def decode_ahead(self, box: Box) -> bool:
        """Start decoding the stored chunks `box` touches that no one holds decoded yet, nearest
        first, while the decode-ahead budget has room (False once it has none)."""
        ahead, cache = self.shared.cache.ahead, self.shared.cache
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            if self.sharding:
                if not self.shard_view(part.coords).decode_ahead(part.chunk_box):
                    return False
                continue
            key = self.cache_key + (part.coords,)
            # a chunk a reader is fetching now (the kernel's other request of the stream) is its
            if key in ahead or key in cache or key in cache.decodes or self._unflushed(part.coords) is not None:
                continue
            shape = self.spec_at(part.coords).shape
            if not ahead.submit(key, shape, self.dtype, lambda out, c=part.coords: self._decode_ahead(c, out)):
                return False
        return True

    def keep_ahead(self, box: Box) -> None:
        """The chunks `box` touches that were decoded ahead are wanted still (DecodeAhead.wanted)."""
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            if self.sharding:
                self.shard_view(part.coords).keep_ahead(part.chunk_box)
            else:
                self.shared.cache.ahead.wanted(self.cache_key + (part.coords,))

    @property
    def reads_indexes_ahead(self) -> bool:
        return self.sharding is not None and self.source.capabilities.remote

    def read_indexes_ahead(self, box: Box) -> None:
        """On a store where each request is a round trip, start reading the index of every shard
        `box` touches whose index is not known: the decodes ahead of a stream then find it
        read, instead of all waiting one round trip at each new shard."""
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            source = self.shard_view(part.coords).source
            if not source.index_known():
                self.shared.cache.ahead.fetch(self.cache_key + (part.coords, "index"), source.index_ahead)

    def _decode_ahead(self, coords, out: np.ndarray) -> int | None:
        """Decode stored chunk `coords` into `out`; the version it is valid for, None when
        there is nothing to keep (not stored, written, or a commit under way)."""
        version = self.shared.version
        if version % 2 or self._unflushed(coords) is not None:
            return None
        data = self.source.read_ahead(coords)
        if data is None:
            return None
        self.chain_at(coords).decode_into(data, out)
        return version

    def has_unflushed(self, coords) -> bool:
        """Chunk (or shard) `coords` holds written bytes that are not stored yet, or being stored."""
        return self._unflushed(coords) is not None or self.write_back.holds_shard(coords)

    def _unflushed(self, coords) -> np.ndarray | None:
        """The chunk as written but not yet committed (WriteBack.unflushed)."""
        return self.write_back.unflushed(coords)

    def decode(self, data, coords) -> np.ndarray | None:
        """Chunk `coords` decoded whole from its stored bytes (None stays None)."""
        return self._decode(data, None, None, coords)

    def _decode(self, data, into: np.ndarray | None, wanted: list[int] | None = None, coords=None) -> np.ndarray | None:
        """`coords`: the chunk's, whose chain decodes it (needed on a rectilinear grid only)."""
        if data is None:
            return None
        chain = self.chain if coords is None else self.chain_at(coords)
        if into is None:
            return chain.decode(data)
        chain.decode_into(data, into, wanted)
        return into

    def shard_view(self, coords) -> "Array":
        """The shard's view. Looking up an existing one takes no lock, so reads never wait for a
        flush's encoding; clean views are evicted oldest-created first."""
        view = self._shards.get(coords)
        if view is not None:
            return view
        with self.shared.lock:
            view = self._shards.get(coords)
            if view is None:
                view = self._shards[coords] = self._open_shard(coords)
                self._evict_shard_views()
            return view

    def shard_write_back(self, coords) -> WriteBack:
        """The write-back of shard `coords`'s view (writeback.WrittenArray)."""
        return self.shard_view(coords).write_back

    def shard_index(self, coords) -> np.ndarray | None:
        """The stored index of shard `coords`, None when the shard is not stored."""
        return self.shard_view(coords).source.index()

    def _shard_shape(self, coords) -> tuple[int, ...]:
        """The elements of shard `coords` inside the array, from its origin (fewer at the edge)."""
        origin = chunk_origin(self.chunk_shape, coords)
        return tuple(max(0, min(s, n - o)) for s, n, o in zip(chunk_extent(self.chunk_shape, coords), self.shape,
                                                               origin, strict=False))

    def resize(self, shape: tuple[int, ...]) -> None:
        """The array's shape becomes `shape` (growth.py changes dimension 0), stored with the next
        flush. Shard views follow: those holding writes are clipped anew at the edge, clean ones
        are dropped (made again as read). The caller deletes chunks past a shrunk end first."""
        with self.shared.lock:
            self.shape = tuple(shape)
            self.write_back.reshaped(self.shape)
            for coords in list(self._shards):
                if not self.write_back.holds_shard(coords):
                    del self._shards[coords]
                    continue
                view = self._shards[coords]
                view.shape = self._shard_shape(coords)
                view.write_back.reshaped(view.shape, stored=True)

    def _open_shard(self, coords) -> "Array":
        shape = self._shard_shape(coords)
        key = self.source.key(coords)
        sharding = self.chain_at(coords).sharding  # on a rectilinear grid, each shard shape has its own
        around = self.source.capabilities
        outermost = isinstance(self.source, StoreChunks)  # a shard in a store value, not in an inner chunk
        capabilities = Capabilities(remote=around.remote, batched_reads=outermost and around.batched_reads,
                                    metadata_ttl=around.metadata_ttl if outermost else None)
        source = ShardChunks(lambda byte_range, expect=None: self.source.read_versioned(coords, byte_range, expect),
                             sharding, key,
                             read_ranges=lambda ranges, expect=None: self.source.read_ranges(coords, ranges, expect),
                             capabilities=capabilities, spans_held=self.shared.cache.ahead.max_bytes,
                             chunk_nbytes=sharding.inner_chain.spec.nbytes, whole=self._whole_shards)
        return Array(shape, sharding.inner_chunk_shape, sharding.inner_chain, source,
                     self.shared, self.cache_key + (coords,))

    def forget_stored(self) -> None:
        """Another writer changed the stored values: nothing cached of them is trusted any more.
        Cached and decoded-ahead chunks are left under a namespace no read asks for again (the
        cache evicts them as it needs room) and clean shard views, with their indexes, are
        dropped; a view holding chunks written here and not stored yet stays, with those chunks
        (their flush merges with the stored values as it always does), and forgets the rest."""
        with self.shared.lock:
            self.cache_key = (next(_cache_namespaces),)
            for coords, view in list(self._shards.items()):
                if self.write_back.holds_shard(coords):  # kept for its writes: its cached chunks go
                    view.source.forget_index()
                    view.forget_stored()
                else:
                    del self._shards[coords]

    def _evict_shard_views(self) -> None:
        for coords in list(self._shards)[: max(0, len(self._shards) - MAX_SHARD_VIEWS)]:
            if not self.write_back.holds_shard(coords):
                del self._shards[coords]

    # writes

    def write(self, box: Box, values: np.ndarray) -> None:
        self.write_many([(box, values)])

    def write_many(self, pieces: list[tuple[Box, np.ndarray]]) -> None:
        """Write several boxes; every partly written chunk is decoded first, so a corrupt one
        fails the whole write before anything changes."""
        with self.shared.lock:
            for box, _ in pieces:
                self._load_partial_chunks(box)
            for box, values in pieces:
                self._write(box, values)

    def _load_partial_chunks(self, box: Box) -> None:
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            if self.sharding:
                self.shard_view(part.coords)._load_partial_chunks(part.chunk_box)
            elif not part.complete:
                self._chunk(part.coords)

    def _write(self, box: Box, values: np.ndarray) -> None:
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            if self.sharding:
                self.shard_view(part.coords)._write(part.chunk_box, values[(*part.out_box, ...)])
                self.write_back.shard_written(part.coords)
                continue
            chunk = self.write_back.dirty_chunk(part.coords)
            if chunk is None:
                chunk = self._make_dirty(part)
            chunk[part.chunk_box] = values[part.out_box]
            self.write_back.mark_written(part)

    def _make_dirty(self, part) -> np.ndarray:
        shape = self.spec_at(part.coords).shape
        if part.complete and self._inside(part.coords):
            chunk = np.empty(shape, self.dtype)
        else:
            old = None if part.complete else self._chunk(part.coords)
            chunk = np.full(shape, self.spec.fill_value) if old is None else old.copy()
        self.shared.cache.pop(self.cache_key + (part.coords,))
        self.write_back.add_dirty(part.coords, chunk, part.complete)
        return chunk

    def _inside(self, coords) -> bool:
        """The chunk lies wholly inside the array (it does not overhang the edge)."""
        ends = (o + s for o, s in zip(chunk_origin(self.chunk_shape, coords), chunk_extent(self.chunk_shape, coords), strict=True))
        return all(end <= n for end, n in zip(ends, self.shape, strict=False))


def open_array(store: Store, path: str, meta: ArrayMetadata, cache: ChunkCache,
               copy: ConsolidatedCopy | None = None) -> Array:
    """The Array for `meta` stored at `path` (the node's key prefix, '' for a root array);
    `copy`: the root's consolidated metadata, where the hierarchy has it (a growth keeps its
    shape of the array true)."""
    where = f"{path + '/' if path else ''}{'zarr.json' if meta.zarr_format == 3 else '.zarray'}"
    spec = ChunkSpec(largest_chunk(meta.chunk_shape), meta.data_type, meta.fill_value)
    chain = CodecChain(list(meta.codecs), spec, f"{where}: codecs")
    if not regular(meta.chunk_shape):
        chain.check_grid(meta.chunk_shape, where)
    shared = Shared(name=path or "/", cache=cache)
    cache_key = (next(_cache_namespaces),)  # never reused, unlike id(): no stale chunks of another array
    return Array(meta.shape, meta.chunk_shape, chain, StoreChunks(store, path, meta, where, chain.stored_limit(), copy),
                 shared,
                 cache_key)


_cache_namespaces = itertools.count()

