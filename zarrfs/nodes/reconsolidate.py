"""Consolidated metadata kept true when the mount changes the hierarchy.

Where the root has consolidated metadata (v3: `consolidated_metadata` in the root's zarr.json;
v2: `.zmetadata`), every create, delete, move and attribute edit rewrites it in the same step,
right after the node's own documents: one atomic replacement of one document. Between the two
a reader sees the node's own documents, which win over the consolidated copy (consolidated.py).
The copy is edited as JSON, so members zarrfs does not know are kept as they are.
"""

import json
import logging
from collections.abc import Iterable

from zarrfs import names
from zarrfs.format.v3 import dump_document, load_document
from zarrfs.nodes.documents import ZARR_JSON, ZARRAY, ZMETADATA

log = logging.getLogger(__name__)


class Edit:
    """What changed, in store paths: nodes put (path -> {document name: bytes}) and removed
    (each with every node below it)."""

    def __init__(self, put: dict[str, dict[str, bytes]] | None = None, removed: Iterable[str] = ()) -> None:
        self.put: dict[str, dict[str, bytes]] = put or {}
        self.removed: tuple[str, ...] = tuple(removed)


def _below(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/") or not prefix


def _apply(entries: dict[str, dict], edit: Edit) -> dict[str, dict]:
    """entries: store path -> {document name: JSON value}."""
    for prefix in edit.removed:
        entries = {p: d for p, d in entries.items() if not _below(p, prefix)}
    for path, documents in edit.put.items():
        if names.text(path) is None:  # a JSON key is text: the node is listed from the store instead
            log.warning("%s: the name is not UTF-8, so the node is left out of the consolidated metadata "
                        "(JSON keys are text)", names.printable(path))
            continue
        entries[path] = {name: json.loads(raw) for name, raw in documents.items()}
    return entries


def _consolidated(zarr_format: int, root_documents: dict[str, bytes]) -> tuple[dict, dict, dict] | None:
    """(the document holding the consolidated copy, the member holding its metadata, its
    entries: store path -> {document name: JSON value}); None when the root has none."""
    if zarr_format == 3:
        raw = root_documents.get(ZARR_JSON)
        doc = load_document(raw, ZARR_JSON) if raw else {}
        member = doc.get("consolidated_metadata")
        if not isinstance(member, dict) or not isinstance(member.get("metadata"), dict):
            return None
        return doc, member, {p: {ZARR_JSON: d} for p, d in member["metadata"].items()}
    raw = root_documents.get(ZMETADATA)
    doc = load_document(raw, ZMETADATA) if raw is not None else {}
    if not isinstance(doc.get("metadata"), dict):
        return None
    entries: dict[str, dict] = {}
    for key, value in doc["metadata"].items():
        path, _, name = key.rpartition("/")
        entries.setdefault(path, {})[name] = value
    return doc, doc, entries


def rewritten(zarr_format: int, root_documents: dict[str, bytes], edit: Edit) -> tuple[str, bytes] | None:
    """(key, new bytes) of the document holding the consolidated metadata after `edit`, None
    when the root has none. `root_documents` are the root's documents as stored now (v3: its
    zarr.json, already holding any change to the root's own attributes)."""
    found = _consolidated(zarr_format, root_documents)
    if found is None:
        return None
    doc, member, entries = found
    ordered = sorted(_apply(entries, edit).items())
    if zarr_format == 3:
        member["metadata"] = {p: d[ZARR_JSON] for p, d in ordered if p}
        return ZARR_JSON, dump_document(doc)
    member["metadata"] = {(f"{p}/{n}" if p else n): v for p, docs in ordered for n, v in docs.items()}
    return ZMETADATA, dump_document(doc)


def entries_below(zarr_format: int, root_documents: dict[str, bytes], prefix: str) -> dict[str, dict[str, bytes]]:
    """The consolidated copy's documents of the node at `prefix` and every node below it."""
    found = _consolidated(zarr_format, root_documents)
    entries = found[2] if found is not None else {}
    return {p: {n: dump_document(v) for n, v in d.items()} for p, d in entries.items() if _below(p, prefix)}


def resized(zarr_format: int, root_documents: dict[str, bytes], path: str,
            shape: list[int]) -> tuple[str, bytes] | None:
    """(key, new bytes) of the document holding the consolidated metadata, its entry of the array
    at `path` with `shape` (every other member kept), as zarr-python's resize followed by
    consolidate_metadata leaves it; None when the root has no consolidated copy, the copy lists
    no array at `path`, or its entry holds `shape` already."""
    found = _consolidated(zarr_format, root_documents)
    if found is None or not path:
        return None
    doc, member, _ = found
    entry = member["metadata"].get(path if zarr_format == 3 else f"{path}/{ZARRAY}")
    if not isinstance(entry, dict) or entry.get("shape") == shape:
        return None
    entry["shape"] = list(shape)
    return (ZARR_JSON if zarr_format == 3 else ZMETADATA), dump_document(doc)
