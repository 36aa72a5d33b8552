"""Consolidated metadata: every node's documents in one place, read once.

    v2: ROOT/.zmetadata   {"metadata": {"a/.zarray": {...}, "a/.zattrs": {...}, ...}}
    v3: the `consolidated_metadata` member of ROOT/zarr.json, {"metadata": {"a": {...}, ...}}

With it, opening and listing need no read per node, and a store that cannot list (plain HTTP)
still shows its tree. It is a cache that can be stale: the hierarchy checks a node's own
documents when the node is opened, and they win where both exist. Only the root's copy
is used (zarr-python flattens the whole tree into it).

It needs nothing of the store but the root's documents, so any store can serve it. An entry
whose key is no node path below the root (empty, '.', '..', or no Unicode text: a lone
surrogate escape such as \\uDCFF) is left out with a warning naming it; the other entries
still serve.
"""

import json
import logging
from dataclasses import dataclass

from zarrfs.errors import MetadataError
from zarrfs.format.v3 import dump_document, load_document
from zarrfs.names import text as name_text
from zarrfs.nodes.documents import ZARR_JSON, ZARRAY, ZATTRS, ZGROUP, ZMETADATA, Documents, Version

log = logging.getLogger(__name__)

CONSOLIDATED: Version = ("consolidated",)  # the version of a node read from consolidated metadata


@dataclass(frozen=True)
class Consolidated:
    source: str  # the key it came from
    entries: dict[str, Documents]  # store path -> the node's documents as the copy has them
    children: dict[str, list[str]]  # store path of a group -> names of the child nodes it lists


def load(root: Documents) -> Consolidated | None:
    """The root's consolidated metadata, None when it has none; MetadataError naming the key when
    it is malformed as a whole."""
    if root.zarr_format == 3:
        raw = root.documents.get(ZARR_JSON)
        if raw is None:
            return None
        member = load_document(raw, ZARR_JSON).get("consolidated_metadata")
        if not isinstance(member, dict):
            return None
        return _build(ZARR_JSON, _v3_entries(member.get("metadata"), root))
    raw = root.documents.get(ZMETADATA)
    if raw is None:
        return None
    return _build(ZMETADATA, _v2_entries(load_document(raw, ZMETADATA).get("metadata"), root))


def _v3_entries(metadata: object, root: Documents) -> dict[str, Documents]:
    where = f"{ZARR_JSON}: consolidated_metadata.metadata"
    if not isinstance(metadata, dict):
        raise MetadataError(f"{where} must be an object")
    entries = {}
    for name, doc in metadata.items():
        path = _path(name, where)
        if path is None:
            continue
        if not isinstance(doc, dict):
            log.warning("%s[%r] must be an object: the entry is left out", where, name)
            continue
        entries[path] = Documents(3, None, {ZARR_JSON: dump_document(doc)}, CONSOLIDATED, root.stat)
    return entries


def _v2_entries(metadata: object, root: Documents) -> dict[str, Documents]:
    where = f"{ZMETADATA}: metadata"
    if not isinstance(metadata, dict):
        raise MetadataError(f"{where} must be an object")
    documents: dict[str, dict[str, bytes]] = {}
    for key, doc in metadata.items():
        path, _, name = key.rpartition("/")
        if name in (ZARRAY, ZGROUP, ZATTRS):
            path = _path(path, where, key) if path else ""
            if path is not None:
                documents.setdefault(path, {})[name] = dump_document(doc)
    entries = {}
    for path, docs in documents.items():
        main = ZARRAY if ZARRAY in docs else ZGROUP if ZGROUP in docs else None
        if main is None or not path:  # attributes alone are no node; the root is read from its own files
            continue
        ordered = {main: docs[main], **({ZATTRS: docs[ZATTRS]} if ZATTRS in docs else {})}
        entries[path] = Documents(2, "array" if main == ZARRAY else "group", ordered, CONSOLIDATED, root.stat)
    return entries


def _build(source: str, entries: dict[str, Documents]) -> Consolidated:
    children: dict[str, list[str]] = {}
    for path in entries:
        parent, _, name = path.rpartition("/")
        children.setdefault(parent, []).append(name)
    return Consolidated(source, entries, children)


def _path(name: object, where: str, key: str | None = None) -> str | None:
    """A store path from a consolidated key: relative, '/'-separated, no '.' or '..'. None, with
    a warning naming the key, for any other: that entry alone is left out."""
    if not isinstance(name, str) or not _is_node_path(name):
        log.warning("%s: %r is not a node path below the root: the entry is left out", where,
                    name if key is None else key)
        return None
    return "/".join(name.strip("/").split("/"))


def _is_node_path(name: str) -> bool:
    parts = name.strip("/").split("/")
    return all(p not in ("", ".", "..") for p in parts) and name_text(name) is not None  # \uDCxx: no text


def same_documents(a: Documents, b: Documents) -> bool:
    """The two hold the same JSON (the consolidated copy is re-serialised, so bytes differ)."""
    names = {*a.documents, *b.documents} - {ZMETADATA}
    try:  # a .zattrs that is missing holds no attributes, as one that holds {}
        return all(_json(a, name) == _json(b, name) for name in names)
    except ValueError:
        return False


def _json(docs: Documents, name: str) -> object:
    raw = docs.documents.get(name)
    return ({} if name == ZATTRS else None) if raw is None else json.loads(raw)
