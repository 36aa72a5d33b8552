"""Zarr v2 documents (.zarray, .zgroup, .zattrs) parsed into the records the v3 parser makes.

A v2 array becomes the codec chain that reads and writes its chunks as v2 stores them:
`order: "F"` is a transpose, the dtype's byte order is the bytes codec's endian (or, with
filters or mixed-endian struct fields, the v2 filter codec, which applies the filters exactly
as v2 does), and the compressor is a bytes->bytes codec, or, for one that turns arrays into
bytes (pcodec, zfpy), the array->bytes codec.
"""

import math

import numpy as np

from zarrfs.codecs.numcodecs_adapter import KINDS, OBJECT_FILTERS, PREFIX, V2_FILTERS, get_codec
from zarrfs.errors import MetadataError, UnsupportedError
from zarrfs.format.data_types import DataType
from zarrfs.format.numpy_types import V2_OBJECT, little_endian, parse_v2_dtype
from zarrfs.format.v3 import MAX_NBYTES, ArrayMetadata, ChunkKeyEncoding, GroupMetadata, int_list, load_document

BLOSC_SHUFFLES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}


def parse_group(doc: dict, attributes: dict, where: str) -> GroupMetadata:
    _check_format(doc, where)
    return GroupMetadata(attributes, doc, zarr_format=2)


def parse_attributes(raw: bytes | None, where: str) -> dict:
    return {} if raw is None else load_document(raw, where)


def parse_array(doc: dict, attributes: dict, where: str) -> ArrayMetadata:
    """A .zarray's JSON object (and the node's .zattrs object) as ArrayMetadata."""
    _check_format(doc, where)
    for member in ("shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters"):
        if member not in doc:
            raise MetadataError(f"{where}: missing mandatory member {member!r}")
    shape = int_list(doc["shape"], f"{where}: shape", minimum=0)
    chunks = int_list(doc["chunks"], f"{where}: chunks", minimum=1)
    if len(chunks) != len(shape):
        raise MetadataError(f"{where}: chunks has {len(chunks)} dimensions, shape has {len(shape)}")
    if doc["dtype"] in V2_OBJECT:
        stored, data_type = np.dtype(object), _variable_length(doc, where)
    else:
        stored = parse_v2_dtype(doc["dtype"], f"{where}: dtype")
        data_type = DataType(stored.str if stored.fields is None else "structured", little_endian(stored))
    if math.prod(shape) * data_type.itemsize > MAX_NBYTES:
        raise MetadataError(f"{where}: shape {list(shape)} of {data_type.name} is more than 2^63 bytes")
    separator = doc.get("dimension_separator", ".")
    if separator not in (".", "/"):
        raise MetadataError(f"{where}: dimension_separator must be '.' or '/', not {separator!r}")
    return ArrayMetadata(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunks,
        chunk_key_encoding=ChunkKeyEncoding("v2", separator),
        fill_value=_fill_value(stored, data_type, doc["fill_value"], f"{where}: fill_value"),
        codecs=tuple(_codecs(doc, stored, len(shape), where)),
        attributes=attributes,
        dimension_names=None,
        document=doc,
        zarr_format=2,
    )


def _variable_length(doc: dict, where: str) -> DataType:
    """An object array whose first filter is vlen-utf8, vlen-bytes or json2: shown as text. Other
    object codecs (msgpack, pickle...) are refused: pickle would run code from the store."""
    filters = doc["filters"] if isinstance(doc["filters"], list) else []
    first = filters[0].get("id") if filters and isinstance(filters[0], dict) else None
    if first not in OBJECT_FILTERS:
        raise UnsupportedError(f"{where}: dtype: object arrays ({doc['dtype']!r}) are supported with a "
                               f"{', '.join(sorted(OBJECT_FILTERS))} filter, not {first!r}")
    return DataType(first, np.dtype(object))


def _check_format(doc: dict, where: str) -> None:
    if doc.get("zarr_format") != 2:
        raise MetadataError(f"{where}: zarr_format must be 2, not {doc.get('zarr_format')!r}")


def _fill_value(stored: np.dtype, data_type: DataType, value: object, where: str) -> np.ndarray:
    """null means no fill value: missing chunks read as zarr-python reads them, zeros (NaT for
    datetimes; for object arrays "", b"" or, of JSON values, null). Bytes, text and structs are
    given in the stored byte order (base64 for bytes)."""
    if value is None and data_type.numpy.kind == "O":
        return data_type.fill_value(None, where)
    if value is None:
        zero = np.zeros((), data_type.numpy)
        return np.full((), -(2**63), "<i8").view(data_type.numpy) if data_type.numpy.kind in "Mm" else zero
    fill = DataType(data_type.name, stored).fill_value(value, where)
    return fill.astype(data_type.numpy).reshape(())


def _codecs(doc: dict, stored: np.dtype, ndim: int, where: str) -> list[dict]:
    codecs = []
    order = doc["order"]
    if order not in ("C", "F"):
        raise MetadataError(f"{where}: order must be 'C' or 'F', not {order!r}")
    if order == "F" and ndim > 1:
        codecs.append({"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    filters = doc["filters"] or []
    if not isinstance(filters, list):
        raise MetadataError(f"{where}: filters must be null or a list, not {filters!r}")
    made = [get_codec(_codec_config(f, f"{where}: filters[{i}]"), f"{where}: filters[{i}]")
            for i, f in enumerate(filters)]
    compressor = doc["compressor"]
    if compressor is not None:
        compressor = _codec_config(compressor, f"{where}: compressor")
        get_codec(compressor, f"{where}: compressor")  # refuse what numcodecs does not have, now
    if compressor is not None and KINDS.get(compressor["id"]) == "array->bytes":
        return codecs + [_array_to_bytes(doc, stored, compressor)]  # pcodec, zfpy: they are the bytes codec
    native = little_endian(stored)
    if not filters and stored in (native, native.newbyteorder(">")):
        endian = "big" if stored != native else "little"
        codecs.append({"name": "bytes", "configuration": {"endian": endian}})
    else:
        codecs.append({"name": V2_FILTERS, "configuration": {"dtype": doc["dtype"], "filters": filters}})
    if compressor is not None:
        codecs.append(_compressor(compressor, _encoded_itemsize(stored, made), f"{where}: compressor"))
    return codecs


def _array_to_bytes(doc: dict, stored: np.dtype, compressor: dict) -> dict:
    """A compressor that turns arrays into bytes (pcodec, zfpy) is given the filtered array, in v2
    as in v3: alone, it is the chain's array->bytes codec; after filters or on a byte order the
    in-memory array does not have, the v2 filter codec runs it after the filters."""
    if not doc["filters"] and stored == little_endian(stored):
        return {"name": PREFIX + compressor["id"], "configuration": {k: v for k, v in compressor.items() if k != "id"}}
    return {"name": V2_FILTERS, "configuration": {"dtype": doc["dtype"], "filters": doc["filters"] or [],
                                                   "compressor": compressor}}


def _codec_config(value: object, where: str) -> dict:
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise MetadataError(f"{where}: must be a codec configuration with an 'id', not {value!r}")
    return value


def _compressor(config: dict, typesize: int, where: str) -> dict:
    """The v3 codec for a v2 compressor: the native one where zarrfs has it, else numcodecs'."""
    codec_id, rest = config["id"], {k: v for k, v in config.items() if k != "id"}
    if codec_id == "zstd":
        return {"name": "zstd", "configuration": {"level": rest.get("level", 0), "checksum": rest.get("checksum", False)}}
    if codec_id == "gzip":
        return {"name": "gzip", "configuration": {"level": rest.get("level", 1)}}
    if codec_id == "blosc":
        shuffle = rest.get("shuffle", 1)
        if shuffle == -1:  # numcodecs' AUTOSHUFFLE
            shuffle = 2 if typesize == 1 else 1
        if shuffle not in BLOSC_SHUFFLES:
            raise UnsupportedError(f"{where}: blosc shuffle {shuffle!r} is not one of 0, 1, 2, -1")
        return {"name": "blosc", "configuration": {
            "cname": rest.get("cname", "lz4"), "clevel": rest.get("clevel", 5), "shuffle": BLOSC_SHUFFLES[shuffle],
            "typesize": typesize, "blocksize": rest.get("blocksize", 0)}}
    return {"name": PREFIX + codec_id, "configuration": rest}


def _encoded_itemsize(stored: np.dtype, filters: list) -> int:
    """The item size of what the compressor is given (blosc shuffles by it): the stored dtype's,
    or that of the last filter's output."""
    data: np.ndarray = np.zeros(1, stored)
    try:
        for codec in filters:
            data = codec.encode(data)
        return np.asarray(data).dtype.itemsize
    except Exception:  # a filter that cannot encode zeros: shuffle by bytes
        return 1
