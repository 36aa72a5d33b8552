"""Array: read and write boxes of a chunked array, decoding and re-encoding only touched chunks.

A sharded array (codecs = [sharding_indexed]) sees each shard as an Array of its own over
ShardChunks, so nested sharding needs no special code. Dirty chunks are kept decoded, pinned
outside the cache, until flush() encodes them and commits every touched shard once.
"""

import itertools
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .cache import MISSING, ChunkCache
from .codecs import ChunkSpec, CodecChain
from .errors import CorruptChunkError
from .geometry import Box, box_shape, chunk_parts, grid_shape
from .metadata import ArrayMetadata
from .sharding import ShardChunks
from .store import ByteRange, LocalStore

log = logging.getLogger(__name__)

MAX_SHARD_VIEWS = 4096  # clean shard views kept (each holds its decoded index)


class StoreChunks:
    """The chunks of an array stored as values of a store, named by the chunk key encoding."""

    def __init__(self, store: LocalStore, path: str, meta: ArrayMetadata):
        self.store = store
        self.prefix = f"{path}/" if path else ""
        self.encoding = meta.chunk_key_encoding

    def key(self, coords: tuple[int, ...]) -> str:
        return self.prefix + self.encoding.key(coords)

    def read(self, coords: tuple[int, ...], byte_range: ByteRange = None) -> bytes | None:
        return self.store.get(self.key(coords), byte_range)

    def commit(self, updates: dict) -> None:
        self.store.set_many({self.key(coords): data for coords, data in updates.items()})


@dataclass
class Shared:
    """State shared by an array and all its shard views."""

    name: str
    cache: ChunkCache
    lock: threading.RLock = field(default_factory=threading.RLock)
    version: int = 0  # bumped on every commit, so a read racing a flush caches nothing stale
    dirty_nbytes: int = 0


class Array:
    def __init__(self, shape, chunk_shape, chain: CodecChain, source, shared: Shared, cache_key: tuple):
        self.shape = tuple(shape)
        self.chunk_shape = tuple(chunk_shape)
        self.chain = chain
        self.spec: ChunkSpec = chain.spec
        self.source = source
        self.shared = shared
        self.cache_key = cache_key
        self.sharding = chain.sharding
        self._dirty: dict[tuple, np.ndarray] = {}
        self._shards: OrderedDict[tuple, Array] = OrderedDict()
        self._dirty_shards: set[tuple] = set()

    @property
    def dtype(self) -> np.dtype:
        return self.spec.data_type.numpy

    # reads

    def read(self, box: Box) -> np.ndarray:
        out = np.empty(box_shape(box), self.dtype)
        self.read_into(box, out)
        return out

    def read_into(self, box: Box, out: np.ndarray) -> None:
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            target = out[(*part.out_box, ...)]  # a view, even for 0-d arrays
            if self.sharding:
                self._shard(part.coords).read_into(part.chunk_box, target)
                continue
            whole = part.complete and target.shape == self.spec.shape and target.flags.c_contiguous
            chunk = self._chunk(part.coords, into=target if whole else None)
            if chunk is not target:
                target[...] = self.spec.fill_value if chunk is None else chunk[part.chunk_box]

    def _chunk(self, coords, into: np.ndarray | None = None) -> np.ndarray | None:
        """The decoded chunk (dirty, cached or read now), None when it is not stored.

        A chunk read now is decoded into `into` if given, and then not cached: the reader wants
        all of it, and the kernel's page cache keeps what it reads."""
        chunk = self._dirty.get(coords)
        if chunk is not None:
            return chunk
        key = self.cache_key + (coords,)
        chunk = self.shared.cache.get(key)
        if chunk is not None:
            return None if chunk is MISSING else chunk
        while True:
            version = self.shared.version
            if version % 2:  # a commit is replacing stored values: wait for it
                with self.shared.lock:
                    continue
            try:
                chunk = self._decode(self.source.read(coords), into)
            except CorruptChunkError as e:
                if version != self.shared.version:
                    continue  # read during a commit, perhaps through a stale shard index
                raise CorruptChunkError(f"{self.shared.name}: chunk {self.source.key(coords)}: {e}") from None
            with self.shared.lock:
                if version != self.shared.version:
                    continue
                if coords in self._dirty:  # written while we read: the dirty chunk is the truth
                    return self._dirty[coords]
                if chunk is not into:
                    self.shared.cache.put(key, MISSING if chunk is None else chunk)
                return chunk

    def _decode(self, data, into: np.ndarray | None) -> np.ndarray | None:
        if data is None:
            return None
        if into is None:
            return self.chain.decode(data)
        self.chain.decode_into(data, into)
        return into

    def _shard(self, coords) -> "Array":
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

    def _open_shard(self, coords) -> "Array":
        origin = [c * s for c, s in zip(coords, self.chunk_shape)]
        shape = [min(s, n - o) for s, n, o in zip(self.chunk_shape, self.shape, origin)]
        key = self.source.key(coords)
        source = ShardChunks(lambda byte_range: self.source.read(coords, byte_range), self.sharding, key)
        return Array(shape, self.sharding.inner_chunk_shape, self.sharding.inner_chain, source,
                     self.shared, self.cache_key + (coords,))

    def _evict_shard_views(self) -> None:
        for coords in list(self._shards)[: max(0, len(self._shards) - MAX_SHARD_VIEWS)]:
            if coords not in self._dirty_shards:
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
                self._shard(part.coords)._load_partial_chunks(part.chunk_box)
            elif not part.complete:
                self._chunk(part.coords)

    def _write(self, box: Box, values: np.ndarray) -> None:
        for part in chunk_parts(box, self.chunk_shape, self.shape):
            if self.sharding:
                self._shard(part.coords)._write(part.chunk_box, values[(*part.out_box, ...)])
                self._dirty_shards.add(part.coords)
                continue
            chunk = self._dirty.get(part.coords)
            if chunk is None:
                chunk = self._make_dirty(part)
            chunk[part.chunk_box] = values[part.out_box]

    def _make_dirty(self, part) -> np.ndarray:
        if part.complete and self._inside(part.coords):
            chunk = np.empty(self.spec.shape, self.dtype)
        else:
            old = None if part.complete else self._chunk(part.coords)
            chunk = np.full(self.spec.shape, self.spec.fill_value) if old is None else old.copy()
        self.shared.cache.pop(self.cache_key + (part.coords,))
        self._dirty[part.coords] = chunk
        self.shared.dirty_nbytes += chunk.nbytes
        return chunk

    def _inside(self, coords) -> bool:
        """The chunk lies wholly inside the array (it does not overhang the edge)."""
        return all((c + 1) * s <= n for c, s, n in zip(coords, self.chunk_shape, self.shape))

    # flush

    def flush(self) -> None:
        """Encode every dirty chunk and commit: each touched chunk or shard is replaced once."""
        with self.shared.lock:
            updates = self._encode_dirty()
            if not updates:
                return
            self.shared.version += 1  # odd: readers retry whatever they read meanwhile
            try:
                self.source.commit(updates)
            finally:
                self._forget_shard_indices()  # stored shards may have changed, even on failure
                self.shared.version += 1
            self._committed()

    def _encode_dirty(self) -> dict:
        updates = {coords: self._encode(coords, chunk) for coords, chunk in self._dirty.items()}
        for coords in self._dirty_shards:
            view = self._shards[coords]
            updates[coords] = view.source.build(view._encode_dirty(), view._live_chunks())
        return updates

    def _encode(self, coords, chunk: np.ndarray) -> bytes | None:
        try:
            return self.chain.encode_or_none(chunk)
        except CorruptChunkError as e:  # a shard that cannot be merged with its stored self
            raise CorruptChunkError(f"{self.shared.name}: chunk {self.source.key(coords)}: {e}") from None

    def _live_chunks(self) -> list[tuple]:
        return list(np.ndindex(*grid_shape(self.shape, self.chunk_shape)))

    def _forget_shard_indices(self) -> None:
        for coords in self._dirty_shards:
            view = self._shards[coords]
            view.source.forget_index()
            view._forget_shard_indices()

    def _committed(self) -> None:
        for coords, chunk in self._dirty.items():
            self.shared.cache.put(self.cache_key + (coords,), chunk)
            self.shared.dirty_nbytes -= chunk.nbytes
        self._dirty.clear()
        for coords in self._dirty_shards:
            self._shards[coords]._committed()
        self._dirty_shards.clear()

    @property
    def dirty(self) -> bool:
        return bool(self._dirty or self._dirty_shards)


def open_array(store: LocalStore, path: str, meta: ArrayMetadata, cache: ChunkCache) -> Array:
    """The Array for `meta` stored at `path` (the node's key prefix, '' for a root array)."""
    where = f"{path + '/' if path else ''}zarr.json"
    spec = ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value)
    chain = CodecChain(list(meta.codecs), spec, f"{where}: codecs")
    shared = Shared(name=path or "/", cache=cache)
    cache_key = (next(_cache_namespaces),)  # never reused, unlike id(): no stale chunks of another array
    return Array(meta.shape, meta.chunk_shape, chain, StoreChunks(store, path, meta), shared, cache_key)


_cache_namespaces = itertools.count()


