"""mfusepy with the callbacks that carry data replaced: no bytes object per read or write, and
readdir answers with full attributes (readdirplus) so that `ls -l` and file managers need no
lookup per entry."""

import ctypes
import errno
import sys
import threading
from collections import OrderedDict

from zarrfs.fuse import replies
from zarrfs.fuse.libfuse import mfusepy

FUSE_READDIR_PLUS = 1  # the kernel asks for attributes with the names
FUSE_FILL_DIR_PLUS = 2  # this entry carries them
_thread = threading.local()
PACKED_BYTES = 200  # a packed struct stat and its list slot, about


class ZarrFUSE(mfusepy.FUSE):
    def __init__(self, *args, **kwargs):
        # paths decoded as the os module decodes names (names.py): what the kernel asks for is
        # then the very str os.listdir gave, and the OS gets its bytes back
        kwargs.setdefault("encoding", sys.getfilesystemencoding())
        kwargs.setdefault("errors", "surrogateescape")
        self._stats: OrderedDict = OrderedDict()  # id(entries) -> (entries, writes, [packed struct stat])
        self._stats_entries = 0  # bounded by header_cache_size, with the headers
        self._stats_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def _wrapper(self, func, *args, **kwargs):
        """Every callback. The first in each libfuse thread keeps that thread's Python thread
        state: otherwise ctypes makes one and frees it again for every request (with an mmap and
        munmap of its frame stack), which was most of a small request's cost in the daemon."""
        if not getattr(_thread, "kept", False):
            ctypes.pythonapi.PyGILState_Ensure()  # never released: the count stays above zero
            _thread.kept = True
        replies.release_lent()  # this thread's last reply is sent: its descriptors can go
        return super()._wrapper(func, *args, **kwargs)

    def read(self, path, buf, size, offset, fip):
        return self.operations.read_into(fip.contents.fh, buf, size, offset)

    def read_buf(self, path, bufpp, size, offset, fip):
        """libfuse calls this rather than read: the reply is memory of ours (replies.py)."""
        return self.operations.read_buf(fip.contents.fh, bufpp, size, offset)

    def open(self, path, fip):
        """Some files are served with direct I/O (FileSystem.uncached): text, whose size is not
        known before it is made, and IMAGE.ome.tif, whose reads must not be read ahead. Others
        keep the kernel's pages across opens unless another writer changed the file
        (Operations.keeps_pages): libfuse's kernel_cache is off so that an open can say so."""
        fi = fip.contents
        fi.fh = self.operations.open(path.decode(self.encoding, self.errors), fi.flags)
        if self.operations.uncached(fi.fh):
            fi.direct_io = 1
        fi.keep_cache = int(self.operations.keeps_pages(fi.fh))
        return 0

    def write(self, path, buf, size, offset, fip):
        """The request's bytes as a view: valid during this call only, and RawFile copies them."""
        data = memoryview(ctypes.cast(buf, ctypes.POINTER(ctypes.c_ubyte * size)).contents).cast("B")
        path = None if path is None else path.decode(self.encoding, self.errors)
        return self.operations.write(path, data, offset, fip.contents.fh)

    def rename_fuse_3(self, old, new, flags):
        """mfusepy drops rename's flags: RENAME_NOREPLACE (mv -n) and RENAME_EXCHANGE matter here."""
        return self.operations.rename(old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors),
                                      flags)

    def lseek(self, path, offset, whence, fip):
        """SEEK_DATA/SEEK_HOLE: mfusepy lists the callback but has no wrapper for it."""
        path = None if path is None else path.decode(self.encoding, self.errors)
        return self.operations.lseek(path, offset, whence, fip.contents.fh)

    def getxattr(self, path, name, value, size, *args):
        """Only user.* attributes exist: other names are not supported (see xattrs.py), answered
        here before paths and entries are looked up."""
        if not name.startswith(b"user.") and self.operations.options.xattrs:
            return -errno.ENOTSUP
        return super().getxattr(path, name, value, size, *args)

    def readdir_fuse_3(self, path, buf, filler, offset, fip, flags):
        """Entries from `offset` on, each with the offset of the next: libfuse 3.14 hands the
        kernel a readdirplus entry's attributes only in this mode, and a large directory is
        read in parts without building it again."""
        entries = self.operations.readdir(path.decode(self.encoding, self.errors), fip.contents.fh)
        stats = self._packed(entries)
        plus = FUSE_FILL_DIR_PLUS if flags & FUSE_READDIR_PLUS else 0
        st = mfusepy.c_stat()
        for index in range(offset, len(entries)):
            name, entry = entries[index]
            packed = b""  # none: the name alone, the kernel asks for its attributes by name
            if entry is not None:
                packed = stats[index]
                if packed is None:
                    attributes = self.operations.attributes(entry)
                    packed = stats[index] = b"" if attributes is None else pack(st, attributes)
                elif packed:
                    ctypes.memmove(ctypes.addressof(st), packed, len(packed))
            if filler(buf, name.encode(self.encoding, self.errors), st if packed else None, index + 1,
                      plus if packed else 0):
                break
        return 0

    def _packed(self, entries: list) -> list:
        """The packed attributes of a listing's entries, made as asked for; a write through the
        mount (sizes stay, mtimes move) starts them again. A file manager lists the same large
        directory again and again: this halves the daemon's time per entry."""
        key, writes = id(entries), self.operations.writes
        with self._stats_lock:  # readdir runs in several libfuse threads at once
            cached = self._stats.get(key)
            if cached is None or cached[0] is not entries or cached[1] != writes:
                if cached is not None:
                    self._stats_entries -= len(cached[2])
                cached = self._stats[key] = (entries, writes, [None] * len(entries))
                self._stats_entries += len(entries)
            self._stats.move_to_end(key)
            limit = self.operations.options.header_cache_bytes // PACKED_BYTES
            while self._stats_entries > limit and len(self._stats) > 1:
                self._stats_entries -= len(self._stats.popitem(last=False)[1][2])
        return cached[2]


def pack(st: mfusepy.c_stat, attributes: dict) -> bytes:
    """The attributes (times in ns, as Operations gives them) as a struct stat: mfusepy's
    set_st_attrs, without its per-key loop, for the tens of thousands of entries of a listing."""
    ctypes.memset(ctypes.byref(st), 0, ctypes.sizeof(st))
    st.st_ino, st.st_mode, st.st_nlink = attributes["st_ino"], attributes["st_mode"], attributes["st_nlink"]
    st.st_size = attributes["st_size"]
    st.st_uid, st.st_gid = attributes["st_uid"], attributes["st_gid"]
    st.st_blksize, st.st_blocks = attributes["st_blksize"], attributes["st_blocks"]
    for name in ("st_atime", "st_mtime", "st_ctime"):
        spec = getattr(st, name + "spec")
        spec.tv_sec, spec.tv_nsec = divmod(int(attributes[name]), 10**9)
    return bytes(st)
