"""Hierarchy editing over any store: make, delete and move nodes, and replace attributes.

Each operation is one call of the store's node interface (begin_node/commit_node, delete_node,
move_node) or one atomic document replacement (`set`); where the root has consolidated
metadata, it is rewritten around that call (reconsolidate.py) so that a reader of either the
nodes' own documents or the consolidated copy sees each node whole or not at all, whenever the
daemon stops:

    create, attributes   the node's own documents first, then the consolidated copy
    delete               the consolidated entry first, then the node
    move                 the consolidated entries removed, the node moved, the entries added at
                         the new path

Between two steps the consolidated copy may lack a node that exists; an intent record (a
temporary key naming the paths) says which, and the next mount puts them back from their own
documents (recover). Nothing here knows where bytes live. Edits are serialized: consolidated
metadata is a read-modify-write of one document.
"""

import errno
import json
import logging
import threading
from contextlib import contextmanager

from zarrfs.edits import new_nodes as newnode
from zarrfs.errors import StoreError, ZarrfsError
from zarrfs.names import from_json, to_json
from zarrfs.nodes import documents as nodes
from zarrfs.nodes import reconsolidate
from zarrfs.nodes.reconsolidate import Edit
from zarrfs.stores.local import TEMP_PREFIX

log = logging.getLogger(__name__)

INTENT = f"{TEMP_PREFIX}intent.json"  # at the root: the paths whose consolidated entries an edit changes


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
        return self.store.begin_node(path)

    def commit(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        """Publish a node staged with begin_node (its chunks written below `staging`)."""
        with self.lock, self._intent([path]):
            forgotten = self.hierarchy.hidden.forget(path)  # a node there before hid them; before the new one shows
            try:
                self.store.commit_node(staging, path, documents)
            except BaseException:
                self.hierarchy.hidden.restore(forgotten)  # refused: the node there keeps its files hidden
                self.store.abort_node(staging)
                raise
            self._reconsolidate(Edit(put={path: documents}))
            self.hierarchy.changed(path)
        log.info("created %s", path)

    def delete(self, path: str) -> None:
        with self.lock, self._intent([path]):
            self._reconsolidate(Edit(removed=[path]))
            self.store.delete_node(path)
            self.hierarchy.changed(path)
        log.info("deleted %s", path)

    def move(self, src: str, dst: str) -> None:
        with self.lock, self._intent([src, dst]):
            moved = self._consolidated_below(src)
            self._reconsolidate(Edit(removed=[src]))
            forgotten = self.hierarchy.hidden.forget(dst)  # a node there before hid them; before the moved one shows
            try:
                self.store.move_node(src, dst)
            except BaseException:
                self.hierarchy.hidden.restore(forgotten)  # refused: the node there keeps its files hidden
                raise
            self._reconsolidate(Edit(put={dst + p[len(src):]: docs for p, docs in moved.items()}))
            self.hierarchy.changed(src, dst)
        log.info("moved %s to %s", src, dst)

    def edit_attributes(self, path: str, change) -> None:
        """Replace the node's attributes with change(its attributes as stored now): one atomic
        replacement of one document (v3 zarr.json, v2 .zattrs), every other member kept."""
        with self.lock, self._intent([path]):
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

    @contextmanager
    def _intent(self, paths: list[str]):
        """Around an edit of a hierarchy with consolidated metadata: a record of the paths it
        changes, removed when the edit is done. A failed edit puts their entries back at once."""
        if self.hierarchy.consolidated is None:
            yield
            return
        self.store.set(INTENT, json.dumps({"paths": [to_json(p) for p in paths]}).encode())
        try:
            yield
        except BaseException:
            try:
                self._repair(paths)
            except ZarrfsError as e:  # the record stays: the next mount repairs them (recover)
                log.warning("consolidated metadata of %s left for the next mount to repair: %s",
                            ", ".join(p or "/" for p in paths), e)
            else:
                self.store.delete(INTENT)
            raise  # the edit's own error, not the repair's
        self.store.delete(INTENT)

    def recover(self) -> None:
        """At mount: an edit was interrupted; its paths' consolidated entries are made again from
        their own documents."""
        raw = self.store.get(INTENT)
        if raw is None:
            return
        try:
            paths = [from_json(p) for p in json.loads(raw)["paths"]]
        except (ValueError, KeyError, TypeError):
            paths = [""]  # unreadable: the whole tree
        if self.hierarchy.consolidated is not None:
            self._repair(paths)
            log.warning("consolidated metadata of %s made again from the nodes' own documents after an "
                        "interrupted edit", ", ".join(p or "/" for p in paths))
        self.store.delete(INTENT)

    def _repair(self, paths: list[str]) -> None:
        found = {}
        for prefix in paths:
            for relative, _ in self.store.files(prefix):
                parent, _, name = relative.rpartition("/")
                path = nodes.key_of(prefix, parent) if parent else prefix
                if name in (nodes.ZARR_JSON, nodes.ZARRAY, nodes.ZGROUP) and path not in found:
                    docs = nodes.read_documents(self.store, path)
                    if docs is not None:
                        found[path] = {n: d for n, d in docs.documents.items() if n != nodes.ZMETADATA}
        self._reconsolidate(Edit(removed=paths, put=found))
        self.hierarchy.changed(*paths)

    def _consolidated_below(self, path: str) -> dict[str, dict[str, bytes]]:
        if self.hierarchy.consolidated is None:
            return {}
        root = nodes.read_documents(self.store, "")
        return reconsolidate.entries_below(root.zarr_format, root.documents, path)

    def _reconsolidate(self, edit: Edit) -> None:
        if self.hierarchy.consolidated is None:
            return
        with self.hierarchy.copy.lock:  # a growth's rewrite of the copy waits (engine/consolidated_copy.py)
            root = nodes.read_documents(self.store, "")
            found = reconsolidate.rewritten(root.zarr_format, root.documents, edit)
            if found is not None:
                self.store.set(*found)
        self.hierarchy.reload_root()
