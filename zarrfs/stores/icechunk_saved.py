"""The writes of a mounted Icechunk branch not yet committed, saved beside the mount's other
recovery data so that a crash loses none of them.

A branch's writes go into a fork of its writable session (icechunk's ForkSession, made to be
pickled): after each write-back the fork is pickled to one file, replaced atomically (a temporary
file, fsync, rename, fsync of the directory). icechunk has already written the chunks themselves to
the repository's storage; the fork holds which chunks and documents changed. The next writable
mount of that branch takes the fork back and goes on writing into it; a commit merges it into the
branch's session (Session.merge) and removes the file.

The file is read only when it belongs to this user and nobody else may write it: unpickling runs
code of its maker's choosing.
"""

import errno
import hashlib
import logging
import os
import pickle
import stat
from typing import Any

from zarrfs.errors import StoreError

log = logging.getLogger(__name__)


class SavedSession:
    """The file of one repository's branch in `directory`."""

    def __init__(self, directory: str, root: str, branch: str):
        digest = hashlib.sha256(f"{root}\0{branch}".encode("utf-8", "surrogateescape")).hexdigest()[:16]
        self.directory = directory
        self.path = os.path.join(directory, f"icechunk-{digest}.session")
        self.branch = branch

    def save(self, fork: Any) -> None:
        data = pickle.dumps(fork)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        temporary = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def load(self) -> Any | None:
        """The fork a mount before saved, None without one. A file another user could have written
        is refused with one line (StoreError, EACCES)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{self.path}: the saved writes of branch {self.branch} are not this user's own file "
                             f"(or others may write it): not read; remove it, or chown and chmod 600", errno.EACCES)
        with open(self.path, "rb") as f:
            try:
                return pickle.load(f)
            except Exception as e:  # a torn or foreign file: said, and left for a person to look at
                raise StoreError(f"{self.path}: the saved writes of branch {self.branch} cannot be read "
                                 f"({type(e).__name__}); move it away to mount without them", errno.EIO) from None

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
