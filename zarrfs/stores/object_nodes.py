"""Whole nodes in an object store: create, delete and move a node, which means every key below
its prefix. An object store has no rename, so each step is ordered so that a node is seen
whole or not at all, by the rule that a node exists when its document does:

- create: the chunks written under a staging prefix beside the target (`.zarrfs-tmp-node-*`,
  never listed) are copied into place server-side, then the documents are PUT with
  If-None-Match: the node appears with its last document, all its chunks already there.
- delete: the documents go first (the node vanishes at once), then the chunks.
- move: copy the chunks, then the documents (the new node appears whole), then delete the old
  documents (the old node vanishes) and its chunks. For a moment both names show the node.

Not atomic: an interruption between the steps leaves chunks with no document (staged, copied or
left behind). They are never listed as nodes, and never taken over: a name that holds any key
is refused (EEXIST). A deletion first PUTs a tombstone (`NODE/.zarrfs-tmp-deleted`) and removes
it last, so what an interrupted one leaves is known to be ours: at the next mount,
clean_leftovers finishes it, and removes staged prefixes, once they have been untouched for an
hour (another machine may be in the middle of one). Copies left by an interrupted move have no
mark and stay.
"""

import errno
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, TypeVar

import obstore
from obstore.store import ObjectStore

from zarrfs.errors import StoreError
from zarrfs.nodes.documents import DOCUMENT_NAMES
from zarrfs.stores import bounded_get
from zarrfs.stores.local_nodes import TEMP_PREFIX

if TYPE_CHECKING:  # obstore's typed dicts exist in its stubs only
    from obstore import PutMode, PutResult


class NodeHost(Protocol):
    """What these functions ask of the ObjectStore whose nodes they make: its own interface to
    this component, not part of the Store contract (no caller above stores/ uses it)."""

    store: ObjectStore  # the obstore store (S3Store, GCSStore, AzureStore) the keys are relative to

    def check_writable(self, key: str) -> None:
        """StoreError(EROFS) naming `key` on a read-only store (the Store contract's)."""

    def put_object(self, key: str, data: bytes, mode: "PutMode") -> "PutResult":
        """One PUT, `mode` as obstore's ("create", "overwrite", a version); obstore's errors as
        they are (AlreadyExistsError for "create" over an object)."""

    def delete_object(self, key: str) -> None:
        """One DELETE; obstore's NotFoundError for a key gone already."""

    def forget_prefix(self, prefix: str) -> None:
        """Drop what the store remembers (listings, documents, versions) of keys below `prefix`
        and of its parent's listing: a node made, moved or deleted changed them all."""

    def error(self, what: str, key: str, error: BaseException) -> StoreError:
        """The StoreError to raise for obstore's `error`: one line, "{what} {key!r}: reason", its
        errno from the server's answer, never a credential."""


T = TypeVar("T")  # an item _run hands to its function
WORKERS = 16  # concurrent copies and deletions
TOMBSTONE = f"{TEMP_PREFIX}deleted"
STALE = 3600.0  # seconds untouched before a leftover is taken for an interrupted mount's


def begin_node(store: NodeHost, path: str) -> str:
    store.check_writable(path)
    parent = path.rpartition("/")[0]
    return "/".join(filter(None, [parent, f"{TEMP_PREFIX}node-{uuid.uuid4().hex[:12]}"]))


def commit_node(store: NodeHost, staging: str, path: str, documents: dict[str, bytes]) -> None:
    store.check_writable(path)
    if _keys(store, path):
        raise StoreError(f"cannot create {path!r}: something is stored there already", errno.EEXIST)
    _copy(store, {f"{staging}/{key}": f"{path}/{key}" for key in _keys(store, staging)})
    _put_documents(store, path, documents)
    _delete(store, [f"{staging}/{key}" for key in _keys(store, staging)])
    store.forget_prefix(path)


def abort_node(store: NodeHost, staging: str) -> None:
    _delete(store, [f"{staging}/{key}" for key in _keys(store, staging)])
    store.forget_prefix(staging)


def delete_node(store: NodeHost, path: str) -> None:
    store.check_writable(path)
    if not path:
        raise StoreError("the root cannot be deleted", errno.EPERM)
    keys = _keys(store, path)
    if not keys:
        raise StoreError(f"cannot delete {path!r}: no such node", errno.ENOENT)
    try:
        obstore.put(store.store, f"{path}/{TOMBSTONE}", b"", use_multipart=False)
    except Exception as e:
        raise store.error("cannot delete", path, e) from None
    documents = [key for key in keys if key in DOCUMENT_NAMES]
    _delete(store, [f"{path}/{key}" for key in documents])  # the node vanishes here
    _delete(store, [f"{path}/{key}" for key in keys if key not in DOCUMENT_NAMES and key != TOMBSTONE])
    _delete(store, [f"{path}/{TOMBSTONE}"])
    store.forget_prefix(path)


def clean_leftovers(store: NodeHost, stale: float = STALE) -> int:
    """Finish what interrupted mounts left (see the module's docstring); returns how many
    leftovers were removed. One recursive LIST of the store, keeping only the marked prefixes."""
    staged: dict[str, float] = {}  # staging prefix -> newest modification time below it
    tombstones: dict[str, float] = {}  # deleted node -> when its tombstone was put
    for page in obstore.list(store.store, None, chunk_size=1000):
        for meta in page:
            parts, when = meta["path"].split("/"), meta["last_modified"].timestamp()
            for i, part in enumerate(parts):
                if part == TOMBSTONE and i == len(parts) - 1:
                    tombstones["/".join(parts[:i])] = when
                elif part.startswith(TEMP_PREFIX):
                    root = "/".join(parts[:i + 1])
                    staged[root] = max(staged.get(root, 0.0), when)
                    break
    now, removed = time.time(), 0
    for root in [r for r, when in staged.items() if now - when > stale]:
        abort_node(store, root)
        removed += 1
    for root in [r for r, when in tombstones.items() if now - when > stale]:
        keys = _keys(store, root)
        if not any(key in DOCUMENT_NAMES for key in keys):  # the node had vanished: finish the deletion
            _delete(store, [f"{root}/{key}" for key in keys if key != TOMBSTONE])
        _delete(store, [f"{root}/{TOMBSTONE}"])
        store.forget_prefix(root)
        removed += 1
    return removed


def move_node(store: NodeHost, src: str, dst: str) -> None:
    store.check_writable(dst)
    keys = _keys(store, src)
    if not keys:
        raise StoreError(f"cannot move {src!r}: no such node", errno.ENOENT)
    if _keys(store, dst):
        raise StoreError(f"cannot move {src!r} to {dst!r}: something is stored there already", errno.EEXIST)
    own = [key for key in keys if key in DOCUMENT_NAMES]  # the node's own documents, at its top
    _copy(store, {f"{src}/{key}": f"{dst}/{key}" for key in keys if key not in own})
    _put_documents(store, dst, {key: _fresh(store, f"{src}/{key}") for key in own})
    _delete(store, [f"{src}/{key}" for key in own])
    _delete(store, [f"{src}/{key}" for key in keys if key not in own])
    store.forget_prefix(src)
    store.forget_prefix(dst)


def _keys(store: NodeHost, prefix: str) -> list[str]:
    """Every key below `prefix` (relative to it), staged ones included."""
    try:
        return [meta["path"][len(prefix) + 1:] for page in obstore.list(store.store, f"{prefix}/", chunk_size=1000)
                for meta in page]
    except FileNotFoundError:
        return []
    except Exception as e:
        raise store.error("cannot list", prefix, e) from None


def _fresh(store: NodeHost, key: str) -> bytes:
    """A document as stored now, not as cached for metadata_ttl: another machine may have
    edited it since."""
    try:
        return bounded_get.body(key, obstore.get(store.store, key), bounded_get.DOCUMENT_LIMIT, store.error)
    except StoreError:
        raise
    except Exception as e:
        raise store.error("cannot read", key, e) from None


def _put_documents(store: NodeHost, path: str, documents: dict[str, bytes]) -> None:
    """Each document with If-None-Match: a name another writer took meanwhile is EEXIST."""
    for name, data in documents.items():
        key = f"{path}/{name}" if path else name
        try:
            store.put_object(key, data, "create")
        except Exception as e:
            if type(e).__name__ in ("AlreadyExistsError", "PreconditionError"):
                raise StoreError(f"cannot create {path!r}: another writer created it meanwhile", errno.EEXIST) from None
            raise store.error("cannot write", key, e) from None


def _copy(store: NodeHost, pairs: dict[str, str]) -> None:
    def copy(pair: tuple[str, str]) -> None:
        try:
            obstore.copy(store.store, pair[0], pair[1], overwrite=True)
        except Exception as e:
            raise store.error(f"cannot copy {pair[0]!r} to", pair[1], e) from None
    _run(copy, list(pairs.items()))


def _delete(store: NodeHost, keys: list[str]) -> None:
    def delete(key: str) -> None:
        try:
            store.delete_object(key)
        except FileNotFoundError:
            pass
        except Exception as e:
            raise store.error("cannot delete", key, e) from None
    _run(delete, keys)


def _run(fn: Callable[[T], None], items: list[T]) -> None:
    if len(items) <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(min(WORKERS, len(items)), thread_name_prefix="tree") as pool:
        list(pool.map(fn, items))
