"""Whether a path lies on a disk file system of this machine, by its statfs f_type.

There, everything done to the files goes through this kernel: an unlinked file's blocks are
freed at its last close with nothing shown meanwhile (deferred_release.py), and a flock(2) is
seen by every process that could use the directory (held_directories.py). On NFS, SMB or a
FUSE file system another machine may share the files, and this kernel's locks bind only its
own processes (NFS's local_lock, a FUSE file system that handles no locks)."""

import ctypes
import os

# ext2/3/4, XFS, Btrfs, tmpfs, F2FS, ZFS, bcachefs, overlayfs
DISK_FILE_SYSTEMS = {0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0xF2F52010, 0x2FC12FC1, 0xCA451A4E, 0x794C7630}


class _StatFS(ctypes.Structure):  # struct statfs: f_type first
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_long * 15)]


def on_local_disk(path: str) -> bool:
    """Whether `path` lies on one of DISK_FILE_SYSTEMS (False when statfs cannot say)."""
    buffer = _StatFS()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.statfs(os.fsencode(path), ctypes.byref(buffer)) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return buffer.f_type & 0xFFFFFFFF in DISK_FILE_SYSTEMS
