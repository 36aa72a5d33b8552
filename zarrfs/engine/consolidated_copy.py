"""The consolidated copy of a growing array's shape, kept after the array's own document.

xarray writes consolidated metadata by default (v2: ROOT/.zmetadata; v3: the root zarr.json's
`consolidated_metadata`), and zarr.open_consolidated reads an array's shape from that copy
alone. So a growth or a truncate (growth.py), once its chunks and the array's own document are
stored (writeback.py), rewrites the array's entry there too, as zarr-python's resize followed by
consolidate_metadata leaves it: only `shape` changes. The order makes the copy safe to read at
any moment: it never shows a shape longer than the chunks stored for it (growing: chunks, own
document, copy; shrinking: own document, copy, then the chunks past the end are deleted).
Between two steps a reader of the copy sees the old shape.

The shape written is the one the array's own document holds when the copy is rewritten, read
after the copy: a write of the copy never puts back a shape another writer has replaced. On an
object store the write is conditional on the version of the root document read (another mount
rewriting the copy meanwhile makes it read and write again); on a local store the write is
conditional on the bytes of the root document read, and other zarrfs processes' rewrites wait
for this one (stores/local.py). A store with neither (Icechunk's session: one writer) has the
copy staged, the root read again and compared, and the copy renamed over it only if they agree.
"""

import threading

from zarrfs.errors import ConflictError, MetadataError, StoreError
from zarrfs.format.v3 import load_document
from zarrfs.nodes import consolidated, reconsolidate
from zarrfs.nodes.documents import ZARR_JSON, ZMETADATA, read_documents
from zarrfs.stores import bounded_get
from zarrfs.stores.contract import Store

ATTEMPTS = 5  # rewrites of the copy against other writers that keep rewriting it

# store root -> the lock of this process's rewrites of its copy: every array of a hierarchy (and
# every open_raw view of it) rewrites the one document, and a local store's lock of it holds
# other processes off, not this one's threads (stores/directory_locks.py)
_locks: dict[str, threading.RLock] = {}
_locks_lock = threading.Lock()


def _lock_of(root: str) -> threading.RLock:
    with _locks_lock:
        return _locks.setdefault(root, threading.RLock())


class ConsolidatedCopy:
    """The root's consolidated metadata of one store, rewritten one array entry at a time.
    `lock` serialises this process's rewrites of the copy (hierarchy edits take it too: each is
    a read-modify-write of one document)."""

    def __init__(self, store: Store, zarr_format: int):
        self.store = store
        self.zarr_format = zarr_format
        self.key = ZARR_JSON if zarr_format == 3 else ZMETADATA  # at the root
        self.lock = _lock_of(store.root)

    def follow(self, path: str, document_key: str) -> None:
        """The entry of the array at store path `path` takes the shape its own document
        (`document_key`) holds now. StoreError naming the copy's key when it cannot be written."""
        with self.lock:
            for _ in range(ATTEMPTS):
                try:
                    return self._rewrite(path, document_key)
                except ConflictError:
                    continue  # another writer rewrote the copy since it was read: read it again
                except StoreError as e:
                    raise StoreError(f"{self.key}: the consolidated metadata keeps the old shape of {path}: {e}",
                                     e.errno) from None
            raise StoreError(f"{self.key}: the consolidated metadata keeps the old shape of {path}: other "
                             f"writers rewrote it {ATTEMPTS} times while this mount did")

    def _rewrite(self, path: str, document_key: str) -> None:
        """One read-modify-write of the copy (ConflictError: another writer's came between),
        the root held meanwhile where the store holds documents (Store.exclusive: another zarrfs
        process's rewrite then waits, and a read of the root by this one meanwhile cannot move
        the version the write is conditional on past theirs)."""
        with self.store.exclusive(self.key):
            self._read_modify_write(path, document_key)

    def _read_modify_write(self, path: str, document_key: str) -> None:
        root = self.store.get_versioned(self.key, limit=bounded_get.DOCUMENT_LIMIT)[0]  # its version: the condition
        own = self.store.get(document_key, limit=bounded_get.DOCUMENT_LIMIT)
        if root is None or own is None:
            return  # no copy (or no array) any more: nothing shows a stale shape
        try:
            shape = load_document(bytes(own), document_key).get("shape")
            if not isinstance(shape, list):  # the array's own reading of it says what is wrong
                return
            found = reconsolidate.resized(self.zarr_format, {self.key: bytes(root)}, path, shape)
        except MetadataError as e:
            raise StoreError(str(e)) from None
        if found is not None:
            self._write(*found, read=bytes(root))

    def _write(self, key: str, data: bytes, read: bytes) -> None:
        """Replace the copy, which was `read`: conditionally where the store writes documents so
        (ConflictError), elsewhere only if it still holds `read` once the new one is staged."""
        if self.store.capabilities.conditional_documents:
            return self.store.set(key, data)
        staged = [self.store.stage(key, data)]
        try:
            if self.store.get(key, limit=bounded_get.DOCUMENT_LIMIT) != read:
                raise ConflictError(f"{key}: rewritten by another writer meanwhile", keys=(key,))
        except StoreError:
            self.store.discard(staged)
            raise
        self.store.publish(staged)


def copy_of(store: Store) -> ConsolidatedCopy | None:
    """The consolidated copy of the hierarchy in `store`, None where its root has none (or one
    too malformed to use: a mount reads every node from its own documents then)."""
    try:
        root = read_documents(store, "")
        if root is None or consolidated.load(root) is None:
            return None
    except MetadataError:
        return None
    return ConsolidatedCopy(store, root.zarr_format)
