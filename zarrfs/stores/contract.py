"""The Store contract: what every store does, and the capabilities it declares.

A store holds a Zarr hierarchy's values under '/'-separated keys. Callers read a store's
`capabilities` instead of probing for attributes: what differs between a local directory and
an object store (round trips, other writers, listing, how long metadata may be trusted) is said
once, where the store is made. Everything a caller outside stores/ uses of a store is declared
here; a method meaningful for some stores only says which capability makes it so (open_value:
file_values). `zarrfs.testing.store_contract.StoreContractTests` is the suite every store passes
(tests/stores/test_store_contract.py runs it on each; a new store's tests subclass it).

Errors: a store raises StoreError (zarrfs/errors.py) with the errno a caller answers: ENOENT,
EEXIST, EROFS, EIO for a value it cannot read or that breaks a bound, ConflictError and
ValueChangedError as said below. Its message names the key (`path(key)` or the key itself) and
never a credential.
"""

import errno
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from zarrfs.byte_ranges import ByteRange, Range
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import StoreError


@dataclass(frozen=True)
class Capabilities:
    # Each request is a network round trip, and other machines may write the same values: stored
    # state is looked at again after metadata_ttl, writers keep the elements they wrote to merge.
    remote: bool = False
    # A value can be replaced only if it is still the version this mount read (ETag, generation):
    # publish() raises ConflictError otherwise, and the writer merges. Every key.
    conditional_writes: bool = False
    # As conditional_writes, for metadata documents only (zarr.json, .zarray, .zgroup, .zattrs,
    # .zmetadata): a publish of one is conditional on the version this store last read whole
    # (get, get_versioned), if it read one (a local store: the version the publishing thread
    # read, among zarrfs processes, which take its directory's lock). Chunks are not.
    conditional_documents: bool = False
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
    # Chunks fetched at once ahead of a stream (each by a thread of the file system, waiting on its
    # request); None: the file system's own number (fs/filesystem.py): many on a remote store, as
    # an object store's GETs are each a round trip, one a core on a local one. A store whose
    # library multiplexes its requests itself (icechunk's) streams faster with a few such threads,
    # on a local disk too (each get waits on its runtime).
    stream_fetchers: int | None = None


class Staged(Protocol):
    """A value written beside the current one by stage(), not yet seen by readers: a token that
    only the store which made it reads, in publish() or discard()."""

    @property
    def key(self) -> str:
        """The key it will replace (read-only: a staged value is not moved to another key)."""


Own = TypeVar("Own", bound=Staged)  # the Staged type of one store


def own_staged(staged: Sequence[Staged], kind: type[Own], root: str) -> list[Own]:
    """`staged` as the store that made them holds them (`kind`, its own Staged type): a store
    reads only its own tokens, and one staged elsewhere is StoreError (EINVAL) naming its key."""
    own = [value for value in staged if isinstance(value, kind)]
    if len(own) < len(staged):
        other = next(value for value in staged if not isinstance(value, kind))
        raise StoreError(f"cannot publish {other.key!r} in {root}: another store staged it", errno.EINVAL)
    return own


@runtime_checkable
class Store(Protocol):
    """What the engine, the naming scheme, the hierarchy edits, the adapter and the command line
    ask of a store. Keys are '/'-separated, relative to the root, '' being the root itself; a key
    that is absolute, holds '..' or an empty part is refused (StoreError, EINVAL)."""

    capabilities: Capabilities
    # Writes (stage, set, delete, the node operations) raise StoreError(EROFS) when True.
    read_only: bool
    # The hierarchy's root as a person gave it, for messages, the mount table and recovery
    # records: an absolute directory, or the source URL without any user:password part.
    root: str

    def path(self, key: str) -> str:
        """The key's location, for messages: the root and the key."""

    # values
    # `limit`: the most bytes a whole value may have where the caller knows it (the engine: what
    # a chunk of the array can encode to, CodecChain.stored_limit); None: the store's own cap. A
    # value over it, and a range answered with more than asked, is a StoreError (EIO) naming the
    # key and the sizes, raised before memory is taken for the bytes (a server's word is
    # untrusted: stores/bounded_get.py).
    def get(self, key: str, byte_range: ByteRange = None, limit: int | None = None) -> bytes | None:
        """The value (or a range or suffix of it; a suffix longer than the value is all of it,
        as HTTP answers one: a stream reads a shard with its index so); None when there is no
        such key."""

    def get_versioned(self, key: str, byte_range: ByteRange = None, expect: object = None,
                      limit: int | None = None) -> tuple[bytes | None, object]:
        """(the value or a range of it, None when there is no such key; the version it was read
        from: a token to compare for equality, None where the store keeps none). With `expect`,
        a version an earlier call gave, the bytes come from that version or not at all:
        ValueChangedError when the value is another now. Reads of parts of one value that must
        agree (a shard's index and its inner chunks) pass the version of the first. The value
        may be any read-only bytes-like object (an object store hands on the memory its client
        fetched into, without a copy); get() and get_ranges() give bytes."""

    def get_ranges(self, key: str, ranges: list[Range], expect: object = None) -> list[bytes] | None:
        """Several ranges of one value (capabilities.batched_reads); `expect` as for get_versioned."""

    def get_many(self, keys: list[str], limit: int | None = None) -> dict[str, bytes | None]:
        """Several whole values (capabilities.batched_reads), bytes-like as from get_versioned,
        each of at most `limit` bytes."""

    def open_value(self, key: str) -> int | None:
        """(capabilities.file_values) A descriptor to read the value `key` as it was when opened
        (values are replaced, never changed in place); the caller closes it. None when there is no
        such key. A store whose values are not files of this machine raises StoreError(ENOTSUP)."""

    def version_known(self, key: str) -> bool:
        """Whether a conditional write of `key` knows the version it builds on (always True
        for a key whose writes are not conditional)."""

    def exclusive(self, key: str) -> AbstractContextManager[None]:
        """A context in which the documents beside `key` (in its directory) are written by this
        caller alone among zarrfs processes of this machine: a read of a document and the
        writes built on it (a growth's chunks, then its new shape) are one step for them. Stores
        whose other writers are other machines (object stores: their writes are conditional
        instead) or no one (an Icechunk branch) give a context that holds nothing."""

    def check_writable(self, key: str) -> None:
        """StoreError(EROFS) naming `key` on a read-only store; nothing otherwise."""

    def stage(self, key: str, data: BytesLike | None) -> Staged:
        """Write `data` (bytes-like; None: a deletion) beside the current value; publish() makes
        it current, discard() forgets it. EROFS on a read-only store."""

    def publish(self, staged: Sequence[Staged]) -> None:
        """Make staged values current, each atomically (ConflictError under conditional_writes).
        A failure that stored some of them names those in the error's `stored` (StoreError): a
        write-back sends only the others again."""

    def discard(self, staged: Sequence[Staged]) -> None:
        """Forget staged values: nothing of them stays stored."""

    def set(self, key: str, data: bytes) -> None:
        """stage() and publish() of one value."""

    def delete(self, key: str) -> None:
        """Delete `key`; a key that is gone already is no error."""

    # listing and metadata
    def list_dir(self, prefix: str) -> list[str]:
        """The names directly below `prefix`, sorted, without staged values or nodes being built;
        [] for nothing there, and always [] without capabilities.listing."""

    def files(self, prefix: str, directories: bool = False) -> Iterator[tuple[str, os.stat_result]]:
        """(key relative to `prefix`, stat) of every value below `prefix`, for sizes and mtimes;
        with `directories`, also the directories a store has (keys ending in '/'). Nothing without
        capabilities.listing."""

    def stat(self, key: str) -> os.stat_result | None:
        """A value's stat (S_IFREG, its size and mtime), a directory's (S_IFDIR), or None."""

    def statvfs(self) -> os.statvfs_result:
        """Sizes and free space for statfs(2); a store without any says plenty."""

    def remove_temporaries(self) -> int:
        """At mount: remove what an interrupted process left staged; how many were removed (a
        remote store cleans in the background, leaving what another machine may be building,
        and says 0)."""

    def close(self) -> None:
        """At unmount, by whoever opened the store: what it holds is let go (a local store's
        descriptor of its root), and nothing is asked of it after. A second close does nothing.
        A store let go without it holds nothing either, once it is collected."""

    # whole nodes, each seen whole or not at all: `path` is the node's key prefix
    def begin_node(self, path: str) -> str:
        """A staging prefix beside `path` for the new node's chunks (stage and publish below
        it); never listed. EROFS on a read-only store."""

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        """The staged chunks and `documents` (name -> bytes) appear at `path` together.
        EEXIST when anything is stored at `path` already."""

    def abort_node(self, staging: str) -> None:
        """Remove a staging prefix and everything below it."""

    def delete_node(self, path: str) -> None:
        """Remove the node and every key below it; ENOENT when there is none."""

    def move_node(self, src: str, dst: str) -> None:
        """Move the node and every key below it; ENOENT without `src`, EEXIST when `dst` holds
        anything."""
