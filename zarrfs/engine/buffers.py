"""Scratch buffers for decoded chunks, lent for one read and then kept for the next.

A chunk that a read wants only part of, and that is not worth caching, is decoded into a lent
buffer and the buffer comes back afterwards. Memory the daemon has touched before costs far
less than new memory: a page fault per 4 KiB, and on virtual machines that hand freed memory
back to the host, a host fault as well (a kept 1 MiB decode costs 3x a recycled one here).
"""

import ctypes
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from numpy.typing import DTypeLike

MAX_POOLED_BYTES = 64 << 20  # idle buffers kept, all sizes together


class BufferPool:
    def __init__(self, max_bytes: int = MAX_POOLED_BYTES):
        self.max_bytes = max_bytes
        self.nbytes = 0  # idle buffers only
        self._idle: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def lend(self, shape: tuple[int, ...], dtype: DTypeLike) -> Iterator[np.ndarray]:
        """A C-contiguous array of `shape` and `dtype`, contents undefined, for the `with` block
        only: nothing may keep a reference to it (or to a view of it) afterwards."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        buffer = self._take(nbytes)
        try:
            yield buffer[:nbytes].view(dtype).reshape(shape)
        finally:
            self._give(buffer)

    def take(self, shape: tuple[int, ...], dtype: DTypeLike) -> tuple[np.ndarray, np.ndarray]:
        """(the buffer, to give() back later; a C-contiguous array of `shape` and `dtype` over it),
        for a holder that keeps it longer than a `with` block (see recent_chunks.py)."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        buffer = self._take(nbytes)
        return buffer, buffer[:nbytes].view(dtype).reshape(shape)

    def give(self, buffer: np.ndarray) -> None:
        self._give(buffer)

    def _take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            idle = self._idle.get(nbytes)
            if idle:
                self.nbytes -= nbytes
                return idle.pop()
        return np.empty(nbytes, "u1")

    def _give(self, buffer: np.ndarray) -> None:
        with self._lock:
            if self.nbytes + buffer.nbytes <= self.max_bytes:
                self._idle.setdefault(buffer.nbytes, []).append(buffer)
                self.nbytes += buffer.nbytes


scratch = BufferPool()


_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.calloc.restype = ctypes.c_void_p
_libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]


def malloc_array(shape: tuple[int, ...], dtype: DTypeLike) -> tuple[int, np.ndarray]:
    """(address, a C-contiguous array over it) in memory from C's malloc, which libfuse frees
    after sending a reply made of it (see replies.py). Whoever ends up owning it calls free(),
    once, after the last use of the array."""
    nbytes = max(1, math.prod(shape) * np.dtype(dtype).itemsize)
    address = _libc.malloc(nbytes)
    if not address:
        raise MemoryError(f"cannot allocate {nbytes} bytes")
    array = np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(address))
    return address, array[:math.prod(shape) * np.dtype(dtype).itemsize].view(dtype).reshape(shape)


def malloced(nbytes: int, fill: Callable[[np.ndarray], int]) -> tuple[int, int]:
    """(address, count): `nbytes` of memory from malloc, given to fill(uint8 array) which answers
    how many bytes it filled; the memory is the caller's to free, or freed here if fill raises."""
    address, out = malloc_array((nbytes,), "u1")
    try:
        return address, fill(out)
    except BaseException:
        del out
        free(address)
        raise


def calloc(nbytes: int) -> int:
    address = _libc.calloc(1, nbytes)  # an int, or None for NULL (restype c_void_p)
    if not address:
        raise MemoryError(f"cannot allocate {nbytes} bytes")
    return int(address)


def free(address: int) -> None:
    _libc.free(address)
