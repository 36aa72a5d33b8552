"""The Store contract: what every store does, and the capabilities it declares.

A store holds a Zarr hierarchy's values under '/'-separated keys. Callers read a store's
`capabilities` instead of probing for attributes: what differs between a local directory and
an object store (round trips, other writers, listing, how long metadata may be trusted) is said
once, where the store is made. tests/stores/test_store_contract.py runs one suite against every
implementation: the local store, SeaweedFS through the object store, and the in-memory store.
"""

import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from zarrfs.byte_ranges import ByteRange, Range


@dataclass(frozen=True)
class Capabilities:
    # Each request is a network round trip, and other machines may write the same values: stored
    # state is looked at again after metadata_ttl, writers keep the elements they wrote to merge.
    remote: bool = False
    # A value can be replaced only if it is still the version this mount read (ETag, generation):
    # publish() raises ConflictError otherwise, and the writer merges.
    conditional_writes: bool = False
    # get_ranges() and get_many() fetch several values or ranges in one call.
    batched_reads: bool = False
    # list_dir() and files() work (an HTTP server without listings cannot).
    listing: bool = True
    # Seconds a listing, a document or a shard index may be trusted before it is read again;
    # None: until this mount changes it (no other writer is expected).
    metadata_ttl: float | None = None
    # Values are files of this machine: open_value(key) gives a descriptor to read one (replies
    # made straight from stored files, engine/stored_as_is.py).
    file_values: bool = False
    # A value's file may be kept open after it is replaced and shows nowhere (disk file systems;
    # NFS, SMB and FUSE show it under a hidden name).
    hold_open: bool = False
    # Seconds one read of the mount may spend fetching its chunks (-o timeout): past it, the read
    # makes no further request (engine/read_budget.py). None: no deadline.
    read_deadline: float | None = None


@runtime_checkable
class Store(Protocol):
    """What the engine, the naming scheme and the hierarchy edits ask of a store."""

    capabilities: Capabilities
    read_only: bool

    def path(self, key: str) -> str:
        """The key's location, for messages."""

    # values
    # `limit`: the most bytes a whole value may have where the caller knows it (the engine: what
    # a chunk of the array can encode to, CodecChain.stored_limit); None: the store's own cap. A
    # value over it, and a range answered with more than asked, is a StoreError (EIO) naming the
    # key and the sizes, raised before memory is taken for the bytes (a server's word is
    # untrusted: stores/bounded_get.py).
    def get(self, key: str, byte_range: ByteRange = None, limit: int | None = None) -> bytes | None:
        """The value (or a range or suffix of it); None when there is no such key."""

    def get_versioned(self, key: str, byte_range: ByteRange = None, expect=None,
                      limit: int | None = None) -> tuple[bytes | None, object]:
        """(the value or a range of it, None when there is no such key; the version it was read
        from: a token to compare for equality, None where the store keeps none). With `expect`,
        a version an earlier call gave, the bytes come from that version or not at all:
        ValueChangedError when the value is another now. Reads of parts of one value that must
        agree (a shard's index and its inner chunks) pass the version of the first. The value
        may be any read-only bytes-like object (an object store hands on the memory its client
        fetched into, without a copy); get() and get_ranges() give bytes."""

    def get_ranges(self, key: str, ranges: list[Range], expect=None) -> list[bytes] | None:
        """Several ranges of one value (capabilities.batched_reads); `expect` as for get_versioned."""

    def get_many(self, keys: list[str], limit: int | None = None) -> dict[str, bytes | None]:
        """Several whole values (capabilities.batched_reads), bytes-like as from get_versioned,
        each of at most `limit` bytes."""

    def version_known(self, key: str) -> bool:
        """Whether a conditional write of `key` knows the version it builds on."""

    def stage(self, key: str, data):
        """Write `data` (None: a deletion) beside the current value; publish() makes it current."""

    def publish(self, staged: list) -> None:
        """Make staged values current, each atomically (ConflictError under conditional_writes).
        A failure that stored some of them names those in the error's `stored` (StoreError): a
        write-back sends only the others again."""

    def discard(self, staged: list) -> None:
        """Forget staged values."""

    def set(self, key: str, data: bytes) -> None: ...

    def delete(self, key: str) -> None: ...

    # listing and metadata
    def list_dir(self, prefix: str) -> list[str]:
        """The names directly below `prefix`."""

    def files(self, prefix: str, directories: bool = False):
        """(key, stat) of every value below `prefix`, for sizes and mtimes."""

    def stat(self, key: str) -> os.stat_result | None: ...

    def statvfs(self) -> os.statvfs_result: ...

    def remove_temporaries(self) -> int:
        """Remove what an interrupted process left staged; how many."""

    # whole nodes, each atomic
    def begin_node(self, path: str) -> str: ...

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None: ...

    def abort_node(self, staging: str) -> None: ...

    def delete_node(self, path: str) -> None: ...

    def move_node(self, src: str, dst: str) -> None: ...
