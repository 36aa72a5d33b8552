"""Part of a blosc chunk: only the blocks that hold the bytes a small read wants.

blosc compresses a chunk in blocks (tens to hundreds of KiB) that decode on their own, and
c-blosc's blosc_getitem decodes just the blocks that hold a run of items. numcodecs links that
library in but no longer exposes the call (Blosc.decode_partial is gone from 0.16), so it is
called through ctypes from numcodecs' own extension: the code that decodes whole chunks.

The blocks' stored bytes can be found before the chunk is read: its header and block starts
lie at its beginning (stored_ranges), so a small read on a local store reads only those
(engine/stored_parts.py), and decodes each block as a chunk of one block (decode_stored_blocks):
blosc_getitem decodes a block into scratch memory and copies it out, blosc_decompress straight
into place (26 µs instead of 36 for a 512 KiB block whose memory the CPU caches hold).
"""

import ctypes
import struct
from collections.abc import Callable

import numcodecs.blosc
import numpy as np

from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError

HEADER = 16  # bytes of the blosc 1 header; the block starts follow it
ONE_BLOCK = HEADER + 4  # the header and block start of a chunk of one block
MEMCPYED = 0x2  # header flag: stored uncompressed, no block starts
DONT_SPLIT = 0x10  # header flag: blocks are compressed whole, not split by byte of the type
PREFIX = 4096  # stored bytes read first for a part: the header and up to 1020 block starts


def _getitem() -> Callable[[int, int, int, int], int] | None:
    """c-blosc's blosc_getitem(source, start, nitems, dest), None when this numcodecs has none."""
    try:
        function = ctypes.CDLL(numcodecs.blosc.__file__).blosc_getitem
    except (OSError, AttributeError):  # a numcodecs built otherwise: whole chunks only
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


_GETITEM = _getitem()


def blosc_blocks(data: BytesLike, out: np.ndarray, wanted: list[int]) -> bool:
    """Decode the blocks that hold bytes [wanted[0], wanted[1]) of the blosc chunk `data` (whose
    header agrees with its length: bounded.check_blosc_header) into the same bytes of the uint8
    array `out`, and widen `wanted` to them: later reads within those blocks need no decode.
    False when it cannot (the caller decodes the whole chunk)."""
    header = bytes(data[:HEADER])
    flags, typesize = header[2], header[3]
    nbytes, blocksize, cbytes = (int.from_bytes(header[i:i + 4], "little") for i in (4, 8, 12))
    if _GETITEM is None or not typesize or nbytes % typesize or nbytes != len(out) or blocksize <= 0:
        return False
    if not flags & MEMCPYED:  # getitem trusts the block starts: check them first
        nblocks = -(-nbytes // blocksize)
        if HEADER + 4 * nblocks > cbytes:
            raise CorruptChunkError(f"undecodable blosc stream ({nblocks} blocks do not fit in {cbytes} bytes)")
        starts = np.frombuffer(data, "<i4", nblocks, HEADER)
        if nblocks and (starts.min() < HEADER + 4 * nblocks or starts.max() >= cbytes):
            raise CorruptChunkError("undecodable blosc stream (a block starts outside the chunk)")
    start, stop = wanted[0] // blocksize * blocksize, min(nbytes, -(-wanted[1] // blocksize) * blocksize)
    if start % typesize or stop % typesize:
        return False
    first, last = start // typesize, stop // typesize
    source = np.frombuffer(data, "u1")
    target = out[first * typesize:last * typesize]
    decoded = _GETITEM(source.ctypes.data, first, last - first, target.ctypes.data)
    if decoded != len(target):
        raise CorruptChunkError(f"undecodable blosc stream (blosc_getitem: {decoded})")
    wanted[:] = start, stop
    return True


def stored_ranges(prefix: BytesLike, stored_size: int, decoded_size: int, wanted: list[int]) -> list[tuple[int, int]] | None:
    """The stored bytes, as [start, stop) ranges, that blosc_blocks needs to decode the bytes
    `wanted` of a blosc chunk of `stored_size` bytes, from the chunk's first bytes `prefix`.
    None when the prefix does not hold every block start, or blosc_blocks could not decode a
    part (the caller reads the chunk whole). Blocks compressed on several threads may be stored
    out of order: a block ends where the next start above its own begins."""
    if len(prefix) < HEADER:
        raise CorruptChunkError(f"undecodable blosc stream ({stored_size} bytes, shorter than its header)")
    header = bytes(prefix[:HEADER])
    flags, typesize = header[2], header[3]
    nbytes, blocksize, cbytes = (int.from_bytes(header[i:i + 4], "little") for i in (4, 8, 12))
    if cbytes != stored_size:
        raise CorruptChunkError(f"undecodable blosc stream (header says {cbytes} bytes, chunk has {stored_size})")
    if _GETITEM is None or not typesize or nbytes % typesize or nbytes != decoded_size or blocksize <= 0:
        return None
    first, last = wanted[0] // blocksize, (wanted[1] - 1) // blocksize
    if flags & MEMCPYED:  # the decoded bytes as they are, after the header
        return [(HEADER + first * blocksize, HEADER + min(nbytes, (last + 1) * blocksize))]
    nblocks = -(-nbytes // blocksize)
    if HEADER + 4 * nblocks > len(prefix):
        return None
    starts = struct.unpack_from(f"<{nblocks}i", prefix, HEADER)
    if nblocks and not HEADER + 4 * nblocks <= min(starts) <= max(starts) < cbytes:  # any block: as a whole decode
        raise CorruptChunkError("undecodable blosc stream (a block starts outside the chunk)")
    ranges: list[tuple[int, int]] = []
    for start in starts[first:last + 1]:
        stop = min((s for s in starts if s > start), default=cbytes)
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], stop)
        else:
            ranges.append((start, stop))
    return ranges


def decode_stored_blocks(stored: np.ndarray, out: np.ndarray, wanted: list[int]) -> bool:
    """As blosc_blocks, from `stored`: a writable uint8 array as long as the chunk, of which the
    header, the block starts and the blocks stored_ranges named are filled (stored_ranges checked
    the header against the chunk and `out`). Each block becomes a chunk of one block in place: a
    header and a block start are written over the 20 bytes before it (the block starts, or the end
    of a block decoded already: blocks go in stored order), and blosc decodes it into `out`.
    False for a chunk stored uncompressed (blosc_blocks copies it)."""
    header = bytes(stored[:HEADER])
    flags = header[2]
    nbytes, blocksize, cbytes = (int.from_bytes(header[i:i + 4], "little") for i in (4, 8, 12))
    if flags & MEMCPYED:
        return False
    nblocks = -(-nbytes // blocksize)
    starts = struct.unpack_from(f"<{nblocks}i", stored, HEADER)
    first, last = wanted[0] // blocksize, (wanted[1] - 1) // blocksize
    for start, block in sorted((starts[j], j) for j in range(first, last + 1)):
        stop = min((s for s in starts if s > start), default=cbytes)
        size = min(blocksize, nbytes - block * blocksize)
        one = stored[start - ONE_BLOCK:stop]
        # a last block cut short was compressed unsplit: its chunk of one block says so, and is as long as it
        kind = header[:2] + bytes([flags | (DONT_SPLIT if size < blocksize else 0), header[3]])
        one[:ONE_BLOCK] = np.frombuffer(kind + struct.pack("<4i", size, size, len(one), ONE_BLOCK), "u1")
        try:
            numcodecs.blosc.decompress(one, out[block * blocksize:block * blocksize + size])
        except RuntimeError as e:
            raise CorruptChunkError(f"undecodable blosc stream (block {block}: {e})") from None
    wanted[:] = first * blocksize, min(nbytes, (last + 1) * blocksize)
    return True
