"""zarr.json documents parsed into frozen records, with errors that name the file and field."""

import json
import math
from dataclasses import dataclass, field
from typing import Self

import numpy as np

from zarrfs.errors import MetadataError, UnsupportedError
from zarrfs.format.data_types import DataType, parse_data_type
from zarrfs.geometry import ChunkEdge, Edges

MAX_NBYTES = 2**63 - 1
MAX_DEPTH = 100  # nesting of JSON values in a document: deeper is refused, not recursed into

_ARRAY_MEMBERS = {"zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
                  "fill_value", "codecs", "attributes", "dimension_names", "storage_transformers"}
_GROUP_MEMBERS = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}


@dataclass(frozen=True)
class ChunkKeyEncoding:
    name: str  # "default" or "v2"
    separator: str

    def key(self, coords: tuple[int, ...]) -> str:
        if self.name == "default":
            return self.separator.join(["c", *map(str, coords)])
        return self.separator.join(map(str, coords)) if coords else "0"


@dataclass(frozen=True)
class GroupMetadata:
    attributes: dict
    document: dict = field(repr=False)
    zarr_format: int = 3


@dataclass(frozen=True)
class ArrayMetadata:
    shape: tuple[int, ...]
    data_type: DataType
    chunk_shape: tuple[ChunkEdge, ...]  # ints; a rectilinear grid has geometry.Edges along its irregular dimensions
    chunk_key_encoding: ChunkKeyEncoding
    fill_value: np.ndarray  # 0-d, of data_type.numpy
    codecs: tuple[dict, ...]  # normalised {"name", "configuration"} objects
    attributes: dict
    dimension_names: tuple[str | None, ...] | None
    document: dict = field(repr=False)
    zarr_format: int = 3

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.data_type.itemsize


class JsonNumber(float):
    """A JSON number with a fraction or exponent, as a float that remembers its text: a fill
    value is rounded from the decimal text to its type in one step, not through float64 first
    (which rounds twice, and may land on the wrong side of a tie). Anywhere else it is a float."""

    text: str

    def __new__(cls, text: str) -> Self:
        number = super().__new__(cls, text)
        number.text = text
        return number


def load_document(raw: bytes, where: str) -> dict:
    """A metadata document's JSON object; `where` names it in every error."""
    try:
        doc = json.loads(raw, parse_float=JsonNumber)
    except RecursionError:
        raise MetadataError(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as e:  # malformed, not UTF-8, or an integer past Python's digit limit
        raise MetadataError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: must be a JSON object")
    _check_depth(doc, where)
    return doc


def dump_document(doc: dict) -> bytes:
    """A metadata document's bytes as zarrfs writes every one (zarr-python's layout: indented)."""
    return (json.dumps(doc, indent=2) + "\n").encode()


def parse_document(raw: bytes, where: str) -> GroupMetadata | ArrayMetadata:
    """Parse one zarr.json; `where` names it in every error."""
    return parse_object(load_document(raw, where), where)


def parse_object(doc: dict, where: str) -> GroupMetadata | ArrayMetadata:
    """Parse one zarr.json's JSON object (from its file or from consolidated metadata)."""
    if doc.get("zarr_format") != 3:
        raise MetadataError(f"{where}: zarr_format must be 3, not {doc.get('zarr_format')!r}")
    node_type = doc.get("node_type")
    if node_type == "group":
        _check_unknown(doc, _GROUP_MEMBERS, where)
        return GroupMetadata(_attributes(doc, where), doc)
    if node_type == "array":
        return _parse_array(doc, where)
    raise MetadataError(f"{where}: node_type must be 'array' or 'group', not {node_type!r}")


def _parse_array(doc: dict, where: str) -> ArrayMetadata:
    _check_unknown(doc, _ARRAY_MEMBERS, where)
    for member in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
        if member not in doc:
            raise MetadataError(f"{where}: missing mandatory member {member!r}")
    shape = int_list(doc["shape"], f"{where}: shape", minimum=0)
    data_type = parse_data_type(doc["data_type"], f"{where}: data_type")
    chunk_shape = _chunk_grid(doc["chunk_grid"], shape, where)
    if math.prod(shape) * data_type.itemsize > MAX_NBYTES:
        raise MetadataError(f"{where}: shape {list(shape)} of {data_type.name} is more than 2^63 bytes")
    codecs = doc["codecs"]
    if not isinstance(codecs, list) or not codecs:
        raise MetadataError(f"{where}: codecs must be a non-empty list")
    transformers = doc.get("storage_transformers") or []
    if not isinstance(transformers, list):
        raise MetadataError(f"{where}: storage_transformers must be a list, not {transformers!r}")
    for st in transformers:
        if not (isinstance(st, dict) and st.get("must_understand") is False):
            raise UnsupportedError(f"{where}: storage_transformers: {extension_name(st)!r} is not supported")
    return ArrayMetadata(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunk_shape,
        chunk_key_encoding=_chunk_key_encoding(doc["chunk_key_encoding"], where),
        fill_value=data_type.fill_value(doc["fill_value"], f"{where}: fill_value", _stores_big_endian(codecs)),
        codecs=tuple(normalise_extension(c, f"{where}: codecs") for c in codecs),
        attributes=_attributes(doc, where),
        dimension_names=_dimension_names(doc, len(shape), where),
        document=doc,
    )


def _stores_big_endian(codecs: list) -> bool:
    """The bytes codec (of the chain, or inside sharding) stores big-endian: a struct's base64
    fill value follows its byte order (zarr-extensions, data-types/structured)."""
    for codec in codecs:
        if not isinstance(codec, dict):
            continue
        config = codec.get("configuration")
        if not isinstance(config, dict):
            config = {}
        if codec.get("name") == "bytes":
            return config.get("endian") == "big"
        if codec.get("name") == "sharding_indexed" and isinstance(config.get("codecs"), list):
            return _stores_big_endian(config["codecs"])
    return False


def _check_depth(doc: dict, where: str) -> None:
    """Refuse documents nested past MAX_DEPTH, without recursion: later code may recurse."""
    level: list[dict | list] = [doc]
    for _depth in range(MAX_DEPTH + 1):
        level = [v for value in level for v in (value.values() if isinstance(value, dict) else value)
                 if isinstance(v, (dict, list))]
        if not level:
            return
    raise MetadataError(f"{where}: JSON values nested more than {MAX_DEPTH} levels deep")


def _check_unknown(doc: dict, known: set, where: str) -> None:
    for name, value in doc.items():
        if name in known:
            continue
        if isinstance(value, dict) and value.get("must_understand") is False:
            continue
        raise UnsupportedError(f"{where}: unknown member {name!r} (an extension zarrfs must understand)")


def normalise_extension(value: object, where: str) -> dict:
    """An extension given as a short-hand name or an object, as {"name", "configuration", ...}."""
    if isinstance(value, str):
        return {"name": value, "configuration": {}}
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise MetadataError(f"{where}: {value!r} is not an extension object with a name")
    config = value.get("configuration", {})
    if not isinstance(config, dict):
        raise MetadataError(f"{where}: {value['name']}: configuration must be an object")
    return {**value, "configuration": config}


def extension_name(value: object) -> str:
    return value if isinstance(value, str) else value.get("name", "?") if isinstance(value, dict) else repr(value)


def int_list(value: object, where: str, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise MetadataError(f"{where} must be a list of integers, not {value!r}")
    if any(v < minimum for v in value):
        raise MetadataError(f"{where} must have every entry >= {minimum}, not {value!r}")
    return tuple(value)


def _chunk_grid(value: object, shape: tuple[int, ...], where: str) -> tuple[ChunkEdge, ...]:
    """The chunk shape: ints for a regular grid; for a rectilinear one, per dimension an int
    (regular along it) or geometry.Edges (the edge lengths, run-length encoding expanded)."""
    grid = normalise_extension(value, f"{where}: chunk_grid")
    if grid["name"] == "rectilinear":
        return _rectilinear(grid["configuration"], shape, f"{where}: chunk_grid")
    if grid["name"] != "regular":
        raise UnsupportedError(f"{where}: chunk_grid: unsupported chunk grid {grid['name']!r}")
    if "chunk_shape" not in grid["configuration"]:
        raise MetadataError(f"{where}: chunk_grid: missing configuration.chunk_shape")
    chunk_shape = int_list(grid["configuration"]["chunk_shape"], f"{where}: chunk_grid.chunk_shape", minimum=1)
    if len(chunk_shape) != len(shape):
        raise MetadataError(f"{where}: chunk_grid.chunk_shape has {len(chunk_shape)} dimensions, shape has {len(shape)}")
    return chunk_shape


MAX_EDGES = 1 << 22  # chunk edges per dimension of a rectilinear grid: more is refused, not expanded


def _rectilinear(config: dict, shape: tuple[int, ...], where: str) -> tuple[ChunkEdge, ...]:
    """zarr-extensions, chunk-grids/rectilinear: kind "inline", chunk_shapes per dimension."""
    if config.get("kind") != "inline":
        raise UnsupportedError(f"{where}: rectilinear kind {config.get('kind')!r} (zarrfs reads 'inline')")
    shapes = config.get("chunk_shapes")
    if not isinstance(shapes, list) or len(shapes) != len(shape):
        raise MetadataError(f"{where}: chunk_shapes must be a list of {len(shape)} entries, one per dimension")
    grid: list[ChunkEdge] = []
    for k, (entry, n) in enumerate(zip(shapes, shape, strict=False)):
        at = f"{where}.chunk_shapes[{k}]"
        if _positive(entry):
            grid.append(entry)
            continue
        if not isinstance(entry, list) or not entry:
            raise MetadataError(f"{at}: must be a positive integer or a non-empty list of edge lengths")
        edges = _edges(entry, at)
        if sum(edges) < n:
            raise MetadataError(f"{at}: edge lengths sum to {sum(edges)}, less than the array's {n}")
        grid.append(Edges(edges))
    return tuple(grid)


def _edges(entry: list, where: str) -> list[int]:
    """Edge lengths, each an integer or a run-length [value, count] pair."""
    edges = []
    for i, item in enumerate(entry):
        if _positive(item):
            edges.append(item)
        elif isinstance(item, list) and len(item) == 2 and all(_positive(v) for v in item):
            if len(edges) + item[1] > MAX_EDGES:
                raise UnsupportedError(f"{where}: more than zarrfs's limit of {MAX_EDGES} chunks along a dimension")
            edges += [item[0]] * item[1]
        else:
            raise MetadataError(f"{where}[{i}]: must be a positive edge length or a [length, count] pair, not {item!r}")
        if len(edges) > MAX_EDGES:
            raise UnsupportedError(f"{where}: more than zarrfs's limit of {MAX_EDGES} chunks along a dimension")
    return edges


def _positive(value: object) -> bool:
    return type(value) is int and value >= 1


def _chunk_key_encoding(value: object, where: str) -> ChunkKeyEncoding:
    enc = normalise_extension(value, f"{where}: chunk_key_encoding")
    defaults = {"default": "/", "v2": "."}
    if enc["name"] not in defaults:
        raise UnsupportedError(f"{where}: chunk_key_encoding: unsupported encoding {enc['name']!r}")
    separator = enc["configuration"].get("separator", defaults[enc["name"]])
    if separator not in ("/", "."):
        raise MetadataError(f"{where}: chunk_key_encoding.separator must be '/' or '.', not {separator!r}")
    return ChunkKeyEncoding(enc["name"], separator)


def _attributes(doc: dict, where: str) -> dict:
    attributes = doc.get("attributes", {})
    if not isinstance(attributes, dict):
        raise MetadataError(f"{where}: attributes must be an object")
    return attributes


def _dimension_names(doc: dict, ndim: int, where: str) -> tuple[str | None, ...] | None:
    names = doc.get("dimension_names")
    if names is None:
        return None
    if not isinstance(names, list) or len(names) != ndim or not all(n is None or isinstance(n, str) for n in names):
        raise MetadataError(f"{where}: dimension_names must be a list of {ndim} strings or nulls")
    return tuple(names)


