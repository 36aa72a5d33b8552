"""Inode numbers of the mount's files, ours rather than libfuse's (config.use_ino)."""

import hashlib

from zarrfs.fs.hierarchy import DIR, Entry


def entry_key(entry: Entry) -> str:
    """What names one file of the mount, from the node and which of its files it is."""
    return f"{entry.kind}\0{entry.node.path}\0{entry.stem}\0{entry.view}"


def inode_number(key: str) -> int:
    """A file's inode number: a hash of what it shows, so the same on every mount (tar's
    incremental archives and backup tools compare them) and needing no table; the root is 1.
    Without numbers of its own, libfuse sent readdir's '.' as inode 0 (glibc drops such entries)
    and '..' as 0xffffffff of unknown type."""
    if key == f"{DIR}\0\0\0":
        return 1
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=8).digest(), "little") >> 1 | 2
