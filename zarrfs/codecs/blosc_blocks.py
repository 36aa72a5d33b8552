"""Part of a blosc chunk: only the blocks that hold the bytes a small read wants.

blosc compresses a chunk in blocks (tens to hundreds of KiB) that decode on their own, and
c-blosc's blosc_getitem decodes just the blocks that hold a run of items. numcodecs links that
library in but no longer exposes the call (Blosc.decode_partial is gone from 0.16), so it is
called through ctypes from numcodecs' own extension: the code that decodes whole chunks.
"""

import ctypes

import numcodecs.blosc
import numpy as np

from zarrfs.errors import CorruptChunkError

HEADER = 16  # bytes of the blosc 1 header; the block starts follow it
MEMCPYED = 0x2  # header flag: stored uncompressed, no block starts


def _getitem():
    try:
        function = ctypes.CDLL(numcodecs.blosc.__file__).blosc_getitem
    except (OSError, AttributeError):  # a numcodecs built otherwise: whole chunks only
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


_GETITEM = _getitem()


def blosc_blocks(data, out: np.ndarray, wanted: list[int]) -> bool:
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
