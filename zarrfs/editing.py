"""Hierarchy editing over any store: make, delete and move nodes, and replace attributes.

Each operation is one call of the store's node interface (begin_node/commit_node, delete_node,
move_node) or one atomic document replacement (`set`), then the consolidated metadata, where the
root has it, rewritten in the same step (reconsolidate.py), then the hierarchy told what
changed. Nothing here knows where bytes live. Edits are serialized: consolidated metadata is a
read-modify-write of one document.
"""

import errno
import logging
import threading

from . import newnode, nodes, reconsolidate
from .errors import RefusedError, StoreError
from .reconsolidate import Edit

log = logging.getLogger(__name__)


class Editor:
    def __init__(self, store, hierarchy):
        self.store = store
        self.hierarchy = hierarchy
        self.lock = threading.RLock()

    @property
    def zarr_format(self) -> int:
        """Nodes are made in the root's format: v2 inside a v2 hierarchy."""
        return self.hierarchy.node("").zarr_format

    def make_group(self, path: str) -> None:
        self.make(path, newnode.group_documents(self.zarr_format))

    def make(self, path: str, documents: dict[str, bytes]) -> None:
        """A new node with these documents and nothing else (an empty array, a group)."""
        staging = self.begin(path)
        self.commit(staging, path, documents)

    def begin(self, path: str) -> str:
        """Where a new node's chunks are written before commit (store.begin_node)."""
        self._supported("begin_node")
        return self.store.begin_node(path)

    def _supported(self, method: str) -> None:
        if not hasattr(self.store, method):
            raise RefusedError(f"this store cannot create, delete or move nodes yet ({type(self.store).__name__})",
                               errno.EOPNOTSUPP)

    def commit(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        """Publish a node staged with begin_node (its chunks written below `staging`)."""
        with self.lock:
            try:
                self.store.commit_node(staging, path, documents)
            except BaseException:
                self.store.abort_node(staging)
                raise
            self._reconsolidate(Edit(put={path: documents}))
            self.hierarchy.changed(path)
        log.info("created %s", path)

    def delete(self, path: str) -> None:
        self._supported("delete_node")
        with self.lock:
            self.store.delete_node(path)
            self._reconsolidate(Edit(removed=[path]))
            self.hierarchy.changed(path)
        log.info("deleted %s", path)

    def move(self, src: str, dst: str) -> None:
        self._supported("move_node")
        with self.lock:
            self.store.move_node(src, dst)
            self._reconsolidate(Edit(moved=[(src, dst)]))
            self.hierarchy.changed(src, dst)
        log.info("moved %s to %s", src, dst)

    def edit_attributes(self, path: str, change) -> None:
        """Replace the node's attributes with change(its attributes as stored now): one atomic
        replacement of one document (v3 zarr.json, v2 .zattrs), every other member kept."""
        with self.lock:
            docs = nodes.read_documents(self.store, path)
            if docs is None:
                raise StoreError(f"{path or '/'}: the node is gone", errno.ENOENT)
            attributes = change(newnode.attributes_of(docs.documents, docs.zarr_format))
            changed = newnode.with_attributes(docs.documents, docs.zarr_format, attributes)
            for name, data in changed.items():
                self.store.set(nodes.key_of(path, name), data)
            documents = {**docs.documents, **changed}
            documents.pop(nodes.ZMETADATA, None)
            if path or docs.zarr_format == 2:  # a v3 root holds its consolidated copy itself
                self._reconsolidate(Edit(put={path: documents}))
            self.hierarchy.changed(path)
        log.info("attributes of %s replaced", path or "/")

    def _reconsolidate(self, edit: Edit) -> None:
        if self.hierarchy.consolidated is None:
            return
        root = nodes.read_documents(self.store, "")
        found = reconsolidate.rewritten(root.zarr_format, root.documents, edit)
        if found is not None:
            self.store.set(*found)
        self.hierarchy.reload_root()
