"""READ replies made of memory that libfuse sends and then frees: the read_buf callback.

With the read callback, libfuse allocates a reply buffer and the file system fills it. A chunk
decoded ahead (decode_ahead.py) already sits in memory of its own, and copying it into libfuse's
buffer cost a quarter of a blosc request's time. With read_buf the file system answers with a
fuse_bufvec instead; libfuse writes its memory to the kernel and free()s it and the bufvec. So
a request for exactly one chunk decoded ahead sends that chunk's memory as it is, and any
other request is decoded into new memory, as before into libfuse's.

Stored-as-is bytes (engine/stored_as_is.py) are answered with buffers that are a file
descriptor and an offset (FUSE_BUF_IS_FD): libfuse reads them itself, or splices them into
/dev/fuse when splice_write is negotiated, and Python never touches the bytes. libfuse reads
the descriptors after the callback returns, and neither closes nor frees them: each thread
keeps the ones it lent until its next callback (by then that reply is sent), so at most
MAX_RANGES descriptors per libfuse thread stay open between requests.
"""

import ctypes
import os
import threading

from zarrfs.engine import stored_as_is
from zarrfs.engine.buffers import calloc, free, malloc_array
from zarrfs.fuse.libfuse import mfusepy

FUSE_BUF_IS_FD, FUSE_BUF_FD_SEEK, FUSE_BUF_FD_RETRY = 1 << 1, 1 << 2, 1 << 3
FD_FLAGS = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY  # pread at pos, again after a short read
_lent = threading.local()  # .fds: the descriptors this thread's last reply reads from
_all_lent: dict[int, tuple[int, list[int]]] = {}  # id(list) -> (native thread id, that thread's list)
LENDING_THREADS = 16  # past this many threads that lent, ended ones are looked for
_all_lent_lock = threading.Lock()


class FuseBuf(ctypes.Structure):  # struct fuse_buf (fuse_common.h)
    _fields_ = [("size", ctypes.c_size_t), ("flags", ctypes.c_int), ("mem", ctypes.c_void_p),
                ("fd", ctypes.c_int), ("pos", ctypes.c_int64)]


class FuseBufvec(ctypes.Structure):  # struct fuse_bufvec, with its one inline fuse_buf
    _fields_ = [("count", ctypes.c_size_t), ("idx", ctypes.c_size_t), ("off", ctypes.c_size_t),
                ("buf", FuseBuf * 1)]


BUFVEC_BYTES = 2 * ctypes.sizeof(FuseBufvec)  # zeroed: room for fields later libfuse versions add
# struct fuse_buf grew a size_t mem_size in libfuse 3.17: the stride of a bufvec's array of them
BUF_STRIDE = ctypes.sizeof(FuseBuf) + (8 if (mfusepy.fuse_version_major, mfusepy.fuse_version_minor) >= (3, 17) else 0)


def read_buf(file, bufpp, size: int, offset: int) -> int:
    """Answer a READ of `file` (a RawFile, PrefixedFile or bytes) through *bufpp; 0 on success,
    as libfuse wants (the reply's size is the buffer's)."""
    if isinstance(file, bytes):
        address, n = _copied(file[offset:offset + size])
    elif hasattr(file, "read_malloced"):
        address, n = file.read_malloced(offset, size)
    else:
        address, out = malloc_array((max(0, min(size, file.size - offset)),), "u1")
        try:
            n = file.read_into(offset, out)
        except BaseException:
            del out
            free(address)
            raise
    try:
        vector = calloc(BUFVEC_BYTES)
    except MemoryError:
        free(address)
        raise
    reply = FuseBufvec.from_address(vector)
    reply.count = 1
    reply.buf[0].size, reply.buf[0].mem, reply.buf[0].fd = n, address, -1
    ctypes.cast(bufpp, ctypes.POINTER(ctypes.c_void_p))[0] = vector  # libfuse frees both after replying
    return 0


def _copied(data: bytes) -> tuple[int, int]:
    address, out = malloc_array((len(data),), "u1")
    ctypes.memmove(address, data, len(data))
    return address, len(data)


def read_stored(opened: stored_as_is.Opened, bufpp) -> int:
    """Answer a READ with the descriptors and ranges of stored files the core gave
    (FileSystem.stored_ranges): libfuse reads them itself. 0 on success, as libfuse wants."""
    try:
        vector = calloc(ctypes.sizeof(FuseBufvec) + BUF_STRIDE * len(opened.ranges) + 64)
    except MemoryError:
        opened.close()
        raise
    reply = FuseBufvec.from_address(vector)
    reply.count = len(opened.ranges)
    first = vector + FuseBufvec.buf.offset
    for i, (fd, position, length) in enumerate(opened.ranges):
        buf = FuseBuf.from_address(first + i * BUF_STRIDE)
        buf.size, buf.flags, buf.fd, buf.pos = length, FD_FLAGS, fd, position
    _lend(list(opened.fds.values()))
    ctypes.cast(bufpp, ctypes.POINTER(ctypes.c_void_p))[0] = vector  # libfuse frees it, not the descriptors
    return 0


def _lend(fds: list[int]) -> None:
    held = getattr(_lent, "fds", None)
    if held is None:
        held = _lent.fds = []
        with _all_lent_lock:
            _forget_ended_threads()
            _all_lent[id(held)] = (threading.get_native_id(), held)
    held.extend(fds)


def _forget_ended_threads() -> None:
    """libfuse ends idle worker threads: close what the ended ones lent last, so that the
    descriptors held stay bounded by the threads alive."""
    if len(_all_lent) < LENDING_THREADS:
        return
    alive = {int(tid) for tid in os.listdir("/proc/self/task")}
    for key, (tid, held) in list(_all_lent.items()):
        if tid not in alive:
            while held:
                os.close(held.pop())
            del _all_lent[key]


def release_lent() -> None:
    """Close the descriptors this thread's last reply was read from: called at the start of
    each of its callbacks, when libfuse has sent that reply."""
    held = getattr(_lent, "fds", None)
    while held:
        os.close(held.pop())


def release_all_lent() -> None:
    """At unmount, when no reply is in flight any more: every thread's descriptors."""
    with _all_lent_lock:
        for _, held in _all_lent.values():
            while held:
                os.close(held.pop())
