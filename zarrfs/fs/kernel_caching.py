"""How long the kernel may keep what the file system shows (attributes, names, pages), from what
the store is and whether the mount writes.

A writable mount keeps a file's pages across opens and never lets the kernel drop them for a new
mtime (libfuse's auto_inval_data, on by default in libfuse 3, and auto_cache): every write
through the mount moves the mtime, and such a drop races the next write, whose bytes the kernel
has copied into a page it has not yet sent. A reader then reads that page again from the daemon
before the write arrives, and keeps the old bytes (zeros past the old end of a file being
appended to) once the write is answered and the size grows over them.

The file system drops a file's pages itself when the array's stored values changed and the
mount did not change them (another program, or another machine on an object store: see
OpenArrays.stored_change, which takes the stored version the mount's own write-backs make for
its own). It looks at an open (the open's answer then has the kernel drop the file's pages, as
auto_cache did), at a getattr (as auto_inval_data did), and every metadata_ttl for arrays held
open (FileSystem._watch_stored_changes), a memory map's reader sending no request that would
tell. A stored listing is trusted for metadata_ttl (on a local store 30 s, or -o metadata_ttl if
shorter: trusted_for), the attributes the kernel keeps as long: another program's change shows
within about twice that.

A read-only mount writes nothing, so a new mtime is another program's change: its pages are
dropped for one (auto_inval_data), and on an object store kept only while a file's mtime and size
stay the same, looked at again after metadata_ttl (auto_cache)."""

from dataclasses import dataclass

from zarrfs.stores.contract import Capabilities

ENTRY_TIMEOUT = 30.0  # seconds the kernel may keep attributes and entries
NEGATIVE_TIMEOUT = 0.0  # none: a name an edit makes by side effect (c.npy makes c.bin) is there at once


@dataclass(frozen=True)
class KernelCaching:
    attr_timeout: float
    entry_timeout: float
    negative_timeout: float
    # pages kept across opens (the open's keep_cache), but for an open at which the file system
    # finds the stored values changed by another writer (FileSystem.pages_current)
    keep_pages: bool
    # the kernel's auto_inval_data: pages dropped when a getattr shows a new mtime or size (only
    # where no write of the mount's own moves the mtime: see above)
    drop_pages_on_change: bool
    # libfuse's auto_cache: pages kept while mtime and size are unchanged, those looked at again
    # after this many seconds; None: not used
    recheck_pages_after: float | None


def trusted_for(capabilities: Capabilities, metadata_ttl: float) -> float:
    """Seconds a stored listing (an array's mtime and stored size) and the kernel's attributes
    are trusted: the store's metadata_ttl; a store with none (a local one, Icechunk), whose
    listings are cheap, ENTRY_TIMEOUT or the mount's `metadata_ttl` if shorter, so that a user
    may have another program's changes to a local store show sooner."""
    ttl = capabilities.metadata_ttl
    return min(ENTRY_TIMEOUT, metadata_ttl) if ttl is None else ttl


def kernel_caching(capabilities: Capabilities, read_only: bool = False,
                   trusted: float = ENTRY_TIMEOUT) -> KernelCaching:
    """`read_only`: the mount writes nothing (-o ro), so an mtime that moves is another writer's;
    `trusted`: the seconds a store with no metadata_ttl is trusted (trusted_for)."""
    # a remote store with no ttl has no other writer (an Icechunk snapshot, a branch's own session)
    ttl = capabilities.metadata_ttl if capabilities.remote else None
    timeout = min(ENTRY_TIMEOUT, trusted if ttl is None else ttl)
    if not read_only:  # the file system drops the pages another writer's change makes stale
        return KernelCaching(timeout, timeout, NEGATIVE_TIMEOUT, True, False, None)
    if ttl is None:
        return KernelCaching(timeout, timeout, NEGATIVE_TIMEOUT, True, True, None)
    return KernelCaching(timeout, timeout, NEGATIVE_TIMEOUT, False, True, ttl)
