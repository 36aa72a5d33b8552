"""A Zarr store in object storage (S3 and S3-compatible servers, GCS, Azure, HTTP) through obstore.

The same interface as LocalStore, so the engine never asks where bytes live:

- get: one GET, ranged (`Range` or `Suffix`) when a range is asked for. Small metadata
  documents are fetched whole once and trusted for `metadata_ttl` seconds, like listings.
  Every answer is bounded before memory is taken for it: the size the server announces is
  checked against the most the caller can use (the range asked for; for a whole value the
  `limit` the engine gives, what a chunk of that array can encode to; DOCUMENT_LIMIT for a
  document; VALUE_LIMIT where nothing is known), and the body is taken through obstore's
  stream, stopped as soon as more arrives than announced. A server that announces or sends
  more, or less, gets EIO and one line naming the key and the sizes (bounded_get.py).
- stat and list_dir: answered from one LIST per prefix (`list_with_delimiter`) per
  `metadata_ttl`; a metadata document's stat comes from its GET. Plain HTTP cannot list.
- stage/publish: staged values are held in memory, and publish PUTs each one, conditionally:
  If-Match on the ETag this store last saw for the key, If-None-Match for a key it saw absent.
  A value someone else changed meanwhile raises ConflictError, and the engine merges and
  writes again (see Array.flush). A deletion is a DELETE. Each PUT is atomic; a publish of
  several objects is not: a failure names the objects stored before it (StoreError.stored).
  A PUT or DELETE whose connection failed is sent again (resend.py).

obstore's synchronous calls release the GIL, so FUSE worker threads run them in parallel.
"""

import errno
import logging
import os
import stat
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import obstore
from obstore.exceptions import AlreadyExistsError, NotFoundError, NotSupportedError, PreconditionError
from obstore.store import ObjectStore as ObstoreStore

NOT_FOUND = (NotFoundError, FileNotFoundError)  # obstore raises the builtin for a missing key

from zarrfs.byte_ranges import ByteRange, Range, Suffix, coalesce
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import ConflictError, StoreError, ValueChangedError
from zarrfs.names import text_key
from zarrfs.stores import bounded_get, contract, resend
from zarrfs.stores import object_nodes as objecttree
from zarrfs.stores.contained import key_parts
from zarrfs.stores.contract import Capabilities, own_staged
from zarrfs.stores.local_nodes import TEMP_PREFIX
from zarrfs.stores.recent_timeouts import RecentTimeouts
from zarrfs.stores.remote_errors import MISSING_BUCKET_CODES, explain, server_code

if TYPE_CHECKING:  # obstore's typed dicts exist in its stubs only
    from obstore import GetOptions, ObjectMeta, PutMode, PutResult, UpdateVersion

log = logging.getLogger(__name__)

DOCUMENTS = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")  # small, read whole, cached
PUBLISHERS = 16  # concurrent PUTs of one publish
ETAGS = 1 << 16  # keys whose version is remembered for conditional PUTs (about 100 bytes each)
FETCHERS = 16  # concurrent GETs of whole chunks for one read (batched_fetch.py)
COALESCE = 1 << 20  # ranges of one value closer than this are read by one GET, as obstore's get_ranges does
RECENTLY = 1.0  # seconds a key whose GET timed out fails at once (recent_timeouts.py)


@dataclass
class _Listing:
    fetched: float  # time.monotonic() of the LIST
    objects: dict[str, "ObjectMeta"]  # by name
    prefixes: set[str]
    changed_ns: int  # when the names last changed: the directory's mtime


@dataclass
class _Document:
    fetched: float
    data: bytes | None  # None: no such key
    stat: os.stat_result | None


class Staged(NamedTuple):
    """A value held for publish(): its bytes, None for a deletion."""

    key: str
    data: bytes | None


class ObjectStore:
    """`store` is an obstore store whose root is the hierarchy's root; `url` names it in messages."""

    def __init__(self, store: ObstoreStore, url: str, read_only: bool = False, metadata_ttl: float = 60.0,
                 can_list: bool = True, credentials: str | None = None, timeout: float = 30.0) -> None:
        self.store = store
        self.timeout = timeout  # seconds for one request, retries included (source_url.py)
        self._timeouts = RecentTimeouts(min(RECENTLY, timeout / 2))
        self.root = url
        self.credentials = credentials  # where they came from, for messages (never their value)
        self.read_only = read_only
        # each request is a round trip (a read's chunks are fetched together), other machines write
        # it too (stored state is looked at again after metadata_ttl), PUTs are conditional on ETags
        self.metadata_ttl = metadata_ttl  # as capabilities.metadata_ttl, which is never None here
        self.capabilities = Capabilities(remote=True, conditional_writes=True, conditional_documents=True,
                                         batched_reads=True,
                                         listing=can_list, metadata_ttl=metadata_ttl, read_deadline=timeout)
        self._listings: dict[str, _Listing] = {}
        self._documents: dict[str, _Document] = {}
        # the versions to PUT on (_remember): {"e_tag", "version"} as obstore's PUT takes them; None: absent
        self._etags: OrderedDict[str, UpdateVersion | None] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(PUBLISHERS, thread_name_prefix="publish")
        self._fetchers = ThreadPoolExecutor(FETCHERS, thread_name_prefix="fetch")
        self._owner = (os.getuid(), os.getgid())
        self._suffix_ranges = True  # until the store says it has none (Azure)
        self._started_ns = time.time_ns()

    def path(self, key: str) -> str:
        return f"{self.root.rstrip('/')}/{key}"

    # reads

    def get(self, key: str, byte_range: ByteRange = None, limit: int | None = None) -> bytes | None:
        _parts(key)
        if _is_document(key) and byte_range is None:
            return self._document(key).data
        data = self.get_versioned(key, byte_range, limit=limit)[0]
        return None if data is None else bytes(data)

    def get_versioned(self, key: str, byte_range: ByteRange = None, expect: object = None,
                      limit: int | None = None) -> tuple[bytes | None, object]:
        """As get(), with the version read ({"e_tag", "version"}); `expect` makes the GET
        conditional on it (If-Match): see the Store contract. The bytes come as the one piece
        obstore's stream makes of the body (bounded_get.py), handed on without a further copy:
        a copy of every chunk fetched cost a tenth of the daemon's CPU on a stream (the copy,
        and the faults of new memory to copy into)."""
        _parts(key)
        self._timeouts.check(key)
        options: GetOptions = {}
        if isinstance(byte_range, Suffix):
            if byte_range.length == 0:
                return b"", expect
            if not self._suffix_ranges:
                return self._suffix_from_size(key, byte_range.length, expect)
            options["range"] = {"suffix": byte_range.length}
        elif isinstance(byte_range, Range):
            if byte_range.length == 0:
                return b"", expect
            options["range"] = (byte_range.start, byte_range.start + byte_range.length)
        expected_e_tag = _e_tag(key, expect)
        if expected_e_tag:
            options["if_match"] = expected_e_tag
        log.debug("GET %s %s", key, options.get("range", "whole"))
        try:
            result = obstore.get(self.store, key, options=options or None)
            data = bounded_get.body(key, result, bounded_get.most(byte_range, limit), self.error)
        except NOT_FOUND:
            if expect is not None:
                raise ValueChangedError(f"{self.path(key)} is gone since it was read") from None
            self._remember(key, None, byte_range)
            return None, None
        except PreconditionError:
            raise ValueChangedError(f"{self.path(key)} was replaced since it was read") from None
        except NotSupportedError:
            if not isinstance(byte_range, Suffix):
                raise
            self._suffix_ranges = False  # Azure Blob has no suffix ranges: ask for the size first
            return self._suffix_from_size(key, byte_range.length, expect)
        except StoreError:
            raise
        except Exception as e:
            if isinstance(byte_range, Range) and "416" in str(e):  # a range past the end: short, as pread
                return b"", expect
            self._timeouts.note(key, e)
            raise self.error("cannot read", key, e) from None
        version = _version(result.meta)
        if expected_e_tag and version.get("e_tag") != expected_e_tag:
            # a server that ignores If-Match (fake-gcs-server does) answers from the new version:
            # its own ETag says so, and parts of two versions must never be decoded together
            raise ValueChangedError(f"{self.path(key)} was replaced since it was read")
        self._remember(key, version, byte_range)
        return data, version

    def _suffix_from_size(self, key: str, length: int, expect: object) -> tuple[bytes | None, object]:
        """The last `length` bytes of `key` where the store takes no suffix range: a HEAD for its
        size, then a bounded range of that version (a shard index costs one request more, once
        per metadata_ttl)."""
        log.debug("HEAD %s (no suffix ranges)", key)
        try:
            meta = obstore.head(self.store, key)
        except NOT_FOUND:
            if expect is not None:
                raise ValueChangedError(f"{self.path(key)} is gone since it was read") from None
            self._remember(key, None, Suffix(length))
            return None, None
        except Exception as e:
            raise self.error("cannot read", key, e) from None
        size = meta["size"]
        return self.get_versioned(key, Range(max(0, size - length), min(length, size)), expect or _version(meta))

    def _remember(self, key: str, e_tag: "UpdateVersion | None", byte_range: ByteRange) -> None:
        """The version a later PUT of `key` is conditional on: the one last read whole, since a
        whole read is what a merge builds on. A ranged read (a reader's, perhaps while a flush
        merges) must not move it on to a version nobody merged with."""
        if byte_range is None or key not in self._etags:
            self._set_etag(key, e_tag)

    def version_known(self, key: str) -> bool:
        """Whether a PUT of `key` would be conditional (on its ETag, or on its absence)."""
        return key in self._etags

    def exclusive(self, key: str) -> AbstractContextManager[None]:
        """Nothing held: other writers are other machines, and each PUT is conditional."""
        return nullcontext()

    def _set_etag(self, key: str, e_tag: "UpdateVersion | None") -> None:
        """Remembered for the ETAGS keys read or written last: a write follows its read closely
        (a partial write reads its chunk first). A key forgotten is PUT unconditionally."""
        with self._lock:
            self._etags[key] = e_tag
            self._etags.move_to_end(key)
            if len(self._etags) > ETAGS:
                self._etags.popitem(last=False)

    def open_value(self, key: str) -> int | None:
        """Objects are no files of this machine (capabilities.file_values is False)."""
        raise StoreError(f"cannot open {key!r} as a file: {self.root} is an object store", errno.ENOTSUP)

    def get_ranges(self, key: str, ranges: list[Range], expect: object = None) -> list[bytes] | None:
        """Several ranges of one value in one call: one GET per run of ranges less than COALESCE
        apart, the runs fetched concurrently, each bounded as get_versioned bounds a range
        (obstore's get_ranges would take whatever the server sends, and takes no condition).
        None if there is no such key. With `expect`, each GET is conditional on that version."""
        _parts(key)
        runs = coalesce(ranges, COALESCE)
        fetched = list(self._fetchers.map(lambda run: self.get_versioned(key, run[0], expect)[0], runs))
        present = [data for data in fetched if data is not None]
        if len(present) < len(fetched):
            return None
        out = [b""] * len(ranges)
        for (run, members), data in zip(runs, present, strict=True):
            for i in members:  # copies: a range must not hold its whole run's memory
                start = ranges[i].start - run.start
                out[i] = bytes(data[start:start + ranges[i].length])
        return out

    def get_many(self, keys: list[str], limit: int | None = None) -> dict[str, bytes | None]:
        """Whole values of several keys, fetched concurrently (bytes-like, as get_versioned),
        each of at most `limit` bytes."""
        return dict(zip(keys, self._fetchers.map(lambda key: self._value(key, limit), keys), strict=False))

    def _value(self, key: str, limit: int | None) -> bytes | None:
        return self._document(key).data if _is_document(key) else self.get_versioned(key, limit=limit)[0]

    def _document(self, key: str) -> _Document:
        cached = self._documents.get(key)
        if cached is not None and time.monotonic() - cached.fetched < self.metadata_ttl:
            return cached
        fetched = time.monotonic()
        log.debug("GET %s whole (document)", key)
        try:
            result = obstore.get(self.store, key)
            data = bounded_get.body(key, result, bounded_get.DOCUMENT_LIMIT, self.error)
            meta = result.meta
        except NOT_FOUND as e:
            self._check_bucket(key, e)
            document = _Document(fetched, None, None)
        except StoreError:
            raise
        except Exception as e:
            raise self.error("cannot read", key, e) from None
        else:
            self._set_etag(key, _version(meta))
            document = _Document(fetched, data, self._file_stat(meta))
        self._documents[key] = document
        return document

    def _check_bucket(self, key: str, error: Exception) -> None:
        """A key is absent, or its whole bucket is: the server says which (NoSuchBucket), and a
        missing bucket is an error, not an empty hierarchy."""
        code, _ = server_code(str(error))
        if code in MISSING_BUCKET_CODES:
            raise self.error("cannot read", key, error) from None

    def check_root(self) -> None:
        """At start-up: when the root has no zarr.json, make sure the server answers as an
        object store at all (a LIST of the root), so that an endpoint that is some other HTTP
        service says so instead of "not a Zarr hierarchy". Costs nothing when zarr.json is there,
        and the LIST is the one the hierarchy's first listing uses."""
        if self._document("zarr.json").data is not None or not self.capabilities.listing:
            return
        try:
            self._listing("")
        except StoreError as e:
            if e.errno in (errno.ENOENT, errno.EACCES):  # a missing bucket, refused credentials: it does answer
                raise
            raise StoreError(f"{self.root}: does not answer as an object store ({e}): is the endpoint right?",
                             e.errno) from None

    def stat(self, key: str) -> os.stat_result | None:
        """A key's stat: a document's from its GET, anything else from its parent's LIST."""
        parts = _parts(key)
        if not parts:
            return self._directory_stat(self._listing("") if self.capabilities.listing else None)
        if _is_document(key):
            return self._document(key).stat
        if not self.capabilities.listing:
            return self._directory_stat(None)  # plain HTTP: every non-document key may be a group
        parent, name = "/".join(parts[:-1]), parts[-1]
        listing = self._listing(parent)
        if name in listing.prefixes:
            return self._directory_stat(self._listing(key))
        meta = listing.objects.get(name)
        return None if meta is None else self._file_stat(meta)

    def list_dir(self, prefix: str) -> list[str]:
        """Names directly below `prefix`, without staged nodes (object_nodes.py)."""
        if not self.capabilities.listing:
            return []
        listing = self._listing(prefix)
        return sorted(name for name in {*listing.objects, *listing.prefixes} if not name.startswith(TEMP_PREFIX))

    def files(self, prefix: str, directories: bool = False) -> Iterator[tuple[str, os.stat_result]]:
        """(key relative to `prefix`, stat) of every object below `prefix`, from one recursive
        LIST (paged by the server): no value is read. An object store has no directories to
        add: an object deleted leaves no trace there."""
        if not self.capabilities.listing:
            return
        _parts(prefix)
        log.debug("LIST %s/ recursive", prefix)
        try:
            for page in obstore.list(self.store, f"{prefix}/" if prefix else None, chunk_size=1000):
                for meta in page:
                    relative = meta["path"][len(prefix) + 1:] if prefix else meta["path"]
                    if not any(part.startswith(TEMP_PREFIX) for part in relative.split("/")):
                        yield relative, self._file_stat(meta)
        except NOT_FOUND:
            return
        except Exception as e:
            raise self.error("cannot list", prefix or "/", e) from None

    def _listing(self, prefix: str) -> _Listing:
        cached = self._listings.get(prefix)
        now = time.monotonic()
        if cached is not None and now - cached.fetched < self.metadata_ttl:
            return cached
        objects, prefixes = self._list(prefix)
        changed = cached.changed_ns if cached and (set(objects), prefixes) == (set(cached.objects), cached.prefixes) \
            else time.time_ns()
        listing = self._listings[prefix] = _Listing(now, objects, prefixes, changed)
        return listing

    def _list(self, prefix: str) -> tuple[dict[str, "ObjectMeta"], set[str]]:
        _parts(prefix)
        start = f"{prefix}/" if prefix else None
        log.debug("LIST %s/", prefix)
        try:
            result = obstore.list_with_delimiter(self.store, start)
        except NotSupportedError:
            raise StoreError(f"{self.root}: this store cannot list; it needs consolidated metadata",
                             errno.EOPNOTSUPP) from None
        except Exception as e:
            raise self.error("cannot list", prefix or "/", e) from None
        objects = {meta["path"].rsplit("/", 1)[-1]: meta for meta in result["objects"]}
        prefixes = {p.rstrip("/").rsplit("/", 1)[-1] for p in result["common_prefixes"]}
        return objects, prefixes

    def _file_stat(self, meta: "ObjectMeta") -> os.stat_result:
        """An object's stat: st_ino is its ETag's CRC, so a rewrite shows even within the second
        that its time (whole seconds on S3) cannot tell apart."""
        modified = meta.get("last_modified")
        ns = int(modified.timestamp() * 1e9) if modified is not None else self._started_ns
        e_tag = meta.get("e_tag") or ""
        return _stat_result(stat.S_IFREG | 0o644, meta["size"], ns, self._owner, zlib.crc32(e_tag.encode()))

    def _directory_stat(self, listing: _Listing | None) -> os.stat_result:
        return _stat_result(stat.S_IFDIR | 0o755, 0, listing.changed_ns if listing else self._started_ns, self._owner)

    def statvfs(self) -> os.statvfs_result:
        """An object store has no size or free space: plenty of both, said in 4 KiB blocks."""
        blocks = 1 << 40
        return os.statvfs_result((4096, 4096, blocks, blocks, blocks, 1 << 32, 1 << 32, 1 << 32, 0, 1024))

    # writes

    def stage(self, key: str, data: BytesLike | None) -> Staged:
        """Hold a new value (None: a deletion) for publish(); nothing is sent yet."""
        self.check_writable(key)
        _parts(key)
        return Staged(key, None if data is None else bytes(memoryview(data).cast("B")))

    def publish(self, staged: Sequence[contract.Staged]) -> None:
        """PUT (or DELETE) each staged value, conditional on what this store last saw of it.
        Raises ConflictError naming the values another writer changed, StoreError for any other
        failure; either names in `stored` the values that were stored all the same, which a
        write-back need not send again."""
        results = list(self._pool.map(self._publish_one, own_staged(staged, Staged, self.root)))
        stored = [key for key, error in results if error is None]
        conflicts = [key for key, error in results if isinstance(error, ConflictError)]
        failures = [error for _, error in results if error is not None and not isinstance(error, ConflictError)]
        if failures:
            raise StoreError(str(failures[0]), failures[0].errno, stored)
        if conflicts:
            raise ConflictError(f"changed by another writer meanwhile: {', '.join(conflicts[:5])}"
                                f"{' ...' if len(conflicts) > 5 else ''}", errno.EAGAIN, conflicts, stored)

    def _publish_one(self, staged: Staged) -> tuple[str, StoreError | None]:
        key, data = staged
        try:
            log.debug("%s %s", "DELETE" if data is None else "PUT", key)
            if data is None:
                self.delete_object(key)
                self._set_etag(key, None)
            else:
                known = self._etags.get(key, ...)
                # a version the store gave neither an ETag nor a generation for cannot be a condition
                mode: PutMode = "overwrite" if known is ... or known == {} else "create" if known is None else known
                self._set_etag(key, _version(self.put_object(key, data, mode)))
        except (PreconditionError, AlreadyExistsError):
            with self._lock:
                self._etags.pop(key, None)  # unknown now: the merge reads it again
            return key, ConflictError(key)
        except NOT_FOUND:
            if data is not None:  # If-Match on an object another writer deleted: AWS S3 answers 404
                with self._lock:
                    self._etags.pop(key, None)
                return key, ConflictError(key)
            self._set_etag(key, None)  # a DELETE of what is gone already
        except Exception as e:
            return key, self.error("cannot write", key, e)
        finally:
            self._forget(key)
        return key, None

    def put_object(self, key: str, data: bytes, mode: "PutMode") -> "PutResult":
        """One PUT (`mode` as obstore's: "create", "overwrite" or a version), sent again when its
        connection fails within half the timeout; obstore's errors as they are."""
        return resend.put(self.store, key, data, mode, self.timeout / 2)

    def delete_object(self, key: str) -> None:
        """One DELETE, sent again as put_object's PUT; a key gone already raises NotFound."""
        resend.delete(self.store, key, self.timeout / 2)

    def _forget(self, key: str) -> None:
        """What this store remembers of `key` and its parent's listing is stale now."""
        self._documents.pop(key, None)
        parent = key.rpartition("/")[0]
        with self._lock:
            self._listings.pop(parent, None)

    def discard(self, staged: Sequence[contract.Staged]) -> None:
        """Nothing was sent: nothing to remove."""
        own_staged(staged, Staged, self.root)  # but another store's values are refused, as publish() refuses them

    def set(self, key: str, data: bytes) -> None:
        self.publish([self.stage(key, data)])

    def delete(self, key: str) -> None:
        self.publish([self.stage(key, None)])

    # whole nodes (see object_nodes.py for what each step makes visible)

    def begin_node(self, path: str) -> str:
        return objecttree.begin_node(self, path)

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        objecttree.commit_node(self, staging, path, documents)

    def abort_node(self, staging: str) -> None:
        objecttree.abort_node(self, staging)

    def delete_node(self, path: str) -> None:
        objecttree.delete_node(self, path)

    def move_node(self, src: str, dst: str) -> None:
        objecttree.move_node(self, src, dst)

    def forget_prefix(self, prefix: str) -> None:
        """Everything remembered of keys below `prefix`, and of its parent's listing."""
        below = f"{prefix}/"
        with self._lock:
            for cache in (self._documents, self._listings, self._etags):
                for key in [k for k in cache if k == prefix or k.startswith(below)]:
                    del cache[key]
            self._listings.pop(prefix.rpartition("/")[0], None)

    def error(self, what: str, key: str, error: BaseException) -> StoreError:
        """One line naming the key and what the server's answer means (remote_errors.py); never the
        request's credentials, but where they came from when they are the cause."""
        explained = explain(error, self.root.partition(":")[0], self.credentials)
        return StoreError(f"{what} {key!r}: {explained.reason}", explained.errno)

    def close(self) -> None:
        """Nothing to let go here: the client's connections (kept alive for the next request)
        are closed when the client is let go with this store, which holds no descriptor."""

    def remove_temporaries(self) -> int:
        """Leftovers of interrupted node operations are cleaned in the background (it takes a
        LIST of the whole store, which must not hold up the mount); PUTs themselves are atomic
        and leave nothing half-written. Returns 0: the cleaner logs what it removes."""
        threading.Thread(target=self._clean_leftovers, name="leftovers", daemon=True).start()
        return 0

    def _clean_leftovers(self) -> None:
        try:
            removed = objecttree.clean_leftovers(self)
        except Exception as e:
            log.warning("%s: cannot look for leftovers of interrupted operations: %s", self.root, e)
        else:
            if removed:
                log.warning("%s: removed %d leftovers of interrupted creations and deletions", self.root, removed)

    def check_writable(self, key: str) -> None:
        _parts(key)  # a node made, moved or deleted through the mount is checked here first
        if self.read_only:
            raise StoreError(f"cannot write {key!r}: the store is read-only", errno.EROFS)


def _version(meta: "ObjectMeta | PutResult") -> "UpdateVersion":
    """What a conditional PUT is conditional on: the ETag (S3's If-Match, Azure's), and the
    version where the store has one (GCS's generation, for x-goog-if-generation-match)."""
    version: UpdateVersion = {}
    if meta.get("e_tag") is not None:
        version["e_tag"] = meta["e_tag"]
    if meta.get("version") is not None:
        version["version"] = meta["version"]
    return version


def _e_tag(key: str, expect: object) -> str | None:
    """The ETag a read of `key` is conditional on: that of `expect`, a version this store gave
    (get_versioned), or None for no condition (no version, or one without an ETag)."""
    if expect is None:
        return None
    if not isinstance(expect, dict):
        raise StoreError(f"cannot read {key!r} at version {expect!r}: not a version an object store gave",
                         errno.EINVAL)
    e_tag = expect.get("e_tag")
    return e_tag if isinstance(e_tag, str) and e_tag else None


def _is_document(key: str) -> bool:
    return key.rsplit("/", 1)[-1] in DOCUMENTS


def _stat_result(mode: int, size: int, mtime_ns: int, owner: tuple[int, int], ino: int = 0) -> os.stat_result:
    seconds = mtime_ns / 1e9
    return os.stat_result((mode, ino, 0, 1, owner[0], owner[1], size, seconds, seconds, seconds),
                          {"st_mtime_ns": mtime_ns, "st_ctime_ns": mtime_ns, "st_atime_ns": mtime_ns})


def _parts(key: str) -> list[str]:
    """The key's names (beneath.key_parts), refused with EILSEQ when they are not UTF-8: object
    keys and URLs are Unicode text (names.py). Only that key fails; its siblings never meet it."""
    text_key(key)
    return key_parts(key)
