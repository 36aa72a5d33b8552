"""The FUSE methods that change the hierarchy's shape, for Operations (which gives shaping,
options, _open_draft and _refuse): each delegates to shaping.py under the errno boundary."""

import errno

from zarrfs.fuse.errno_boundary import errno_boundary, fail


class ShapingMethods:
    @errno_boundary
    def mkdir(self, path, mode):
        self.shaping.mkdir(path)
        return 0

    @errno_boundary
    def rmdir(self, path):
        self._writable()
        self.shaping.rmdir(path)
        return 0

    @errno_boundary
    def unlink(self, path):
        self._writable()
        self.shaping.unlink(path)
        return 0

    @errno_boundary
    def rename(self, old, new, flags=0):
        self._writable()
        self.shaping.rename(old, new, flags)
        return 0

    @errno_boundary
    def create(self, path, mode, flags=0):
        return self._open_draft(self.shaping.create(path, flags))

    @errno_boundary
    def chmod(self, path, mode):  # accepted on files being written (editors copy modes), refused elsewhere
        return 0 if self.shaping.draft_at(path) is not None else self._refuse()

    @errno_boundary
    def chown(self, path, uid, gid):
        return 0 if self.shaping.draft_at(path) is not None else self._refuse()

    def _writable(self):
        if self.options.read_only:
            fail(errno.EROFS)
