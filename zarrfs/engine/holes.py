"""Holes in an array's flat file, for lseek's SEEK_DATA and SEEK_HOLE.

A chunk that is not stored reads as the fill value. When the fill value's bytes are all zero,
the elements of such chunks are a hole in the POSIX sense (they read as zeros and cost no
storage), so `cp`, `tar -S` and `bsdtar` can skip them. A fill value with any nonzero byte
(NaN, -0.0, 1) makes no holes: a copy that punched holes there would read back as zeros.

In C order a flat span belongs to a chunk only row piece by row piece, so the search runs over
chunk-coordinate prefixes: every element below a prefix that has no stored chunk (or only
stored chunks) shares the answer, and is skipped whole.
"""

import errno
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from zarrfs.codecs.shard_format import EMPTY
from zarrfs.errors import MetadataError, ZarrfsError
from zarrfs.format.v3 import ArrayMetadata, ChunkKeyEncoding
from zarrfs.geometry import ChunkShape, grid_shape, index_of, size_of, start_of

if TYPE_CHECKING:  # array.py needs nothing of this module, but the engine is imported from the top
    from zarrfs.engine.array import Array

SEEK_DATA = getattr(os, "SEEK_DATA", 3)
SEEK_HOLE = getattr(os, "SEEK_HOLE", 4)


class SeekError(OSError):
    pass


def coords_of(relative: str, encoding: ChunkKeyEncoding, grid: tuple[int, ...]) -> tuple[int, ...] | None:
    """The chunk coordinates a stored key (relative to its array) stands for, None if it is
    not a chunk of this grid."""
    sep = encoding.separator
    if encoding.name == "default":
        if relative == "c" and not grid:
            return ()
        if not relative.startswith("c" + sep):
            return None
        parts = relative[2:].split(sep)
    else:
        if relative == "0" and not grid:
            return ()
        parts = relative.split(sep)
    if len(parts) != len(grid) or not all(p.isdigit() for p in parts):
        return None
    coords = tuple(int(p) for p in parts)
    return coords if all(c < g for c, g in zip(coords, grid, strict=False)) else None


class Presence:
    """Which chunks of a chunk grid are stored, answering 'the first stored (or absent) element
    from here on'."""

    def __init__(self, shape: Sequence[int], chunk_shape: ChunkShape, present: Iterable[tuple[int, ...]]):
        self.shape, self.chunks = tuple(shape), tuple(chunk_shape)
        self.grid = grid_shape(self.shape, self.chunks)
        present = {p for p in present if all(c < g for c, g in zip(p, self.grid, strict=False))}
        self.stored = present
        self.scalar_present = () in present
        self.counts = Counter(p[:k] for p in present for k in range(1, len(self.shape) + 1))
        self.below = [math.prod(self.grid[k:]) for k in range(len(self.shape) + 1)]  # chunks under a prefix

    @classmethod
    def from_keys(cls, keys: Iterable[str], meta: ArrayMetadata) -> "Presence":
        grid = grid_shape(meta.shape, meta.chunk_shape)
        present = (coords_of(k, meta.chunk_key_encoding, grid) for k in keys)
        return cls(meta.shape, meta.chunk_shape, [c for c in present if c is not None])

    @classmethod
    def of_array(cls, keys: Iterable[str], meta: ArrayMetadata, array: "Array") -> "Presence":
        """Stored chunks from the keys; for a sharded array, stored inner chunks, from the index
        of each stored shard (read through the array's shard view, which keeps it for reads;
        never a chunk). A shard whose index cannot be read counts as data throughout."""
        shards = cls.from_keys(keys, meta)
        sharding = array.chain.sharding
        if sharding is None:
            return shards
        inner = tuple(sharding.inner_chunk_shape)  # regular across shards: each shard is a multiple of it
        present: list[tuple[int, ...]] = []
        for coords in shards.stored:
            shard_codec = array.chain_at(coords).sharding
            if shard_codec is None:  # every shard's chain is the array's, with its own shard shape
                raise MetadataError(f"{array.source.key(coords)}: a shard whose codecs have no sharding codec")
            per_shard = tuple(shard_codec.chunks_per_shard)  # rectilinear: per shard
            first = [start_of(c, s) // n for c, s, n in zip(meta.chunk_shape, coords, inner, strict=False)]
            try:
                index = array.shard_index(coords)
            except ZarrfsError:
                index = None
            stored = range(math.prod(per_shard)) if index is None else np.flatnonzero(index[:, 0] != EMPTY)
            for flat in stored:
                local = np.unravel_index(int(flat), per_shard) if per_shard else ()
                present.append(tuple(f + int(i) for f, i in zip(first, local, strict=False)))
        return cls(meta.shape, inner, present)

    def find(self, element: int, data: bool) -> int | None:
        """The first flat (C-order) element index >= `element` whose chunk is stored (data) or
        not (not data); None when there is none."""
        if not self.shape:
            return element if element == 0 and self.scalar_present == data else None
        start: list[int] = []
        rest = element
        for n in reversed(self.shape):
            rest, i = divmod(rest, n)
            start.append(i)
        if rest:
            return None
        found = self._find(0, (), [], start[::-1], True, data)
        if found is None:
            return None
        flat = 0
        for i, n in zip(found, self.shape, strict=False):
            flat = flat * n + i
        return flat

    def _find(self, k: int, prefix: tuple[int, ...], elements: list[int], start: list[int], tight: bool,
              data: bool) -> list[int] | None:
        n = len(self.shape)
        lo = start[k] if tight else 0
        while lo < self.shape[k]:
            c = self.chunks[k]
            g = index_of(c, lo)
            end = start_of(c, g) + size_of(c, g)
            p = prefix + (g,)
            count = self.counts.get(p, 0)
            full, empty = count == self.below[k + 1], count == 0
            if (data and full) or (not data and empty):  # every element below answers
                return elements + [lo] + (start[k + 1:] if tight else [0] * (n - k - 1))
            if not (empty or full):  # mixed: look inside this row, and (the same) at the next
                found = self._find(k + 1, p, elements + [lo], start, tight, data)
                if found is None and tight and lo + 1 < min(end, self.shape[k]):
                    found = self._find(k + 1, p, elements + [lo + 1], start, False, data)
                if found is not None:
                    return found
            lo, tight = end, False
        return None


def seek(presence: Presence | None, itemsize: int, size: int, offset: int, whence: int) -> int:
    """lseek(SEEK_DATA / SEEK_HOLE) over a flat file of `size` bytes; presence None: no holes."""
    if offset < 0 or offset >= size:
        raise SeekError(errno.ENXIO, "offset past the end")
    element = offset // itemsize
    if whence == SEEK_DATA:
        found = element if presence is None else presence.find(element, True)
        if found is None:
            raise SeekError(errno.ENXIO, "no data after the offset")
        return max(offset, found * itemsize)
    if whence == SEEK_HOLE:
        found = None if presence is None else presence.find(element, False)
        return size if found is None else max(offset, found * itemsize)
    raise SeekError(errno.EINVAL, "unsupported whence")


def zero_fill(meta: ArrayMetadata) -> bool:
    """The fill value's bytes are all zero, so unstored chunks are holes."""
    try:
        return not any(np.asarray(meta.fill_value).tobytes())
    except (AttributeError, TypeError, ValueError):
        return False
