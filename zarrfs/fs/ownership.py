"""Who the mount's files belong to and what their modes allow (-o uid=, gid=, umask=, as sshfs
has them).

The modes are the mount's policy, not decoration: with `allow_other` the kernel checks them
itself (`default_permissions`, always added then), so a user the modes refuse never reaches the
daemon, which writes with the owner's credentials.
"""

import stat
from dataclasses import dataclass

DEFAULT_UMASK = 0o022


@dataclass(frozen=True)
class Ownership:
    uid: int | None = None  # None: the stored document's owner (an object store's: the daemon's user)
    gid: int | None = None
    umask: int = DEFAULT_UMASK  # bits taken away from every mode shown

    def owner(self, stored) -> tuple[int, int]:
        """(uid, gid) shown for a file whose stored document has the stat result `stored`."""
        return (stored.st_uid if self.uid is None else self.uid, stored.st_gid if self.gid is None else self.gid)

    def directory(self, writable: bool) -> int:
        return self._mode(stat.S_IFDIR, 0o777 if writable else 0o555)

    def file(self, writable: bool, stored_mode: int = 0o777) -> int:
        """A regular file's mode; `stored_mode` bounds it (an array's data is no more open
        than its stored document)."""
        return self._mode(stat.S_IFREG, (0o666 if writable else 0o444) & stored_mode)

    def _mode(self, file_type: int, allowed: int) -> int:
        return file_type | (allowed & ~self.umask & 0o777)
