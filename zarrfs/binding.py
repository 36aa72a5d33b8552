"""mfusepy with the callbacks that carry data replaced: no bytes object per read or write, and
readdir answers with full attributes (readdirplus) so that `ls -l` and file managers need no
lookup per entry."""

import ctypes

import mfusepy

FUSE_READDIR_PLUS = 1  # the kernel asks for attributes with the names
FUSE_FILL_DIR_PLUS = 2  # this entry carries them


class ZarrFUSE(mfusepy.FUSE):
    def read(self, path, buf, size, offset, fip):
        return self.operations.read_into(fip.contents.fh, buf, size, offset)

    def open(self, path, fip):
        """Text files are served with direct I/O: their size is not known before they are made."""
        fi = fip.contents
        fi.fh = self.operations.open(path.decode(self.encoding, self.errors), fi.flags)
        if self.operations.is_text(fi.fh):
            fi.direct_io = 1
        return 0

    def write(self, path, buf, size, offset, fip):
        """The request's bytes as a view: valid during this call only, and RawFile copies them."""
        data = memoryview(ctypes.cast(buf, ctypes.POINTER(ctypes.c_ubyte * size)).contents).cast("B")
        path = None if path is None else path.decode(self.encoding, self.errors)
        return self.operations.write(path, data, offset, fip.contents.fh)

    def readdir_fuse_3(self, path, buf, filler, offset, fip, flags):
        """Entries from `offset` on, each with the offset of the next: libfuse 3.14 hands the
        kernel a readdirplus entry's attributes only in this mode, and a large directory is
        read a page at a time without building it again."""
        entries = self.operations.readdir(path.decode(self.encoding, self.errors), fip.contents.fh)
        plus = FUSE_FILL_DIR_PLUS if flags & FUSE_READDIR_PLUS else 0
        st = mfusepy.c_stat()
        for index in range(offset, len(entries)):
            name, entry = entries[index]
            ctypes.memset(ctypes.byref(st), 0, ctypes.sizeof(st))
            if entry is not None:
                mfusepy.set_st_attrs(st, self.operations.attributes(entry), self.operations.use_ns)
            if filler(buf, name.encode(self.encoding, self.errors), st if entry else None, index + 1,
                      plus if entry else 0):
                break
        return 0
