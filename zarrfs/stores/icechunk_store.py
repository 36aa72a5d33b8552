"""IcechunkStore: one snapshot of an Icechunk repository behind the Store contract, read-only.

Every value is read through icechunk-python's session store (zarr's async Store API) on the
repository's loop (async_loop.Loop): a chunk's byte range is a range request of icechunk, so a
read decodes only the chunks it touches, as on any other store. A snapshot never changes: its
listings and documents are trusted for the whole mount (metadata_ttl None), and every key's mtime
is the commit's time. Values are bounded as on other stores: a whole value's size is asked of
icechunk's manifest first (no request to the chunk's object), and one over `limit` is refused
before it is fetched.
"""

import errno
import os
import stat
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, NoReturn, TypeVar

from zarrfs.byte_ranges import ByteRange, Range, Suffix
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import StoreError, ValueChangedError, ZarrfsError
from zarrfs.stores.async_loop import Loop
from zarrfs.stores.contained import key_parts
from zarrfs.stores.contract import Capabilities, Staged

T = TypeVar("T")

MAX_VALUE = 1 << 31  # a whole value's size without a caller's limit: what one read may take at most


class IcechunkStore:
    """A read-only session of one snapshot. `session`: icechunk's Session; `root`: the source and
    the version's name, for messages; `written_ns`: the commit's time."""

    def __init__(self, session, loop: Loop, root: str, written_ns: int, remote: bool):
        self._session, self._store, self._loop = session, session.store, loop
        self.root, self.read_only = root, True
        self.snapshot = session.snapshot_id
        self._written_ns = written_ns
        self._owner = (os.getuid(), os.getgid())
        self.capabilities = Capabilities(remote=remote, listing=True, metadata_ttl=None,
                                         read_deadline=loop.timeout if remote else None)

    def path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def _run(self, coroutine: Coroutine[Any, Any, T], key: str) -> T:
        """A call on the loop; icechunk's own errors (multi-line reports) are one line naming the key."""
        try:
            return self._loop.run(coroutine, self.path(key))
        except ZarrfsError:
            raise
        except Exception as e:
            lines = str(e).strip().splitlines()
            raise StoreError(f"{self.path(key)}: {lines[0][:300] if lines else type(e).__name__}", errno.EIO) from None

    # values

    def get(self, key: str, byte_range: ByteRange = None, limit: int | None = None) -> bytes | None:
        return self._run(self._get(key, byte_range, limit), key)

    async def _get(self, key: str, byte_range: ByteRange, limit: int | None) -> bytes | None:
        from zarr.abc.store import RangeByteRequest, SuffixByteRequest
        from zarr.core.buffer import default_buffer_prototype

        self._check(key)
        request: object = None
        if isinstance(byte_range, Range):
            if byte_range.length <= 0:
                return b"" if await self._is_value(key) else None
            request = RangeByteRequest(byte_range.start, byte_range.start + byte_range.length)
            wanted = byte_range.length
        elif isinstance(byte_range, Suffix):
            request, wanted = SuffixByteRequest(byte_range.length), byte_range.length
        else:
            if not await self._is_value(key):
                return None
            size, wanted = await self._store.getsize(key), limit if limit is not None else MAX_VALUE
            if size > wanted:
                raise StoreError(f"{self.path(key)}: {size} bytes stored, more than the {wanted} bytes expected",
                                 errno.EIO)
        value = await self._store.get(key, default_buffer_prototype(), request)
        if value is None:
            return None
        data = value.to_bytes()
        if len(data) > wanted:
            raise StoreError(f"{self.path(key)}: answered {len(data)} bytes, more than the {wanted} bytes asked",
                             errno.EIO)
        return data

    def get_versioned(self, key: str, byte_range: ByteRange = None, expect: object = None,
                      limit: int | None = None) -> tuple[bytes | None, object]:
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

    # writes: a snapshot is read-only

    def check_writable(self, key: str) -> None:
        self._refuse(key)

    def stage(self, key: str, data: BytesLike | None) -> Staged:
        self._refuse(key)

    def publish(self, staged: Sequence[Staged]) -> None:
        if staged:
            self._refuse(staged[0].key)

    def discard(self, staged: Sequence[Staged]) -> None:
        pass  # nothing is ever staged

    def set(self, key: str, data: bytes) -> None:
        self._refuse(key)

    def delete(self, key: str) -> None:
        self._refuse(key)

    def _refuse(self, key: str) -> NoReturn:
        raise StoreError(f"{self.path(key)}: a snapshot of an Icechunk repository is read-only", errno.EROFS)

    # listing and metadata

    def list_dir(self, prefix: str) -> list[str]:
        return self._run(self._list_dir(prefix), prefix)

    async def _list_dir(self, prefix: str) -> list[str]:
        if prefix:
            self._check(prefix)
        return sorted({name.rstrip("/") async for name in self._store.list_dir(prefix)})

    def files(self, prefix: str, directories: bool = False) -> Iterator[tuple[str, os.stat_result]]:
        """(key below `prefix`, stat) of every value, sizes from icechunk's manifests (no value is
        read); icechunk has no directories of its own to add."""
        yield from self._run(self._files(prefix), prefix)

    async def _files(self, prefix: str) -> list[tuple[str, os.stat_result]]:
        below = f"{prefix.rstrip('/')}/" if prefix else ""
        found = []
        async for key in self._store.list_prefix(below):
            found.append((key[len(below):], self._file_stat(await self._store.getsize(key))))
        return sorted(found)

    def stat(self, key: str) -> os.stat_result | None:
        return self._run(self._stat(key), key)

    async def _stat(self, key: str) -> os.stat_result | None:
        if not key:
            return self._directory_stat()
        self._check(key)
        if await self._is_value(key):
            return self._file_stat(await self._store.getsize(key))
        async for _ in self._store.list_dir(key):
            return self._directory_stat()
        return None

    async def _is_value(self, key: str) -> bool:
        from icechunk import InvalidInputError

        try:
            return await self._store.exists(key)
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
        return 0  # icechunk stages nothing outside its session

    # whole nodes: a snapshot is read-only

    def begin_node(self, path: str) -> str:
        self._refuse(path)

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        self._refuse(path)

    def abort_node(self, staging: str) -> None:
        pass  # nothing is ever staged

    def delete_node(self, path: str) -> None:
        self._refuse(path)

    def move_node(self, src: str, dst: str) -> None:
        self._refuse(src)

    def _check(self, key: str) -> None:
        """The contract's key rule: absolute keys, '..' and empty parts are EINVAL."""
        key_parts(key)
