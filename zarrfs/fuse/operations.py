"""The FUSE adapter: one short method per FUSE operation, under one errno boundary.

Each calls the file system core (fs/filesystem.py), which knows nothing of FUSE, and converts
its records and typed errors; what only libfuse needs is here: the connection's settings
(init_with_config), replies of memory libfuse frees (read_buf), and the kernel's page caches
(page_invalidation.Siblings, given to the core as its KernelCaches).
"""

import ctypes

import numpy as np

from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.fs.core import FileSystemCore
from zarrfs.fs.filesystem import BLKSIZE, Attributes, Options
from zarrfs.fs.hierarchy import Entry
from zarrfs.fs.kernel_caching import KernelCaching
from zarrfs.fs.versions import mount_core
from zarrfs.fuse import replies
from zarrfs.fuse.errno_boundary import errno_boundary
from zarrfs.fuse.libfuse import mfusepy
from zarrfs.fuse.page_invalidation import Siblings

FUSE_CAP_READDIRPLUS_AUTO = 1 << 14
FUSE_CAP_SPLICE_WRITE = 1 << 7  # replies of file descriptors spliced into /dev/fuse (replies.read_stored)
FUSE_CAP_AUTO_INVAL_DATA = 1 << 12  # the kernel drops a file's pages when a getattr shows a new mtime or size


class Operations(mfusepy.Operations):
    use_ns = True

    def __init__(self, source: str, options: Options):
        self.siblings = Siblings()
        # a FileSystem, or for an Icechunk repository a VersionedFileSystem: mypy holds both to the protocol here
        self.core: FileSystemCore = mount_core(source, options, HierarchyEdits, self.siblings)
        self.on_ready = self.on_stop = None  # callbacks: the mount is live / is going away
        self.caching: KernelCaching | None = None  # decided in init_with_config, before any open

    # what the binding and the command line read of the core

    @property
    def options(self) -> Options:
        return self.core.options

    @property
    def writes(self) -> int:
        """Writes so far: attributes listed before one are stale (binding.ZarrFUSE)."""
        return self.core.writes

    @property
    def unstored(self) -> list[str]:
        """Arrays whose written data could not be stored at shutdown."""
        return self.core.unstored

    def attributes(self, entry: Entry) -> Attributes | None:
        """A listed entry's attributes; None: the name is listed alone (FileSystem.attributes)."""
        return self.core.attributes(entry)

    def uncached(self, fh) -> bool:
        return self.core.uncached(fh)

    def keeps_pages(self, fh) -> bool:
        """Whether the kernel keeps the pages it holds of the file just opened as `fh` (the open's
        keep_cache): not when the core found the stored values changed by another writer."""
        return self.caching is not None and self.caching.keep_pages and self.core.pages_current(fh)

    def node_of(self, fh) -> str:
        """What an open file is, for the errno boundary's log lines."""
        return self.core.node_of(fh)

    # lifecycle

    def init_with_config(self, conn, config):
        caching = self.caching = self.core.kernel_caching()
        if conn is not None:
            conn.max_read = BLKSIZE
            conn.max_readahead = BLKSIZE
            conn.max_write = BLKSIZE
            conn.want &= ~FUSE_CAP_READDIRPLUS_AUTO  # attributes with every page of a listing, not the first only
            if self.options.zero_copy:
                conn.want |= conn.capable & FUSE_CAP_SPLICE_WRITE
            if not caching.drop_pages_on_change:  # libfuse wants it by default (see kernel_caching.py)
                conn.want &= ~FUSE_CAP_AUTO_INVAL_DATA
        if config is not None:
            config.hard_remove = 1  # unlink removes at once: never a rename to .fuse_hidden while open
            config.use_ino = 1  # inode numbers of ours (inode_number): readdir's '.' and '..' carry them too
            self._configure_caching(config, caching)
        self.siblings.start()  # in libfuse's init: the only context that knows the struct fuse
        self.core.start()  # its watcher may drop the kernel's pages at once: Siblings is ready first
        if self.on_ready:
            self.on_ready()

    @staticmethod
    def _configure_caching(config, caching: KernelCaching) -> None:
        config.attr_timeout, config.entry_timeout = caching.attr_timeout, caching.entry_timeout
        config.negative_timeout = caching.negative_timeout
        config.kernel_cache = 0  # each open says whether the pages are kept (ZarrFUSE.open, keeps_pages)
        if caching.recheck_pages_after is not None:
            config.auto_cache, config.ac_attr_timeout_set = 1, 1
            config.ac_attr_timeout = caching.recheck_pages_after

    def destroy(self, path):
        self.core.stop()  # the flusher ends, then every write is stored
        replies.release_all_lent()  # descriptors lent to replies libfuse has sent
        if self.on_stop:
            self.on_stop()

    # metadata

    @errno_boundary
    def getattr(self, path, fh=None):
        return self.core.getattr(path)

    @errno_boundary
    def readdir(self, path, fh):
        return self.core.readdir(path)

    @errno_boundary
    def statfs(self, path):
        return self.core.statfs()

    @errno_boundary
    def utimens(self, path, times=None):
        self.core.utimens(path)
        return 0

    @errno_boundary
    def access(self, path, amode):
        self.core.access(path, amode)
        return 0

    # open, read, write

    @errno_boundary
    def open(self, path, flags):
        return self.core.open(path, flags)

    @errno_boundary
    def create(self, path, mode, flags=0):
        return self.core.create(path, flags)

    @errno_boundary
    def read(self, path, size, offset, fh):
        """mfusepy registers its read callback because this exists; ZarrFUSE serves reads with
        read_into instead, and a plain mfusepy.FUSE would call this."""
        return self.core.read(fh, offset, size)

    @errno_boundary
    def read_into(self, fh, buffer, size, offset) -> int:
        """The binding's read: decode straight into the kernel's reply buffer."""
        out = np.ctypeslib.as_array(ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ubyte)), shape=(size,))
        return self.core.read_into(fh, offset, out)

    @errno_boundary
    def read_buf(self, fh, bufpp, size, offset) -> int:
        """The binding's read: the stored files' ranges the core gives, which libfuse reads
        itself; else a reply of memory libfuse frees, a chunk decoded ahead as it is."""
        stored, file = self.core.read_source(fh, offset, size)
        if stored is not None:
            return replies.read_stored(stored, bufpp)
        if file is None:
            return replies.read_buf(self.core.read(fh, offset, size), bufpp, size, 0)
        return replies.read_buf(file, bufpp, size, offset)

    @errno_boundary
    def lseek(self, path, offset, whence, fh):
        return self.core.lseek(fh, offset, whence)

    @errno_boundary
    def write(self, path, data, offset, fh):
        return self.core.write(fh, data, offset)

    @errno_boundary
    def truncate(self, path, length, fh=None):
        self.core.truncate(path, length, fh)
        return 0

    @errno_boundary
    def flush(self, path, fh):
        self.core.flush(fh)
        return 0

    @errno_boundary
    def fsync(self, path, datasync, fh):
        self.core.fsync(fh)
        return 0

    @errno_boundary
    def release(self, path, fh):
        self.core.release(fh)
        return 0

    # hierarchy edits

    @errno_boundary
    def mkdir(self, path, mode):
        self.core.mkdir(path)
        return 0

    @errno_boundary
    def rmdir(self, path):
        self.core.rmdir(path)
        return 0

    @errno_boundary
    def unlink(self, path):
        self.core.unlink(path)
        return 0

    @errno_boundary
    def rename(self, old, new, flags=0):
        self.core.rename(old, new, flags)
        return 0

    @errno_boundary
    def chmod(self, path, mode):
        self.core.change_owner_or_mode(path)
        return 0

    @errno_boundary
    def chown(self, path, uid, gid):
        self.core.change_owner_or_mode(path)
        return 0

    @errno_boundary
    def symlink(self, target, source):
        self.core.refuse_change(target)

    @errno_boundary
    def link(self, target, source):
        self.core.refuse_change(target)

    @errno_boundary
    def mknod(self, path, mode, dev):
        self.core.refuse_change(path)

    # extended attributes

    @errno_boundary
    def listxattr(self, path):
        return self.core.listxattr(path)

    @errno_boundary
    def getxattr(self, path, name, position=0):
        return self.core.getxattr(path, name)

    @errno_boundary
    def setxattr(self, path, name, value, options, position=0):
        self.core.setxattr(path, name, value, options)
        return 0

    @errno_boundary
    def removexattr(self, path, name):
        self.core.removexattr(path, name)
        return 0

