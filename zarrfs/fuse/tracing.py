"""`-d`: one log line per FUSE request, so that a user can see what a tool does to the mount.

    zarrfs[41] DEBUG zarrfs.fuse.tracing: read /temperature.bin offset=0 size=131072 -> 131072 (1.84 ms)

Chunk decodes and store reads are logged by the modules that do them (array, store). The
binding's own set-up chatter is silenced: it says nothing a user can act on.
"""

import ctypes
import logging
import time

from zarrfs.fuse.binding import ZarrFUSE
from zarrfs.fuse.replies import FuseBufvec

log = logging.getLogger(__name__)

SIZED = {"read", "read_buf", "write"}  # (path, buffer, size, offset, fi)
SEEK = {"lseek"}  # (path, offset, whence, fi)
LISTED = {"readdir_fuse_3"}  # (path, buffer, filler, offset, fi, flags)


def quiet_binding() -> None:
    for name in ("fuse", "mfusepy"):
        logging.getLogger(name).setLevel(logging.INFO)


def describe(name: str, args: tuple) -> str:
    path = args[0].decode(errors="replace") if args and isinstance(args[0], bytes) else "-"
    if name in SIZED:
        return f"{name.removesuffix('_buf')} {path} offset={args[3]} size={args[2]}"
    if name in SEEK:
        return f"{name} {path} offset={args[1]} whence={args[2]}"
    if name in LISTED:
        return f"readdir {path} offset={args[3]}"
    return f"{name.removesuffix('_fuse_3')} {path}"


class TracingFUSE(ZarrFUSE):
    """The binding, logging each request as it is answered: what, where, result, time taken."""

    def _wrapper(self, func, *args, **kwargs):
        started = time.perf_counter()
        result = super()._wrapper(func, *args, **kwargs)
        if func.__name__ == "read_buf" and result == 0:  # the reply's size, as a read returns it
            result = ctypes.cast(args[1], ctypes.POINTER(ctypes.POINTER(FuseBufvec)))[0][0].buf[0].size
        log.debug("%s -> %s (%.2f ms)", describe(func.__name__, args), result, (time.perf_counter() - started) * 1e3)
        return result
