"""Stored parts: a small read of a chunk that decodes in blocks reads only the stored bytes of
the blocks it wants.

A 4 KiB read in a 1 MiB blosc chunk decodes the block that holds it (codecs/blosc_blocks.py).
Reading the whole stored chunk for that costs most of what the decode does: 0.6 MB copied from
the page cache, memory no CPU cache holds (about 50 µs a read here, the block's decode 70-80).
On a local store the read opens the chunk's file, reads its header and block starts, then the
blocks it wants, into a lent buffer: 22 µs of reads for a chunk of two blocks.

Only on local stores: on an object store the header would cost a round trip of its own, more
than the bytes it saves. Only chunks of a store (a shard's inner chunks are read through their
shard's index). A chunk whose part cannot be read so is read whole, as before.
"""

import enum
import os
from typing import Literal, Protocol

import numpy as np

from zarrfs.codecs.chain import CodecChain
from zarrfs.engine.buffers import scratch
from zarrfs.engine.chunk_sources import ChunkSource, StoreChunks
from zarrfs.errors import CorruptChunkError, StoreError


class PartsArray(Protocol):
    """What a read of stored parts asks of an Array (engine/array.py, which imports this module)."""

    @property
    def source(self) -> ChunkSource: ...

    def chain_at(self, coords: tuple[int, ...]) -> CodecChain: ...


class _NotRead(enum.Enum):
    """decode_part's answer when the chunk must be read whole (an enum, so that `is` narrows it)."""

    NOT_READ = enum.auto()


NOT_READ = _NotRead.NOT_READ
MIN_LENT = 64 << 10  # lent buffers come in powers of two from this up: stored sizes vary by chunk


def readable(array: PartsArray, coords: tuple[int, ...]) -> bool:
    """Whether a small read of chunk `coords` may read only stored parts of it."""
    source = array.source
    if not isinstance(source, StoreChunks):
        return False
    capabilities = source.store.capabilities
    return not capabilities.remote and capabilities.file_values and array.chain_at(coords).reads_parts


def decode_part(array: PartsArray, coords: tuple[int, ...], into: np.ndarray,
                wanted: list[int]) -> np.ndarray | None | Literal[_NotRead.NOT_READ]:
    """`into` decoded at least over the bytes `wanted` (widened to what was decoded) from the
    stored ranges that hold them; None when the chunk is not stored; NOT_READ when it must be
    read whole."""
    source = array.source
    if not isinstance(source, StoreChunks):  # readable() said no
        return NOT_READ
    key = source.key(coords)
    store = source.store
    fd = store.open_value(key)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        lent = max(MIN_LENT, 1 << max(0, size - 1).bit_length())
        with scratch.lend((lent,), np.uint8) as buffer:
            read = lambda offset, view: _read_into(fd, view, offset, size)  # noqa: E731
            done = array.chain_at(coords).decode_part(read, buffer[:size], into, wanted)
    except OSError as e:
        raise StoreError.from_os("cannot read", key, e) from None
    finally:
        os.close(fd)
    return into if done else NOT_READ


def _read_into(fd: int, view: np.ndarray, offset: int, size: int) -> None:
    """Fill `view` with the file's bytes from `offset` (a value is never changed in place: a
    descriptor reads one version, so a short file is a corrupt chunk, not a race)."""
    memory = memoryview(view).cast("B")
    while memory:
        n = os.preadv(fd, [memory], offset)
        if n == 0:
            raise CorruptChunkError(f"stored chunk ends before byte {offset} of the {size} it had")
        memory, offset = memory[n:], offset + n
