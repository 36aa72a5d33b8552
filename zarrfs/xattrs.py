"""Read-only extended attributes: what an array is, for `getfattr`, GIO and scripts.

    user.zarr.shape, user.zarr.dtype, user.zarr.dimension_names, user.zarr.chunk_shape,
    user.zarr.codecs, user.zarr.attributes   JSON, on every file of an array
    user.zarr.attributes                      JSON, on a group's directory and documents
    user.mime_type                            on every file (the freedesktop.org attribute)

Values are made from the parsed metadata alone, as the sidecar is.
"""

import json

from .hierarchy import DATA, DIR, DOCUMENT, HEADER, PREVIEW, SIDECAR, TEXT, Entry
from .metadata import ArrayMetadata

OCTETS, JSON, TEXT_PLAIN = "application/octet-stream", "application/json", "text/plain"
HEADER_TYPES = {"envi": TEXT_PLAIN, "mhd": TEXT_PLAIN, "nrrd": TEXT_PLAIN, "vrt": "application/xml",
                "nifti": OCTETS}  # by view; any other header is bytes to a guesser


def _json(value) -> bytes:
    return json.dumps(value, separators=(", ", ": ")).encode()


def mime_type(entry: Entry) -> str | None:
    if entry.kind == DATA:
        return OCTETS
    if entry.kind in (SIDECAR, DOCUMENT):
        return JSON
    if entry.kind == TEXT:
        return TEXT_PLAIN
    if entry.kind == PREVIEW:
        return "image/png"
    if entry.kind == HEADER:
        return HEADER_TYPES.get(entry.view, OCTETS)
    return None  # a directory: file managers know it already


def extended_attributes(entry: Entry) -> dict[str, bytes]:
    """Name -> value of every attribute of the entry."""
    found = {}
    meta = entry.node.meta
    if isinstance(meta, ArrayMetadata) and entry.kind != DIR:
        names = meta.dimension_names
        if names is None and isinstance(meta.attributes.get("_ARRAY_DIMENSIONS"), list):
            names = meta.attributes["_ARRAY_DIMENSIONS"]
        found = {
            "user.zarr.shape": _json(list(meta.shape)),
            "user.zarr.dtype": _json(None if meta.data_type.numpy.kind == "O" else meta.data_type.array_interface),
            "user.zarr.dimension_names": _json(None if names is None else list(names)),
            "user.zarr.chunk_shape": _json(list(meta.chunk_shape)),
            "user.zarr.codecs": _json(list(meta.codecs)),
            "user.zarr.attributes": _json(meta.attributes),
        }
    elif meta is not None:
        found = {"user.zarr.attributes": _json(meta.attributes)}
    mime = mime_type(entry)
    if mime is not None:
        found["user.mime_type"] = mime.encode()
    return found
