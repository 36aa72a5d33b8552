"""One request's chunks fetched together, for stores where every request is a round trip.

An object store answers each GET after a network round trip, so a 1 MiB read that meets 16
inner chunks would wait for 16 of them in a row. Before such a read decodes its chunks one by
one, `fetched(array, box)` asks the array's chunk source for the stored bytes of every chunk
the box needs that is neither written nor cached, in one call: the inner chunks of one shard
come from one coalesced ranged read (obstore's get_ranges), whole chunks from concurrent GETs.
The bytes wait in a per-thread map that Array._chunk takes them from, once each; at most
MAX_BYTES of them, so the memory a read holds stays bounded.

Array uses this only on stores that say `batched_reads`, and not for a sharded array itself (its
shard views batch their own inner chunks): on a local disk a pread costs microseconds, and
reading ahead of the decode would only hold memory longer.
"""

import contextlib
import enum
import threading
from collections.abc import Iterator
from typing import Literal, Protocol

import numpy as np

from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.chunk_sources import ChunkSource, Encoded, Fetched
from zarrfs.geometry import Box, ChunkShape, chunk_parts


class _Shared(Protocol):
    @property
    def cache(self) -> ChunkCache: ...


class _WriteBack(Protocol):
    def unflushed(self, coords: tuple[int, ...]) -> np.ndarray | None: ...


class FetchingArray(Protocol):
    """What a batch fetch asks of an Array (engine/array.py, which imports this module)."""

    @property
    def source(self) -> ChunkSource: ...

    @property
    def shared(self) -> _Shared: ...

    @property
    def write_back(self) -> _WriteBack: ...

    @property
    def cache_key(self) -> tuple: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def chunk_shape(self) -> ChunkShape: ...


class _NotFetched(enum.Enum):
    """take()'s answer for a chunk not fetched with the batch (an enum, so that `is` narrows it)."""

    NOT_FETCHED = enum.auto()


NOT_FETCHED = _NotFetched.NOT_FETCHED
MAX_CHUNKS = 64  # chunks fetched in one batch; the rest of a read are read one by one
MAX_BYTES = 64 << 20  # encoded bytes a batch may hold, when sizes are known beforehand (shard indices)



class _Batches(threading.local):
    """This thread's fetched batches, by id() of the chunk source they were read from."""

    def __init__(self) -> None:
        self.maps: dict[int, Fetched] = {}


_local = _Batches()


@contextlib.contextmanager
def fetched(array: FetchingArray, box: Box) -> Iterator[None]:
    """Within this block, the array's reads find the stored bytes of the box's chunks fetched (take)."""
    wanted = _wanted(array, box)
    if len(wanted) < 2:
        yield
        return
    batch = array.source.read_many(wanted[:MAX_CHUNKS], MAX_BYTES)
    maps = _local.maps
    maps[id(array.source)] = batch
    try:
        yield
    finally:
        maps.pop(id(array.source), None)


def take(source: ChunkSource, coords: tuple[int, ...]) -> Encoded | None | Literal[_NotFetched.NOT_FETCHED]:
    """The bytes fetched for `coords` (None: not stored), or NOT_FETCHED. Each is taken once: a
    read that retries (a commit raced it) reads the store again."""
    batch = _local.maps.get(id(source))
    if not batch or coords not in batch:
        return NOT_FETCHED
    return batch.pop(coords)


def _wanted(array: FetchingArray, box: Box) -> list[tuple[int, ...]]:
    cache = array.shared.cache
    return [part.coords for part in chunk_parts(box, array.chunk_shape, array.shape)
            if array.write_back.unflushed(part.coords) is None and not _held(cache, array.cache_key + (part.coords,))]


def _held(cache: ChunkCache, key: tuple) -> bool:
    """Decoded already, or being fetched and decoded ahead (decode_ahead.py): not to be fetched again."""
    return key in cache.ahead or cache.get(key) is not None
