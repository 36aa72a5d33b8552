"""The sharding_indexed binary format: the index (encode, decode, check), where it lies in a
shard, and a shard assembled from or split into its inner chunks. Pure functions on bytes; the
engine reads shards through them (engine/chunk_sources.py: ShardChunks)."""

from collections.abc import Callable

import numpy as np

from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError, EncodeError

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


def index_bytes(shard: BytesLike, index_nbytes: int, location: str) -> BytesLike:
    if len(shard) < index_nbytes:
        raise CorruptChunkError(f"truncated shard: {len(shard)} bytes, the index alone needs {index_nbytes}")
    return shard[:index_nbytes] if location == "start" else shard[len(shard) - index_nbytes:]


def slice_chunk(shard: BytesLike, entry: np.ndarray) -> memoryview | None:
    offset, nbytes = int(entry[0]), int(entry[1])
    if offset == EMPTY:
        return None
    if offset + nbytes > len(shard):
        raise CorruptChunkError(f"shard index entry [{offset}, {offset + nbytes}) points outside the "
                                f"{len(shard)}-byte shard")
    return memoryview(shard)[offset:offset + nbytes]


def assemble(chunks: list[BytesLike | None], index_nbytes: int, location: str,
             encode_index: Callable[[np.ndarray], BytesLike | None]) -> bytes | None:
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
    if raw_index is None:  # index_codecs end in the bytes codec, which always stores
        raise EncodeError("the shard index encodes to nothing")
    return b"".join([raw_index, *parts] if location == "start" else [*parts, raw_index])
