"""The FUSE limit for the benchmark: one read-only file served from memory, no decoding.

    python scripts/trivial_fuse.py DATA_FILE MOUNTPOINT

Mounts MOUNTPOINT/data.bin holding DATA_FILE's bytes, with the transport settings zarrfs uses
(1 MiB requests, kernel page cache kept, the read callback filling the kernel's buffer), and
stays in the foreground until unmounted. Whatever zarrfs cannot beat shows here.
"""

import ctypes
import errno
import os
import stat
import sys

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


class TrivialFUSE(mfusepy.FUSE):
    def read(self, path, buf, size, offset, fip):
        """One copy, straight into the kernel's buffer, as zarrfs decodes into it."""
        ops = self.operations
        n = max(0, min(size, ops.size - offset))
        ctypes.memmove(buf, ctypes.addressof(ops.buffer) + offset, n)
        return n


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        contents = f.read()
    TrivialFUSE(Trivial(contents), sys.argv[2], foreground=True, ro=True, max_read=MIB,
                max_threads=16, max_idle_threads=16)
