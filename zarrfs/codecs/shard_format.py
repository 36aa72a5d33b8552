"""The sharding_indexed binary format, and one shard seen as a source of inner chunks.

Pure functions work on bytes; ShardChunks reads through a `read_value(byte_range)` callable,
so a shard can live in a store value or inside an inner chunk of another shard (nested
sharding), and only its index and the inner chunks a read needs are fetched.
"""

import math
import threading
import time
from typing import Callable

import numpy as np

from zarrfs.errors import CorruptChunkError
from zarrfs.geometry import flat_index
from zarrfs.byte_ranges import ByteRange, Range, Suffix

EMPTY = 2**64 - 1


def check_index(index: np.ndarray) -> np.ndarray:
    """Validate decoded (offset, nbytes) entries; an entry is empty only when both are 2^64-1."""
    empty = index == EMPTY
    if (empty[:, 0] != empty[:, 1]).any():
        raise CorruptChunkError("inconsistent shard index: offset and nbytes disagree on emptiness")
    full = ~empty[:, 0]
    offsets, sizes = index[full, 0], index[full, 1]
    if (offsets > EMPTY - sizes).any():
        raise CorruptChunkError("inconsistent shard index: an entry's end overflows 64 bits")
    return index


def index_bytes(shard, index_nbytes: int, location: str):
    if len(shard) < index_nbytes:
        raise CorruptChunkError(f"truncated shard: {len(shard)} bytes, the index alone needs {index_nbytes}")
    return shard[:index_nbytes] if location == "start" else shard[len(shard) - index_nbytes:]


def slice_chunk(shard, entry) -> memoryview | None:
    offset, nbytes = int(entry[0]), int(entry[1])
    if offset == EMPTY:
        return None
    if offset + nbytes > len(shard):
        raise CorruptChunkError(f"shard index entry [{offset}, {offset + nbytes}) points outside the "
                                f"{len(shard)}-byte shard")
    return memoryview(shard)[offset:offset + nbytes]


def assemble(chunks: list, index_nbytes: int, location: str, encode_index: Callable) -> bytes | None:
    """Lay encoded inner chunks (C order, None for empty) out back to back, with the index."""
    if all(c is None for c in chunks):
        return None
    index = np.full((len(chunks), 2), EMPTY, dtype="<u8")
    offset = index_nbytes if location == "start" else 0
    for i, chunk in enumerate(chunks):
        if chunk is not None:
            index[i] = offset, len(chunk)
            offset += len(chunk)
    parts = [c for c in chunks if c is not None]
    raw_index = encode_index(index)
    return b"".join([raw_index, *parts] if location == "start" else [*parts, raw_index])


class ShardChunks:
    """One shard as a chunk source for an Array over its inner chunk grid.

    `codec` is the ShardingCodec; `read_value(byte_range)` returns the shard's bytes (or a range
    of them), None if the shard does not exist. The index is read once and kept.
    """

    def __init__(self, read_value: Callable[[ByteRange], bytes | None], codec, key: str,
                 read_ranges: Callable[[list[Range]], list[bytes] | None] | None = None, batched_reads: bool = False,
                 index_ttl: float | None = None, remote: bool = False):
        self.read_value = read_value
        self.read_ranges = read_ranges  # several ranges of the shard in one call (batchread.py)
        self.batched_reads = batched_reads and read_ranges is not None
        self.codec = codec
        self.shard_key = key
        self._index: np.ndarray | None = None
        self._loaded = False
        # Another machine may rewrite a shard in an object store: its index is read again after
        # this many seconds (the store's metadata_ttl). None: kept until this mount rewrites it.
        self.index_ttl = index_ttl
        self.remote = remote  # written by other machines too: its writers keep written masks
        self._loaded_at = 0.0
        self._lock = threading.Lock()  # decode-ahead threads start on a shard's inner chunks together

    def key(self, coords: tuple[int, ...]) -> str:
        return f"{self.shard_key} inner chunk {list(coords)}"

    def index(self) -> np.ndarray | None:
        """The (n, 2) index, None when the shard does not exist."""
        if not self._fresh():
            with self._lock:
                if not self._fresh():  # read once, whichever thread comes first
                    size = self.codec.index_nbytes
                    raw = self.read_value(Range(0, size) if self.codec.index_location == "start" else Suffix(size))
                    self._index = None if raw is None else self.codec.decode_index(raw)
                    self._loaded_at = time.monotonic()
                    self._loaded = True
        return self._index

    def _fresh(self) -> bool:
        return self._loaded and (self.index_ttl is None or time.monotonic() - self._loaded_at <= self.index_ttl)

    def forget_index(self) -> None:
        """The shard was rewritten: read its index again next time."""
        self._loaded = False
        self._index = None

    def stored_chunks(self) -> list:
        """The shard as stored, read whole: its encoded inner chunks in flat order (None for an
        empty one, all None when the shard is not stored)."""
        old = self.read_value(None)
        return [None] * math.prod(self.codec.chunks_per_shard) if old is None else self.codec.split(old)

    def flat(self, coords) -> int:
        """The position of inner chunk `coords` in the flat order of the index."""
        return flat_index(coords, self.codec.chunks_per_shard)

    def read(self, coords: tuple[int, ...], byte_range: ByteRange = None) -> bytes | None:
        """The encoded inner chunk (or a range of it), None when it is empty."""
        index = self.index()
        if index is None:
            return None
        offset, nbytes = (int(v) for v in index[self.flat(coords)])
        if offset == EMPTY:
            return None
        if isinstance(byte_range, Suffix):
            length = min(byte_range.length, nbytes)
            start = offset + nbytes - length
        elif isinstance(byte_range, Range):
            start = offset + min(byte_range.start, nbytes)
            length = max(0, min(byte_range.length, nbytes - byte_range.start))
        else:
            start, length = offset, nbytes
        data = self.read_value(Range(start, length))
        if data is None or len(data) != length:
            raise CorruptChunkError(f"truncated shard: index entry [{offset}, {offset + nbytes}) points "
                                    f"outside the shard")
        return data

    def read_many(self, coords_list: list[tuple], max_bytes: int) -> dict:
        """{coords: encoded bytes, or None if empty} for inner chunks, up to max_bytes of them,
        from one ranged read of several ranges. Entries that do not fit the shard are left out:
        read one by one, they raise the precise error."""
        index = self.index()
        if index is None:
            return {coords: None for coords in coords_list}
        found, wanted, total = {}, [], 0
        for coords in coords_list:
            offset, nbytes = (int(v) for v in index[self.flat(coords)])
            if offset == EMPTY:
                found[coords] = None
            elif total + nbytes <= max_bytes:
                total += nbytes
                wanted.append((coords, offset, nbytes))
        if wanted:
            values = self.read_ranges([Range(offset, nbytes) for _, offset, nbytes in wanted])
            for (coords, _, nbytes), data in zip(wanted, values or (), strict=False):
                if len(data) == nbytes:
                    found[coords] = data
        return found

    def build(self, updates: dict[tuple[int, ...], bytes | None], live: list[tuple[int, ...]],
              stored: list | None = None) -> bytes | None:
        """The new shard with `updates` applied, None if it ends up empty.

        `live` lists the inner chunks that lie inside the array; others are dropped. The old
        shard is read (once, whole) only if some live inner chunk is not being replaced, unless
        the caller has read it already: `stored` (stored_chunks()).
        """
        if stored is None and any(c not in updates for c in live):
            stored = self.stored_chunks()
        chunks = list(stored) if stored is not None else [None] * math.prod(self.codec.chunks_per_shard)
        for coords, data in updates.items():
            chunks[self.flat(coords)] = data
        live_flat = {self.flat(c) for c in live}
        return self.codec.assemble([c if i in live_flat else None for i, c in enumerate(chunks)])
