"""READ replies made of memory that libfuse sends and then frees: the read_buf callback.

With the read callback, libfuse allocates a reply buffer and the file system fills it. A chunk
decoded ahead (decode_ahead.py) already sits in memory of its own, and copying it into libfuse's
buffer cost a quarter of a blosc request's time. With read_buf the file system answers with a
fuse_bufvec instead; libfuse writes its memory to the kernel and free()s it and the bufvec. So
a request for exactly one chunk decoded ahead sends that chunk's memory as it is, and any
other request is decoded into new memory, as before into libfuse's.
"""

import ctypes

from zarrfs.engine.buffers import calloc, free, malloc_array


class FuseBuf(ctypes.Structure):  # struct fuse_buf (fuse_common.h)
    _fields_ = [("size", ctypes.c_size_t), ("flags", ctypes.c_int), ("mem", ctypes.c_void_p),
                ("fd", ctypes.c_int), ("pos", ctypes.c_int64)]


class FuseBufvec(ctypes.Structure):  # struct fuse_bufvec, with its one inline fuse_buf
    _fields_ = [("count", ctypes.c_size_t), ("idx", ctypes.c_size_t), ("off", ctypes.c_size_t),
                ("buf", FuseBuf * 1)]


BUFVEC_BYTES = 2 * ctypes.sizeof(FuseBufvec)  # zeroed: room for fields later libfuse versions add


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
