"""IcechunkStore: one snapshot of an Icechunk repository behind the Store contract; on a branch,
a writable session whose writes become a commit (commit()).

Every value is read through icechunk-python's session store (zarr's async Store API) on the
repository's loop (async_loop.Loop): a chunk's byte range is a range request of icechunk, so a
read decodes only the chunks it touches, as on any other store. A snapshot never changes: its
listings and documents are trusted for the whole mount (metadata_ttl None), and every key's mtime
is the commit's time. Values are bounded as on other stores: a whole value's size is asked of
icechunk's manifest first (no request to the chunk's object), and one over `limit` is refused
before it is fetched.

On a branch mounted writable, every value published goes into icechunk's writable session: the
chunk is written to the repository's storage at once, and becomes part of a snapshot only when the
session is committed (commit(), from the mount's `user.icechunk.commit` attribute, `zarrfs commit`
or -o commit_on_unmount). A commit that conflicts with another writer's is rebased by icechunk's
BasicConflictSolver where it can be; otherwise it fails with one line and the session keeps its
changes. Moving a node is a commit of its own (icechunk's rearrange session), after one of the
writes before it.
"""

import asyncio
import errno
import logging
import os
import shutil
import stat
import threading
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, TypeVar

from zarrfs.byte_ranges import ByteRange, Range, Suffix
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import StoreError, ValueChangedError
from zarrfs.stores.async_loop import Loop, first_line
from zarrfs.stores.contained import key_parts
from zarrfs.stores.contract import Capabilities, Staged, own_staged
from zarrfs.stores.held_directories import make_held, remove_left
from zarrfs.stores.icechunk_saved import SavedSession
from zarrfs.stores.local import LocalStore

if TYPE_CHECKING:  # icechunk (Python >= 3.12) is imported for a repository only
    from icechunk import ForkSession, Repository, Session
    from zarr.abc.store import RangeByteRequest, SuffixByteRequest
    from zarr.core.buffer import Buffer

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_VALUE = 1 << 31  # a whole value's size without a caller's limit: what one read may take at most
# Chunks fetched at once ahead of a stream from a remote repository: icechunk multiplexes its own
# requests, and each more thread waiting on the loop costs the GIL (64 MiB on SeaweedFS at 5 ms
# each way, in-process: 8 streamed 204-230 MB/s, 16 177-209, the file system's 64 158-176)
STREAM_FETCHERS = 8
SIZES_AT_ONCE = 64  # values' sizes asked of icechunk at once in a listing (each may be a manifest's fetch)
SPILL_PREFIX = "zarrfs-staged-"  # a mount's directory of chunks of nodes being made (not the old zarrfs-icechunk-:
# those were held by no lock, so one a mount of an earlier zarrfs is using cannot be told from one left)


class StagedValue(NamedTuple):
    """A value held for publish(): its bytes, None for a deletion."""

    key: str
    data: bytes | None


class IcechunkStore:
    """A session of one snapshot: read-only, or writable on a branch. `session`: icechunk's
    Session; `root`: the source and the version's name, for messages; `written_ns`: the commit's
    time; `branch`: (icechunk's Repository, the branch's name) for a writable session, whose
    commits go on that branch; `saved`: where its writes not committed are kept (a crash loses none)."""

    def __init__(self, session: "Session", loop: Loop, root: str, written_ns: int, remote: bool,
                 branch: "tuple[Repository, str] | None" = None, saved: SavedSession | None = None,
                 virtual_refused: bool = False):
        self._session, self._loop, self._saved = session, loop, saved
        # the version references a virtual chunk's file outside its container: none is read
        self._virtual_refused = virtual_refused
        self.root, self.read_only = root, session.read_only
        # a branch's writes go into a fork of its session, which pickles (icechunk_saved.py)
        self._fork = None if session.read_only else self._recovered() or session.fork()
        self._store = session.store if self._fork is None else self._fork.store
        self.snapshot = session.snapshot_id
        self._written_ns = written_ns
        self._branch = branch
        self._writing = threading.Lock()  # a commit takes the session while no value is being set
        self._staging: set[str] = set()  # begin_node's names of nodes being made
        self._spill: LocalStore | None = None  # their chunks, until commit_node
        self._spill_lock = threading.Lock()
        self._spill_held = -1  # the descriptor that holds the spill's directory (held_directories.py)
        self._owner = (os.getuid(), os.getgid())
        self.capabilities = Capabilities(remote=remote, listing=True, metadata_ttl=None,
                                         read_deadline=loop.timeout if remote else None,
                                         stream_fetchers=STREAM_FETCHERS)

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def _run(self, coroutine: Coroutine[Any, Any, T], key: str) -> T:
        """A call on the loop; icechunk's own errors are one line naming the key."""
        return self._loop.call(coroutine, self.path(key))

    # values

    def get(self, key: str, byte_range: ByteRange = None, limit: int | None = None) -> bytes | None:
        if self._spilled(key):
            return self._spill_store().get(key, byte_range, limit)
        return self._run(self._get(key, byte_range, limit), key)

    async def _get(self, key: str, byte_range: ByteRange, limit: int | None) -> bytes | None:
        from zarr.abc.store import RangeByteRequest, SuffixByteRequest

        self._check(key)
        if self._virtual_refused and await self._is_virtual(key):
            raise StoreError(f"{self.path(key)}: a virtual chunk of a version that references a file outside its "
                             f"container (the log names it): not read", errno.EIO)
        request: RangeByteRequest | SuffixByteRequest | None = None
        if isinstance(byte_range, Range):
            if byte_range.length <= 0:
                return b"" if await self._is_value(key) else None
            request = RangeByteRequest(byte_range.start, byte_range.start + byte_range.length)
            wanted = byte_range.length
        elif isinstance(byte_range, Suffix):
            request, wanted = SuffixByteRequest(byte_range.length), byte_range.length
        else:
            size, wanted = await self._size(key), limit if limit is not None else MAX_VALUE
            if size is None:
                return None
            if size > wanted:
                raise StoreError(f"cannot read {key!r} in {self.root}: it has {size} bytes, more than the {wanted} "
                                 f"expected", errno.EIO)
        value = await self._get_range(key, request)
        if value is None:
            return None
        data = bytes(value.to_bytes())
        if len(data) > wanted:
            raise StoreError(f"{self.path(key)}: answered {len(data)} bytes, more than the {wanted} bytes asked",
                             errno.EIO)
        return data

    async def _get_range(self, key: str, request: "RangeByteRequest | SuffixByteRequest | None") -> "Buffer | None":
        """icechunk's get; a range reaching past the value's end is cut there, as pread cuts it,
        and a suffix longer than the value is all of it, as HTTP answers it (icechunk refuses
        either whole)."""
        from icechunk import InvalidInputError
        from zarr.abc.store import RangeByteRequest, SuffixByteRequest
        from zarr.core.buffer import default_buffer_prototype

        try:
            return await self._store.get(key, default_buffer_prototype(), request)
        except InvalidInputError:
            if isinstance(request, SuffixByteRequest):
                size = await self._size(key)
                if size is None or request.suffix <= size:
                    raise
                return await self._store.get(key, default_buffer_prototype(), None)
            if not isinstance(request, RangeByteRequest):
                raise
            size = await self._size(key)
            if size is None or request.end <= size:
                raise
            if request.start >= size:
                return default_buffer_prototype().buffer.from_bytes(b"")
            return await self._store.get(key, default_buffer_prototype(), RangeByteRequest(request.start, size))

    def get_versioned(self, key: str, byte_range: ByteRange = None, expect: object = None,
                      limit: int | None = None) -> tuple[bytes | None, object]:
        if self._spilled(key):
            return self._spill_store().get_versioned(key, byte_range, expect, limit)
        if not self.read_only:  # only this mount writes its session: no version to compare
            return self.get(key, byte_range, limit), None
        if expect is not None and expect != self.snapshot:
            raise ValueChangedError(f"{self.path(key)}: read from another snapshot", errno.EIO)
        return self.get(key, byte_range, limit), self.snapshot

    def get_ranges(self, key: str, ranges: list[Range], expect: object = None) -> list[bytes] | None:
        parts = [self.get_versioned(key, r, expect)[0] for r in ranges]
        return None if any(part is None for part in parts) else [p for p in parts if p is not None]

    def get_many(self, keys: list[str], limit: int | None = None) -> dict[str, bytes | None]:
        return {key: self.get(key, None, limit) for key in keys}

    def open_value(self, key: str) -> int | None:
        raise StoreError(f"{self.path(key)}: an Icechunk value is not a file of this machine", errno.ENOTSUP)

    def version_known(self, key: str) -> bool:
        return True

    def exclusive(self, key: str) -> AbstractContextManager[None]:
        """Nothing held: only this mount writes its branch's session (a commit is icechunk's own step)."""
        return nullcontext()

    # writes: into the writable session of a branch; a snapshot's refuse them

    def check_writable(self, key: str) -> None:
        if self.read_only:
            self._refuse(key)

    def stage(self, key: str, data: BytesLike | None) -> Staged:
        self.check_writable(key)
        self._check(key)
        if self._spilled(key):
            return self._spill_store().stage(key, data)
        return StagedValue(key, None if data is None else bytes(data))

    def publish(self, staged: Sequence[Staged]) -> None:
        spilled = [value for value in staged if self._spilled(value.key)]
        if spilled:
            self._spill_store().publish(spilled)
        values = own_staged([value for value in staged if not self._spilled(value.key)], StagedValue, self.root)
        if values:
            with self._writing:  # taken in the caller's thread: the loop's thread never waits on it
                self._run(self._publish(values), values[0].key)
                self._save()

    async def _publish(self, values: list[StagedValue]) -> None:
        for key, data in values:
            if data is None:
                await self._delete(key)
            else:
                await self._store.set(key, _buffer(data))

    def discard(self, staged: Sequence[Staged]) -> None:
        spilled = [value for value in staged if self._spilled(value.key)]
        own_staged([value for value in staged if not self._spilled(value.key)], StagedValue, self.root)
        if spilled:
            self._spill_store().discard(spilled)  # the others were held in memory only

    def set(self, key: str, data: bytes) -> None:
        self.publish([self.stage(key, data)])

    def delete(self, key: str) -> None:
        self.publish([self.stage(key, None)])

    async def _delete(self, key: str) -> None:
        if await self._is_value(key):
            await self._store.delete(key)

    def _refuse(self, key: str) -> NoReturn:
        raise StoreError(f"{self.path(key)}: a snapshot or tag of an Icechunk repository is read-only (mount a branch "
                         f"to write)", errno.EROFS)

    def _save(self) -> None:
        """The fork, after a write-back: a crash from now on loses none of it."""
        if self._saved is None:
            return
        try:
            self._saved.save(self._fork)
        except OSError as e:
            raise StoreError(f"{self.root}: the writes are in the session, but cannot be saved to "
                             f"{self._saved.path} against a crash: {e.strerror}", e.errno or errno.EIO) from None

    def _recovered(self) -> "ForkSession | None":
        fork = None if self._saved is None else self._saved.load()
        if fork is not None:
            log.warning("%s: took back the writes a mount before saved and did not commit (%s): they are in this "
                        "mount's session, to commit", self.root, self._saved.path if self._saved else "")
        return fork

    def changed(self) -> bool:
        """Whether the session holds writes not committed yet."""
        return self._fork is not None and self._fork.has_uncommitted_changes

    def commit(self, message: str) -> str:
        """Commit the session's writes on its branch: the new snapshot's id. Another writer's
        commit in between is rebased over where icechunk's BasicConflictSolver allows it (their
        chunks and ours differ, nothing they deleted was written here). Otherwise nothing is lost:
        the session is kept as a snapshot on a new branch, BRANCH.conflict-SNAPSHOT, which this
        store writes from then on, and StoreError (EBUSY) says so in one line."""
        if self.read_only or self._branch is None:
            self._refuse("")
        with self._writing:
            return self._committing(self._commit(message), message, "")

    def _committing(self, coroutine: Coroutine[Any, Any, str], message: str, key: str) -> str:
        """A commit (or a move's) on the loop, under _writing; one cancelled at the timeout that
        landed all the same is taken as landed: its snapshot."""
        try:
            return self._run(coroutine, key)
        except StoreError as e:
            if e.errno != errno.ETIMEDOUT:
                raise
            parent = self.snapshot  # as the commit left it: a move's commit of the writes before it may have landed
            landed = self._run(self._landed(parent, message), key)
            if landed is None:
                raise
            log.warning("%s: the commit had no answer within the timeout, but it landed: snapshot %s (its parent %s "
                        "and message are this mount's)", self.root, landed, parent)
            return landed

    async def _landed(self, parent: str, message: str) -> str | None:
        """After a commit cancelled at the timeout (icechunk may have finished it unseen): the
        branch's head, taken as this commit when its parent is ours and its message ours (as
        resend.py recognises a PUT that landed), with a fresh session from it; else None."""
        assert self._branch is not None  # commit() refuses a store without a branch
        repository, branch = self._branch
        head = await repository.lookup_branch_async(branch)
        if head == parent:
            return None
        info = await repository.lookup_snapshot_async(head)
        if info.parent_id != parent or info.message != message:
            return None
        await self._next_session(repository, branch, head)
        return str(head)

    async def _commit(self, message: str) -> str:
        from icechunk import BasicConflictSolver, ConflictError, RebaseFailedError, VersionSelection

        assert self._branch is not None  # commit() refuses a store without a branch
        repository, branch = self._branch
        # a chunk both wrote, or one written here of an array or group they deleted, is a conflict:
        # icechunk's defaults would keep one side's chunk whole and drop the other's elements
        solver = BasicConflictSolver(on_chunk_conflict=VersionSelection.Fail, fail_on_delete_of_updated_array=True,
                                     fail_on_delete_of_updated_group=True)
        assert self._fork is not None  # a writable store has one
        await self._session.merge_async(self._fork)
        try:
            snapshot: str = await self._session.commit_async(message, rebase_with=solver)
        except (ConflictError, RebaseFailedError) as e:
            kept = await self._keep_on_new_branch(repository, branch, message)
            raise StoreError(f"{self.root}: commit refused: another writer's commit on {branch} conflicts with it "
                             f"({first_line(e)}); nothing is lost: the changes are branch {kept}, where this mount "
                             f"commits from now on", errno.EBUSY) from None
        await self._next_session(repository, branch, snapshot)
        return snapshot

    async def _keep_on_new_branch(self, repository: "Repository", branch: str, message: str) -> str:
        snapshot = await self._session.flush_async(f"{message} (not committed on {branch}: conflicts)")
        kept = f"{branch}.conflict-{snapshot}"
        await repository.create_branch_async(kept, snapshot)
        await self._next_session(repository, kept, snapshot)
        return kept

    async def _next_session(self, repository: "Repository", branch: str, snapshot: str) -> None:
        """The writes are in the repository: the saved fork goes, a fresh session and fork come."""
        if self._saved is not None:
            self._saved.remove()
        self._session = await repository.writable_session_async(branch)
        self._fork = self._session.fork()
        self._branch = (repository, branch)
        self._store, self.snapshot, self._written_ns = self._fork.store, snapshot, time.time_ns()

    # listing and metadata

    def list_dir(self, prefix: str) -> list[str]:
        if self._spilled(prefix):
            return self._spill_store().list_dir(prefix)
        return self._run(self._list_dir(prefix), prefix)

    async def _list_dir(self, prefix: str) -> list[str]:
        if prefix:
            self._check(prefix)
        return sorted({name.rstrip("/") async for name in self._store.list_dir(prefix)})

    def files(self, prefix: str, directories: bool = False) -> Iterator[tuple[str, os.stat_result]]:
        """(key below `prefix`, stat) of every value, sizes from icechunk's manifests (no value is
        read); icechunk has no directories of its own to add."""
        if self._spilled(prefix):
            yield from self._spill_store().files(prefix, directories)
            return
        yield from self._run(self._files(prefix), prefix)

    async def _files(self, prefix: str) -> list[tuple[str, os.stat_result]]:
        below = f"{prefix.rstrip('/')}/" if prefix else ""
        keys = [key async for key in self._keys_below(below)]
        sizes: list[int] = []
        for start in range(0, len(keys), SIZES_AT_ONCE):  # one after another took a round trip each
            sizes += await asyncio.gather(*(self._store.getsize(key) for key in keys[start:start + SIZES_AT_ONCE]))
        return sorted((key[len(below):], self._file_stat(size)) for key, size in zip(keys, sizes, strict=True))

    async def _keys_below(self, below: str) -> AsyncIterator[str]:
        """Every key starting with `below`. icechunk lists only a node's prefix: below an array's
        (its chunks' directories, `a/c/0/`), the array's keys are listed and those below kept."""
        from icechunk import InvalidInputError

        listed = below
        while True:
            try:
                keys = [key async for key in self._store.list_prefix(listed)]
                break
            except InvalidInputError:
                if not listed:
                    raise
                listed = listed.rstrip("/").rpartition("/")[0] + "/" if "/" in listed.rstrip("/") else ""
        for key in keys:
            if key.startswith(below):
                yield key

    def stat(self, key: str) -> os.stat_result | None:
        if self._spilled(key):
            return self._spill_store().stat(key)
        return self._run(self._stat(key), key)

    async def _stat(self, key: str) -> os.stat_result | None:
        if not key:
            return self._directory_stat()
        self._check(key)
        size = await self._size(key)
        if size or size == 0 and await self._is_value(key):  # icechunk says 0 for a chunk not written, too
            return self._file_stat(size)
        async for _ in self._store.list_dir(key):
            return self._directory_stat()
        return None

    async def _size(self, key: str) -> int | None:
        """A value's size from icechunk's snapshot or manifest (no request for the value itself);
        None for no such value. One call where exists() and getsize() were two: a stream's every chunk.
        icechunk answers 0 for a chunk not written (of an array it has): 0 may be no value."""
        from icechunk import InvalidInputError, NotFoundError

        try:
            return int(await self._store.getsize(key))
        except (NotFoundError, InvalidInputError):  # no such node; a key that is no document or chunk
            return None

    async def _is_virtual(self, key: str) -> bool:
        """Whether `key` is a chunk icechunk keeps as a reference into another file."""
        from icechunk import ChunkType

        parts = key.split("/")
        at = next((i for i in range(len(parts) - 2, -1, -1) if parts[i] == "c"
                   and all(p.isdigit() for p in parts[i + 1:])), None)
        if at is None:
            return False  # a document
        session = self._fork if self._fork is not None else self._session
        kind = await session.chunk_type_async("/" + "/".join(parts[:at]), [int(p) for p in parts[at + 1:]])
        return bool(kind == ChunkType.virtual)

    async def _is_value(self, key: str) -> bool:
        from icechunk import InvalidInputError

        try:
            return bool(await self._store.exists(key))
        except InvalidInputError:  # icechunk's word for a key that is no document or chunk: a group's path
            return False

    def _file_stat(self, size: int) -> os.stat_result:
        return self._stat_result(stat.S_IFREG | 0o444, size)

    def _directory_stat(self) -> os.stat_result:
        return self._stat_result(stat.S_IFDIR | 0o555, 0)

    def _stat_result(self, mode: int, size: int) -> os.stat_result:
        ns = self._written_ns
        return os.stat_result((mode, 0, 0, 1, self._owner[0], self._owner[1], size, ns / 1e9, ns / 1e9, ns / 1e9),
                              {"st_mtime_ns": ns, "st_ctime_ns": ns, "st_atime_ns": ns})

    def statvfs(self) -> os.statvfs_result:
        """A repository has no size or free space of its own: plenty of both, in 4 KiB blocks."""
        blocks = 1 << 40
        return os.statvfs_result((4096, 4096, blocks, blocks, blocks, 1 << 32, 1 << 32, 1 << 32, 0, 1024))

    def remove_temporaries(self) -> int:
        """The directories of chunks of nodes being made (`_spill_store`) that a killed mount left
        in this one's place (held_directories.py: no living mount holds them), removed; and the
        nodes being made by this store, given up: icechunk stages nothing outside the session, and
        another mount's are its own (docs/icechunk.md). A remote repository's store leaves its own,
        as the contract has every remote store leave a fresh staged node (one may be mid-creation)."""
        removed = remove_left(self._spill_parent(), SPILL_PREFIX)
        if self.capabilities.remote:
            return removed
        staging = list(self._staging)
        for name in staging:
            self.abort_node(name)
        return removed + len(staging)

    # whole nodes: made and deleted in a branch's session; moved by a commit of their own

    def begin_node(self, path: str) -> str:
        """A staging name for the new node. icechunk takes a chunk only below an array it has: the
        node's chunks are kept in a directory of this machine (a LocalStore, `_spill_store`) until
        commit_node puts its documents, then its chunks, into the session."""
        self.check_writable(path)
        parent = path.rpartition("/")[0]
        staging = "/".join(filter(None, [parent, f"__zarrfs-node-{uuid.uuid4().hex[:12]}"]))
        self._staging.add(staging)
        return staging

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        self.check_writable(path)
        try:
            if self.stat(path) is not None:
                raise StoreError(f"cannot create {self.path(path)}: something is stored there already", errno.EEXIST)
            # one write of the whole node, saved once: a commit merges all of it or none, and the saved
            # fork holds it whole or not at all (icechunk takes a chunk only below an array it has:
            # the documents go first, within the same write)
            documents_staged = [StagedValue(f"{path}/{name}" if path else name, data) for name, data in documents.items()]
            with self._writing:
                self._run(self._publish(documents_staged), path)
                for key, data in self._spilled_values(staging):
                    self._run(self._store.set(f"{path}/{key}", _buffer(data)), f"{path}/{key}")
                self._save()
        finally:
            self.abort_node(staging)

    def _spilled_values(self, staging: str) -> Iterator[tuple[str, bytes]]:
        """(key below the node, value) of each chunk kept on this machine for the node being made."""
        if self._spill is None:
            return
        for key, _ in self._spill.files(staging):
            data = self._spill.get(f"{staging}/{key}", limit=MAX_VALUE)
            if data is not None:
                yield key, data

    def abort_node(self, staging: str) -> None:
        self._staging.discard(staging)
        if self._spill is not None:
            shutil.rmtree(os.path.join(self._spill.root, *staging.split("/")), ignore_errors=True)

    def _spilled(self, key: str) -> bool:
        """Whether `key` lies below a node being made (its chunks are kept on this machine)."""
        return any(key == staging or key.startswith(f"{staging}/") for staging in self._staging)

    def _spill_parent(self) -> str | None:
        """Beside the saved session: the mount's own place (-o recovery_dir); else the system's
        temporary directory."""
        return self._saved.directory if self._saved is not None else None

    def _spill_store(self) -> LocalStore:
        with self._spill_lock:
            if self._spill is None:
                directory = self._spill_parent()
                if directory is not None:
                    os.makedirs(directory, mode=0o700, exist_ok=True)
                path, self._spill_held = make_held(directory, SPILL_PREFIX)  # held: see remove_temporaries
                self._spill = LocalStore(path)
            return self._spill

    def close(self) -> None:
        """Nodes being made are given up: their chunks on this machine go."""
        with self._spill_lock:
            spill, self._spill = self._spill, None
        if spill is not None:
            spill.close()
            shutil.rmtree(spill.root, ignore_errors=True)
            os.close(self._spill_held)  # after the removal: held while removed

    def delete_node(self, path: str) -> None:
        self.check_writable(path)
        if self.stat(path) is None:
            raise StoreError(f"{self.path(path)}: no such node", errno.ENOENT)
        with self._writing:  # as publish: a commit merges the delete whole or not at all, and a crash keeps it
            self._run(self._store.delete_dir(path), path)
            self._save()

    def move_node(self, src: str, dst: str) -> None:
        """icechunk moves a node only in a rearrange session, which holds moves alone and is
        committed alone: the session's writes are committed first (one snapshot), then the move
        is a snapshot of its own on the branch, and a fresh session goes on from it."""
        self.check_writable(src)
        if self._branch is None:
            self._refuse(src)
        with self._writing:
            self._committing(self._move(src, dst), _moved(src, dst), src)

    async def _move(self, src: str, dst: str) -> str:
        if await self._stat(src) is None:
            raise StoreError(f"{self.path(src)}: no such node", errno.ENOENT)
        if await self._stat(dst) is not None:
            raise StoreError(f"cannot move {self.path(src)} to {dst}: something is stored there already", errno.EEXIST)
        assert self._branch is not None and self._fork is not None  # move_node refuses a store without them
        repository, branch = self._branch
        if self._fork.has_uncommitted_changes:
            await self._commit(f"zarrfs: the writes before moving /{src} to /{dst}")  # a conflict: EBUSY, kept
        rearranging = await repository.rearrange_session_async(branch)
        await rearranging.move_async(f"/{src}", f"/{dst}")
        snapshot: str = await rearranging.commit_async(_moved(src, dst))
        await self._next_session(repository, branch, snapshot)
        return snapshot

    def _check(self, key: str) -> None:
        """The contract's key rule: absolute keys, '..' and empty parts are EINVAL."""
        key_parts(key)


def _moved(src: str, dst: str) -> str:
    """A move's commit message."""
    return f"zarrfs: moved /{src} to /{dst}"


def _buffer(data: bytes) -> "Buffer":
    from zarr.core.buffer import default_buffer_prototype

    return default_buffer_prototype().buffer.from_bytes(data)

