"""The FUSE limit for the benchmark: one read-only file served from memory, no decoding.

    python scripts/trivial_fuse.py DATA_FILE MOUNTPOINT [GB_PER_S]

Mounts MOUNTPOINT/data.bin holding DATA_FILE's bytes, with the transport settings zarrfs uses
(1 MiB requests, kernel page cache kept, the read callback filling the kernel's buffer), and
stays in the foreground until unmounted. Whatever zarrfs cannot beat shows here.

GB_PER_S paces the replies to that rate (sleeping, no work): the same file filled as slowly as
zarrfs fills its own. The kernel allocates a FUSE file's page cache one 4 KiB page at a time,
and the slower a file is filled, the more scattered its pages are in physical memory, which
makes later re-reads from the page cache slower; this control shows how much.
"""

import ctypes
import errno
import os
import stat
import sys
import threading
import time

os.environ["FUSE_LIBRARY_NAME"] = "fuse3"
import mfusepy  # noqa: E402

MIB = 1 << 20


class Trivial(mfusepy.Operations):
    use_ns = True

    def __init__(self, data: bytes):
        self.size = len(data)
        self.buffer = ctypes.create_string_buffer(data, self.size)

    def init_with_config(self, conn, config):
        if conn is not None:
            conn.max_read = conn.max_readahead = MIB
        if config is not None:
            config.kernel_cache = 1
            config.attr_timeout = config.entry_timeout = 30.0

    def getattr(self, path, fh=None):
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2}
        if path == "/data.bin":
            return {"st_mode": stat.S_IFREG | 0o444, "st_nlink": 1, "st_size": self.size, "st_blksize": MIB}
        raise mfusepy.FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "data.bin"]

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        """Unused (TrivialFUSE.read answers), but mfusepy registers its read callback for it."""
        n = max(0, min(size, self.size - offset))
        return ctypes.string_at(ctypes.addressof(self.buffer) + offset, n)


class Pace:
    """Replies at most `rate` bytes per second in all, however many requests are in flight."""

    def __init__(self, rate: float):
        self.rate = rate
        self.free_at = 0.0
        self.lock = threading.Lock()

    def wait(self, n: int) -> None:
        with self.lock:
            now = time.monotonic()
            due = max(now, self.free_at) + n / self.rate
            self.free_at = due
        time.sleep(max(0.0, due - now))


class TrivialFUSE(mfusepy.FUSE):
    pace: Pace | None = None

    def read(self, path, buf, size, offset, fip):
        """One copy, straight into the kernel's buffer, as zarrfs decodes into it."""
        ops = self.operations
        n = max(0, min(size, ops.size - offset))
        ctypes.memmove(buf, ctypes.addressof(ops.buffer) + offset, n)
        if self.pace is not None:
            self.pace.wait(n)
        return n


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        contents = f.read()
    if len(sys.argv) > 3:
        TrivialFUSE.pace = Pace(float(sys.argv[3]) * 1e9)
    # named after the file it serves, as zarrfs is after its source: a run finds its own mounts
    TrivialFUSE(Trivial(contents), sys.argv[2], foreground=True, ro=True, max_read=MIB,
                max_threads=16, max_idle_threads=16, fsname=os.path.abspath(sys.argv[1]))
