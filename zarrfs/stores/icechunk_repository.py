"""An Icechunk repository as a source: its versions (branches, tags, snapshots) and a store of each.

Icechunk (earth-mover/icechunk) keeps a Zarr v3 hierarchy in snapshots, each a commit with a
parent, a message and a time; branches and tags name snapshots. A repository is recognised by its
own layout (the `repo` object of format 2, or the `refs/` of format 1, beside `snapshots/`) or
chosen with `-o icechunk`. icechunk-python needs Python >= 3.12 and is imported here only, when a
source is a repository: zarrfs runs without it.

Version names are neuroglancer's (and icechunk-java's): `@branch.NAME`, `@tag.NAME`, `@SNAPSHOTID`.
Every call into icechunk-python runs on one asyncio loop in a thread of ours (`Loop`) and is
waited for at most the mount's `-o timeout`: a repository that does not answer is one line and an
errno, never a hung request.
"""

import errno
import logging
import os
import re
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from zarrfs.errors import StoreError
from zarrfs.stores.async_loop import Loop, first_line
from zarrfs.stores.contained import never_followed_into
from zarrfs.stores.icechunk_contained import WatchedObjects, check_objects, escaping_locations
from zarrfs.stores.icechunk_saved import SavedSession
from zarrfs.stores.icechunk_storage import AccessOf, ObjectStoreAccess, repository_storage, s3_container_credentials
from zarrfs.stores.icechunk_store import IcechunkStore

if TYPE_CHECKING:  # icechunk (Python >= 3.12) is imported for a repository only
    from icechunk import Repository, Session, SnapshotInfo

log = logging.getLogger(__name__)

T = TypeVar("T")

BRANCH, TAG = "@branch.", "@tag."
SNAPSHOT_ID = re.compile(r"@[0-9A-HJKMNP-TV-Z]{20}")  # Crockford base32 of 12 bytes, as icechunk writes them
NEEDS = "icechunk needs Python >= 3.12 (icechunk 2): pip install 'zarrfs[icechunk]' there"


@dataclass(frozen=True)
class IcechunkChoice:
    """Which repository version a mount shows (-o icechunk, branch=, tag=, snapshot=)."""

    forced: bool = False  # -o icechunk: the source is a repository, whatever its layout says
    branch: str | None = None
    tag: str | None = None
    snapshot: str | None = None
    commit_on_unmount: str | None = None  # -o commit_on_unmount=MESSAGE: a writable branch's session committed

    def name(self) -> str:
        """The version's directory name: `@branch.main` by default."""
        if self.snapshot:
            return f"@{self.snapshot}"
        if self.tag:
            return f"{TAG}{self.tag}"
        return f"{BRANCH}{self.branch or 'main'}"

    def chosen(self) -> bool:
        return self.forced or any((self.branch, self.tag, self.snapshot, self.commit_on_unmount))


@dataclass(frozen=True)
class Version:
    """One version directory: the snapshot it shows, and that snapshot's commit."""

    name: str  # @branch.NAME, @tag.NAME or @SNAPSHOTID
    snapshot: str
    parent: str | None
    message: str
    written_ns: int  # the commit's time


def is_repository(source: str) -> bool:
    """A local directory laid out as an Icechunk repository (a remote one is chosen with -o icechunk:
    telling it by layout would cost a request on every mount)."""
    if not os.path.isdir(os.path.join(source, "snapshots")):
        return False
    return os.path.isfile(os.path.join(source, "repo")) or os.path.isdir(os.path.join(source, "refs"))


class IcechunkRepository:
    """The versions of one repository, and a read-only store of each (IcechunkStore)."""

    def __init__(self, source: str, root: str, repository: "Repository", loop: Loop, remote: bool,
                 allowed: tuple[str, ...] = (), follow_symlinks: bool = False,
                 watched: WatchedObjects | None = None):
        self.source, self.root, self._repository, self.loop, self.remote = source, root, repository, loop, remote
        self._watched = watched  # a local repository's objects, watched for symlinks (icechunk_contained.py)
        self._allowed, self._follow_symlinks = allowed, follow_symlinks  # virtual chunk containers read
        self._versions: tuple[float, dict[str, Version]] | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Its watch let go (an inotify instance: a user has few) and its loop's thread ended (an
        epoll instance and a socket pair): no call into icechunk is made after."""
        if self._watched is not None:
            self._watched.close()
        self.loop.close()

    def version(self, name: str) -> Version | None:
        """The version a directory name shows, None for no such version. A branch's is its head
        now; a snapshot's is looked up by id alone (it need not be in the listing)."""
        if name.startswith((BRANCH, TAG)) or SNAPSHOT_ID.fullmatch(name):
            return self._call(self._resolve(name), name)
        return None

    def versions(self, ttl: float = 1.0) -> dict[str, Version]:
        """Every branch, tag and snapshot reachable from one (icechunk keeps no list of all
        snapshots: the ancestry of each branch and tag, walked once each), by name; kept `ttl` s."""
        with self._lock:
            if self._versions is not None and time.monotonic() - self._versions[0] < ttl:
                return self._versions[1]
        found = self._call(self._walk(), "versions")
        with self._lock:
            self._versions = (time.monotonic(), found)
        return found

    def store(self, version: Version) -> IcechunkStore:
        session = self._call(self._repository.readonly_session_async(snapshot_id=version.snapshot), version.name)
        return IcechunkStore(session, self.loop, f"{self.root}/{version.name}", version.written_ns, self.remote,
                             virtual_refused=self._escapes(session, version.name))

    def branch_store(self, version: Version, recovery_dir: str | None = None) -> IcechunkStore:
        """A writable session on the branch `version` is the head of: its writes become commits;
        those not committed yet are kept in `recovery_dir` (icechunk_saved.py)."""
        branch = version.name[len(BRANCH):]
        session = self._call(self._repository.writable_session_async(branch), version.name)
        saved = SavedSession(recovery_dir, self.root, branch) if recovery_dir else None
        return IcechunkStore(session, self.loop, f"{self.root}/{version.name}", version.written_ns, self.remote,
                             (self._repository, branch), saved, self._escapes(session, version.name))

    def _escapes(self, session: "Session", name: str) -> bool:
        """Whether the version references a virtual chunk's file that leaves its container
        (icechunk_contained.py): each such file said in one line."""
        if not self._allowed:
            return False
        locations = self._call(session.all_virtual_chunk_locations_async(), name)
        escaping = escaping_locations(sorted(locations), list(self._allowed), self._follow_symlinks)
        for location in escaping:
            log.warning("%s/%s: virtual chunks in %s are not read: the file lies outside its container (a symlink); "
                        "none of this version's virtual chunks are read", self.root, name, location)
        return bool(escaping)

    def _call(self, coroutine: Coroutine[Any, Any, T], what: str) -> T:
        """A call into icechunk: its errors are one line naming the repository and what was asked."""
        return self.loop.call(coroutine, f"{self.root}: {what}", _errno_of)

    async def _resolve(self, name: str) -> Version | None:
        repository = self._repository
        try:
            if name.startswith(BRANCH):
                snapshot = await repository.lookup_branch_async(name[len(BRANCH):])
            elif name.startswith(TAG):
                snapshot = await repository.lookup_tag_async(name[len(TAG):])
            else:
                snapshot = name[1:]
            info = await repository.lookup_snapshot_async(snapshot)
        except Exception as e:
            if _errno_of(e) == errno.ENOENT:
                return None
            raise
        return _version(name, info)

    async def _walk(self) -> dict[str, Version]:
        repository = self._repository
        found: dict[str, Version] = {}
        starts = [(f"{BRANCH}{b}", {"branch": b}) for b in sorted(await repository.list_branches_async())]
        starts += [(f"{TAG}{t}", {"tag": t}) for t in sorted(await repository.list_tags_async())]
        for name, start in starts:
            first = True
            async for info in repository.async_ancestry(**start):
                if first:
                    found[name], first = _version(name, info), False
                if f"@{info.id}" in found:
                    break  # the rest of this line of history is listed already
                found[f"@{info.id}"] = _version(f"@{info.id}", info)
        return found


def _version(name: str, info: "SnapshotInfo") -> Version:
    return Version(name, info.id, info.parent_id, info.message, int(info.written_at.timestamp() * 1e9))


def _errno_of(error: Exception) -> int:
    """ENOENT for icechunk's own word that a branch, tag or snapshot is not there (the kernel may
    keep it: a version's directory is then missing a while); EIO for anything else, whatever its
    message says (an object of the storage not found is a broken repository, not a missing name)."""
    from icechunk import RefNotFoundError, SnapshotNotFoundError

    return errno.ENOENT if isinstance(error, (RefNotFoundError, SnapshotNotFoundError)) else errno.EIO


def open_repository(source: str, root: str, timeout: float, access: AccessOf | None = None,
                    follow_symlinks: bool = False) -> IcechunkRepository:
    """The repository at `source`: a directory, or an object store's URL reached as zarrfs's own
    store of it would be (`access`: the mount's obstore configuration of a scheme, which
    source_url.py makes from its options; icechunk_storage.py). Its virtual chunks are read from
    the containers `virtual_containers` allows."""
    try:
        import icechunk
    except ImportError:
        raise StoreError(NEEDS, errno.EOPNOTSUPP) from None
    if "ICECHUNK_LOG" not in os.environ:  # its warnings are written to stderr, past our log: errors only
        icechunk.set_logs_filter("error")
    access = access or (lambda scheme: ObjectStoreAccess())
    watched = None
    if not urlsplit(source).scheme:  # icechunk's local storage follows symlinks among its objects
        watched = check_objects(source, root, follow_symlinks)
    loop = Loop(timeout, watched.check if watched is not None else None)
    try:
        repository, allowed = _opened(icechunk, loop, source, root, access, follow_symlinks)
    except BaseException:
        if watched is not None:
            watched.close()
        loop.close()
        raise
    local = tuple(prefix for prefix in allowed if urlsplit(prefix).scheme == "file")
    return IcechunkRepository(source, root, repository, loop, urlsplit(source).scheme != "", local, follow_symlinks,
                              watched)


def _opened(icechunk: ModuleType, loop: Loop, source: str, root: str, access: AccessOf,
            follow_symlinks: bool) -> tuple["Repository", dict[str, Any]]:
    """icechunk's repository at `source`, and the virtual chunk containers it reads."""
    try:
        storage = repository_storage(icechunk, source, root, access)  # icechunk may refuse its settings here
        repository = loop.run(icechunk.Repository.open_async(storage), f"{root}: open")
        allowed = virtual_containers(icechunk, repository, source, root, follow_symlinks, access)
        if allowed:  # opened again, with icechunk told which containers it may read, and how
            credentials = icechunk.containers_credentials(allowed)  # each in icechunk's Credentials wrapper
            repository = loop.run(icechunk.Repository.open_async(storage, authorize_virtual_chunk_access=credentials),
                                  f"{root}: open")
    except StoreError:
        raise
    except Exception as e:
        raise StoreError(f"{root}: not an Icechunk repository that can be opened: {first_line(e)}",
                         _errno_of(e)) from None
    return repository, allowed


def virtual_containers(icechunk: ModuleType, repository: "Repository", source: str, root: str,
                       follow_symlinks: bool, access: AccessOf) -> dict[str, Any]:
    """The virtual chunk containers (icechunk's references into other files) whose chunks are
    read, each with the credentials icechunk reads it with. As for symlinks (stores/contained.py),
    a file:// container within a local repository's directory, any file:// container but those
    under /proc, /sys and /dev with -o symlinks=follow (a trusted repository); an s3:// container
    on the mount's own endpoint, with the mount's S3 credentials (icechunk_storage.py). Each other
    container is said once, in one line; a read of its chunks is refused by icechunk (EIO, one
    line naming the chunk)."""
    allowed: dict[str, Any] = {}
    within = os.path.realpath(source) if not urlsplit(source).scheme else None
    containers = repository.config.virtual_chunk_containers or {}
    for prefix in sorted(containers):
        parts = urlsplit(prefix)
        where = os.path.realpath(parts.path) if parts.scheme == "file" else None
        if where is not None and within is not None and os.path.commonpath([where, within]) == within:
            allowed[prefix] = icechunk.credentials.LocalFileSystemAccess
        elif where is not None and follow_symlinks and never_followed_into(where) is None:
            allowed[prefix] = icechunk.credentials.LocalFileSystemAccess
        elif where is not None:
            log.warning("%s: virtual chunks in %s are not read: the container is outside the repository "
                        "(-o symlinks=follow trusts it)", root, prefix)
        elif parts.scheme == "s3":
            credentials, why_not = s3_container_credentials(icechunk, containers[prefix], access)
            if credentials is not None:
                allowed[prefix] = credentials
            else:
                log.warning("%s: virtual chunks in %s are not read: %s", root, prefix, why_not)
        else:
            log.warning("%s: virtual chunks in %s are not read: zarrfs reads file:// and s3:// containers only, "
                        "for now", root, prefix)
    return allowed
