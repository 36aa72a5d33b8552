"""The documents of nodes made through the mount, and the checks that come first.

A new array takes zarr-python-like defaults: zstd (level 0) after the bytes codec, fill value 0,
and chunks of about 1 MiB laid out along the last axes (the trailing axes whole while they fit,
the next one split to fill the rest). Inside a Zarr v2 hierarchy nodes are made in v2
(`.zgroup`, `.zarray` with the numcodecs zstd compressor, `.zattrs`), as zarr-python would.

A sidecar written to make an array needs `shape` and `dtype` (or `data_type`); it may give
`chunk_shape`, `inner_chunk_shape` (sharding), `codecs`, `fill_value`, `dimension_names` and
`attributes`. Members a sidecar shows that follow from these (itemsize, nbytes, ...) may stay,
so a copy of another array's sidecar makes an array like it. Every error names the field.
"""

import json
import math

import numpy as np

from zarrfs.errors import InvalidValueError, ZarrfsError
from zarrfs.format.data_types import _NUMERIC
from zarrfs.format.v3 import ArrayMetadata, GroupMetadata, dump_document, load_document
from zarrfs.fs.hierarchy import check_codecs
from zarrfs.nodes import documents as nodes

CHUNK_BYTES = 1 << 20
ZSTD_V3 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
BYTES_V3 = {"name": "bytes", "configuration": {"endian": "little"}}
ZSTD_V2 = {"id": "zstd", "level": 0}
OPTIONAL = {"chunk_shape", "inner_chunk_shape", "codecs", "fill_value", "dimension_names", "attributes"}
DERIVED = {"itemsize", "nbytes", "order", "byte_order", "data_file", "views", "zarr_format", "datetime_unit",
           "chunk_grid", "chunk_shapes"}
DTYPES = {np.dtype(v).str: k for k, v in _NUMERIC.items()}  # "<f8" -> "float64"


class InvalidNodeError(InvalidValueError):
    """A node that cannot be made as asked: nothing is created, and close() fails with EINVAL."""


def check_name(name: str) -> None:
    """The Zarr node-name rules."""
    if not name or name in (".", "..") or "/" in name or name.startswith("__"):
        raise InvalidNodeError(f"{name!r} is not a Zarr node name (not empty, '.', '..', no '/', no leading '__')")
    if name in nodes.DOCUMENT_NAMES:
        raise InvalidNodeError(f"{name!r} is the name of a metadata document")


def group_documents(zarr_format: int) -> dict[str, bytes]:
    if zarr_format == 2:
        return {nodes.ZGROUP: dump_document({"zarr_format": 2})}
    return {nodes.ZARR_JSON: dump_document({"zarr_format": 3, "node_type": "group", "attributes": {}})}


def default_chunks(shape: tuple[int, ...], itemsize: int, target: int = CHUNK_BYTES) -> list[int]:
    """About `target` bytes per chunk, along the last axes first."""
    chunks = [1] * len(shape)
    room = max(1, target // max(1, itemsize))
    for axis in reversed(range(len(shape))):
        n = max(1, shape[axis])
        chunks[axis] = min(n, room)
        room //= chunks[axis]
        if room <= 1:
            break
    return chunks


def npy_documents(dtype: np.dtype, shape: tuple[int, ...], fortran: bool, zarr_format: int) -> dict[str, bytes]:
    """An array for the data of an .npy file with this header."""
    if fortran:
        raise InvalidNodeError("fortran_order: only C-order .npy files can be copied in")
    return array_documents({"shape": list(shape), "dtype": dtype.str}, zarr_format, ".npy header")


def sidecar_documents(raw: bytes, zarr_format: int, where: str) -> dict[str, bytes]:
    """An empty array (all fill value) as a written sidecar describes it."""
    return array_documents(parsed_object(raw, where), zarr_format, where)


def array_documents(spec: dict, zarr_format: int, where: str) -> dict[str, bytes]:
    unknown = set(spec) - OPTIONAL - DERIVED - {"shape", "dtype", "data_type"}
    if unknown:
        raise InvalidNodeError(f"{where}: unknown member {sorted(unknown)[0]!r}")
    if "shape" not in spec:
        raise InvalidNodeError(f"{where}: shape is missing")
    shape = _ints(spec["shape"], f"{where}: shape", 0)
    name, dtype = _data_type(spec, where)
    chunks = _ints(spec.get("chunk_shape") or default_chunks(shape, dtype.itemsize), f"{where}: chunk_shape", 1)
    if len(chunks) != len(shape):
        raise InvalidNodeError(f"{where}: chunk_shape has {len(chunks)} dimensions, shape has {len(shape)}")
    attributes = spec.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise InvalidNodeError(f"{where}: attributes must be an object")
    if zarr_format == 2:
        documents = _v2(spec, shape, dtype, chunks, attributes, where)
    else:
        documents = _v3(spec, shape, name, chunks, attributes, where)
    check(documents, where)
    return documents


def _v3(spec, shape, name, chunks, attributes, where) -> dict[str, bytes]:
    codecs = spec.get("codecs")
    inner = spec.get("inner_chunk_shape")
    if codecs is None:
        codecs = [BYTES_V3, ZSTD_V3]
        if inner is not None:
            inner = _ints(inner, f"{where}: inner_chunk_shape", 1)
            codecs = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": list(inner), "codecs": codecs, "index_location": "end",
                "index_codecs": [BYTES_V3, {"name": "crc32c"}]}}]
    elif not isinstance(codecs, list):
        raise InvalidNodeError(f"{where}: codecs must be a list")
    elif inner is not None and _inner_of(codecs) != inner:
        raise InvalidNodeError(f"{where}: inner_chunk_shape {inner!r} differs from the sharding codec's chunk_shape")
    fill = spec.get("fill_value")
    doc = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": name,
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": _default_fill(name) if fill is None else fill, "codecs": codecs,
           "attributes": attributes}
    if spec.get("dimension_names") is not None:
        doc["dimension_names"] = spec["dimension_names"]
    return {nodes.ZARR_JSON: dump_document(doc)}


def _v2(spec, shape, dtype, chunks, attributes, where) -> dict[str, bytes]:
    for member in ("codecs", "inner_chunk_shape"):
        if spec.get(member) is not None:
            raise InvalidNodeError(f"{where}: {member}: arrays in a Zarr v2 hierarchy are made with the zstd "
                                   f"compressor and no sharding; leave {member} out")
    names = spec.get("dimension_names")
    if names is not None:
        attributes = {**attributes, "_ARRAY_DIMENSIONS": names}
    fill = spec.get("fill_value")
    doc = {"zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": dtype.str,
           "compressor": ZSTD_V2, "fill_value": 0 if fill is None else fill, "order": "C", "filters": None,
           "dimension_separator": "."}
    return {nodes.ZARRAY: dump_document(doc), nodes.ZATTRS: dump_document(attributes)}


def check(documents: dict[str, bytes], where: str) -> ArrayMetadata:
    """Parse the documents as the mount would read them, codecs included."""

    main = nodes.ZARR_JSON if nodes.ZARR_JSON in documents else nodes.ZARRAY
    docs = nodes.Documents(3 if main == nodes.ZARR_JSON else 2, None if main == nodes.ZARR_JSON else "array",
                           documents, (), None)
    try:
        meta = nodes.parse("", docs)
        check_codecs(meta, where)
    except ZarrfsError as e:
        raise InvalidNodeError(f"{where}: {str(e).removeprefix(main + ': ')}") from None
    if meta.data_type.numpy.kind == "O":
        raise InvalidNodeError(f"{where}: dtype: variable-length types cannot be made through the mount")
    return meta


def edited_attributes(meta: ArrayMetadata | GroupMetadata, current: bytes, raw: bytes, where: str) -> dict:
    """The attributes of a written sidecar (or group document), whose every other member must
    be as `current` shows it."""
    old, new = load_document(current, where), parsed_object(raw, where)
    for member in sorted(set(old) | set(new)):
        if member != "attributes" and old.get(member) != new.get(member):
            raise InvalidNodeError(f"{where}: {member}: only attributes can be changed (was "
                                   f"{json.dumps(old.get(member))}, written {json.dumps(new.get(member))})")
    attributes = new.get("attributes", {})
    if not isinstance(attributes, dict):
        raise InvalidNodeError(f"{where}: attributes must be an object")
    return attributes


def with_attributes(documents: dict[str, bytes], zarr_format: int, attributes: dict) -> dict[str, bytes]:
    """The node's documents to store for new attributes: v3 rewrites zarr.json (every other
    member kept as stored), v2 replaces .zattrs."""
    if zarr_format == 2:
        return {nodes.ZATTRS: dump_document(attributes)}
    doc = json.loads(documents[nodes.ZARR_JSON])
    doc["attributes"] = attributes
    return {nodes.ZARR_JSON: dump_document(doc)}


def attributes_of(documents: dict[str, bytes], zarr_format: int) -> dict:
    """The attributes as stored (v3: zarr.json's member; v2: .zattrs, {} when missing)."""
    if zarr_format == 2:
        raw = documents.get(nodes.ZATTRS)
        return {} if raw is None else load_document(raw, nodes.ZATTRS)
    return dict(json.loads(documents[nodes.ZARR_JSON]).get("attributes") or {})


def parsed_object(raw: bytes, where: str) -> dict:
    """The JSON object `raw` holds; InvalidNodeError naming `where` when it holds none."""
    try:
        return load_document(raw, where)
    except ZarrfsError as e:
        raise InvalidNodeError(str(e)) from None


def _ints(value, where: str, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                                              for v in value):
        raise InvalidNodeError(f"{where} must be a list of integers >= {minimum}, not {value!r}")
    if math.prod(value) > 2**62:
        raise InvalidNodeError(f"{where}: {value!r} has too many elements")
    return tuple(value)


def _data_type(spec: dict, where: str) -> tuple[str, np.dtype]:
    """(Zarr name, little-endian numpy dtype) from `dtype` (NumPy's string) or `data_type`."""
    name, given = spec.get("data_type"), spec.get("dtype")
    if given is not None:
        try:
            dtype = np.dtype(given) if isinstance(given, str) else None
        except TypeError:
            dtype = None
        if dtype is None or dtype.str not in DTYPES:
            raise InvalidNodeError(f"{where}: dtype {given!r} is not one of bool, int/uint 8-64, float 16-64, "
                                   f"complex 64-128 in little-endian NumPy notation ('<f8', '|u1', ...)")
        if name is not None and name != DTYPES[dtype.str] and name != dtype.str:
            raise InvalidNodeError(f"{where}: data_type {name!r} differs from dtype {given!r}")
        return DTYPES[dtype.str], dtype
    if name not in _NUMERIC:
        raise InvalidNodeError(f"{where}: data_type {name!r} is missing or not one of {', '.join(_NUMERIC)}"
                               if given is None else f"{where}: dtype is missing")
    return name, np.dtype(_NUMERIC[name])


def _inner_of(codecs: list):
    first = codecs[0] if codecs else None
    if isinstance(first, dict) and first.get("name") == "sharding_indexed":
        return (first.get("configuration") or {}).get("chunk_shape")
    return None


def _default_fill(name: str):
    return False if name == "bool" else [0.0, 0.0] if name.startswith("complex") else 0
