"""Which documents make a node, in either Zarr format, and reading them from any Store.

    v3: PATH/zarr.json                        (array or group)
    v2: PATH/.zarray or PATH/.zgroup, with PATH/.zattrs for attributes

A directory with both a zarr.json and v2 documents is read as v3, as zarr-python does.
"""

import os
from dataclasses import dataclass
from typing import Protocol

from zarrfs.errors import MetadataError
from zarrfs.format.v3 import ArrayMetadata, GroupMetadata, load_document, parse_object
from zarrfs.nodes import v2 as metadata_v2

ZARR_JSON, ZARRAY, ZGROUP, ZATTRS = "zarr.json", ".zarray", ".zgroup", ".zattrs"
ZMETADATA = ".zmetadata"  # v2 consolidated metadata, read at the root
DOCUMENT_NAMES = {ZARR_JSON, ZARRAY, ZGROUP, ZATTRS, ZMETADATA}  # files of a node, never nodes
MAIN_DOCUMENTS = ((ZARR_JSON, 3, None), (ZARRAY, 2, "array"), (ZGROUP, 2, "group"))


class DocumentStore(Protocol):
    """What reading a node's documents needs of a store: the part of stores.contract.Store this
    package uses (it sits below the stores, so it names the part rather than importing it)."""

    def get(self, key: str) -> bytes | None: ...

    def stat(self, key: str) -> os.stat_result | None: ...


Found = tuple[str, int, str | None, os.stat_result]  # (name, zarr_format, kind, stat) of a main document
# (mtime, size) of each document (None: a v2 node without .zattrs), or consolidated.CONSOLIDATED
Version = tuple[tuple[int, int] | None, ...] | tuple[str]


def key_of(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


@dataclass(frozen=True)
class Documents:
    """A node's documents as stored: the main one first, then .zattrs if a v2 node has one (and
    .zmetadata, at a v2 root)."""

    zarr_format: int
    kind: str | None  # "array" or "group" when the document's name says so (v2)
    documents: dict[str, bytes]
    version: Version  # the node changed when this does
    stat: os.stat_result  # of the main document

    @property
    def main(self) -> str:
        return next(iter(self.documents))


def locate(store: DocumentStore, path: str) -> Found | None:
    """(name, zarr_format, kind, stat) of the node's main document, None if there is none."""
    for name, zarr_format, kind in MAIN_DOCUMENTS:
        st = store.stat(key_of(path, name))
        if st is not None:
            return name, zarr_format, kind, st
    return None


def version_of(store: DocumentStore, path: str, found: Found) -> Version:
    name, zarr_format, _, st = found
    version: tuple[tuple[int, int] | None, ...] = ((st.st_mtime_ns, st.st_size),)
    if zarr_format == 2:
        attrs = store.stat(key_of(path, ZATTRS))
        version += (None if attrs is None else (attrs.st_mtime_ns, attrs.st_size),)
    return version


def read_documents(store: DocumentStore, path: str, found: Found | None = None) -> Documents | None:
    found = found or locate(store, path)
    if found is None:
        return None
    name, zarr_format, kind, st = found
    version = version_of(store, path, found)
    documents = {name: store.get(key_of(path, name)) or b""}
    extra = (ZATTRS, ZMETADATA) if zarr_format == 2 and not path else (ZATTRS,) if zarr_format == 2 else ()
    for name in extra:
        value = store.get(key_of(path, name))
        if value is not None:
            documents[name] = value
    return Documents(zarr_format, kind, documents, version, st)


def parse(path: str, docs: Documents) -> ArrayMetadata | GroupMetadata:
    """The node's metadata; errors name the document and the field."""
    where = key_of(path, docs.main)
    if docs.zarr_format == 3:
        return parse_object(load_document(docs.documents[ZARR_JSON], where), where)
    attributes = metadata_v2.parse_attributes(docs.documents.get(ZATTRS), key_of(path, ZATTRS))
    return parse_v2(load_document(docs.documents[docs.main], where), attributes, docs.kind, where)


def parse_v2(doc: dict, attributes: object, kind: str | None, where: str) -> ArrayMetadata | GroupMetadata:
    if not isinstance(attributes, dict):
        raise MetadataError(f"{where}: .zattrs must be a JSON object")
    if kind == "group":
        return metadata_v2.parse_group(doc, attributes, where)
    return metadata_v2.parse_array(doc, attributes, where)


def read_metadata(store: DocumentStore, path: str) -> ArrayMetadata | GroupMetadata | None:
    """The parsed metadata of the node at `path`, None if there is none."""
    docs = read_documents(store, path)
    return None if docs is None else parse(path, docs)
