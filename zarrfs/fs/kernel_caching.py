"""How long the kernel may keep what the file system shows (attributes, names, pages), from what
the store is: a writable mount's writes go through the kernel's pages, so on a local store the
pages are kept across opens and never dropped for a new mtime; other machines write a remote
store, so its pages are kept only while a file's mtime and size stay the same, looked at again
after metadata_ttl. A read-only mount's pages are dropped for a new mtime: no write of its own
moves it, so a new one is another program's change (zarr-python writing the store directly).

Dropping a file's pages when a getattr shows a new mtime (the kernel's auto_inval_data, on by
default in libfuse 3) is wrong where only this daemon writes: every write through the mount
moves the mtime, and the drop races the next write, whose bytes the kernel has copied into a
page it has not yet sent. A reader then reads that page again from the daemon before the write
arrives, and keeps the old bytes (zeros past the old end of a file being appended to) once the
write is answered and the size grows over them."""

from dataclasses import dataclass

from zarrfs.stores.contract import Capabilities

ENTRY_TIMEOUT = 30.0  # seconds the kernel may keep attributes and entries
NEGATIVE_TIMEOUT = 0.0  # none: a name an edit makes by side effect (c.npy makes c.bin) is there at once


@dataclass(frozen=True)
class KernelCaching:
    attr_timeout: float
    entry_timeout: float
    negative_timeout: float
    keep_pages: bool  # libfuse's kernel_cache: pages kept across opens
    # the kernel's auto_inval_data: pages dropped when a getattr shows a new mtime or size (only
    # where no write of the mount's own moves the mtime, or another machine may have changed the
    # file: see above)
    drop_pages_on_change: bool
    # libfuse's auto_cache: pages kept while mtime and size are unchanged, those looked at again
    # after this many seconds; None: not used
    recheck_pages_after: float | None


def kernel_caching(capabilities: Capabilities, read_only: bool = False) -> KernelCaching:
    """`read_only`: the mount writes nothing (-o ro), so an mtime that moves is another writer's."""
    if not capabilities.remote or capabilities.metadata_ttl is None:
        # a remote store with no ttl has no other writer (an Icechunk snapshot, a branch's own session)
        return KernelCaching(ENTRY_TIMEOUT, ENTRY_TIMEOUT, NEGATIVE_TIMEOUT, True, read_only, None)
    ttl = capabilities.metadata_ttl
    timeout = min(ENTRY_TIMEOUT, ttl)
    return KernelCaching(timeout, timeout, NEGATIVE_TIMEOUT, False, True, ttl)
