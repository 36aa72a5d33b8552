import json
import math

import numpy as np
import pytest

from helpers import array_doc, default_fill
from zarrfs.errors import MetadataError, UnsupportedError
from zarrfs.format.data_types import parse_data_type
from zarrfs.format.v3 import ArrayMetadata, GroupMetadata, parse_document


def parse(doc):
    return parse_document(json.dumps(doc).encode(), "g/a/zarr.json")


@pytest.mark.parametrize("data_type, value, hex_bits", [
    ("float32", "NaN", "0000c07f"),
    ("float32", "0x7fc00001", "0100c07f"),
    ("float32", "Infinity", "0000807f"),
    ("float32", "-Infinity", "000080ff"),
    ("float64", -0.0, "0000000000000080"),
    ("float16", "0x7e01", "017e"),
    ("float16", 1.5, "003e"),
    ("complex64", ["NaN", -1], "0000c07f000080bf"),
    ("complex128", [1, "0x7ff0000000000001"], "000000000000f03f010000000000f07f"),
    ("int8", -3, "fd"),
    ("uint64", 2**64 - 1, "ffffffffffffffff"),
    ("bool", True, "01"),
    ("r24", [1, 2, 255], "0102ff"),
])
def test_fill_values_are_bit_exact(data_type, value, hex_bits):
    meta = parse(array_doc([3], data_type, [2], fill_value=value))
    assert meta.fill_value.tobytes().hex() == hex_bits
    assert parse_data_type(data_type).fill_value(meta.data_type.fill_json(meta.fill_value)).tobytes().hex() == hex_bits


@pytest.mark.parametrize("data_type, value", [
    ("int8", 200), ("uint8", -1), ("int32", 1.5), ("bool", 2), ("bool", 1.0), ("float32", "nan"), ("float32", "0x1ffffffff"),
    ("complex64", 1.0), ("r16", [1]), ("r16", [1, 256]),
])
def test_bad_fill_values_name_the_field(data_type, value):
    with pytest.raises(MetadataError, match="fill_value"):
        parse(array_doc([3], data_type, [2], fill_value=value))


@pytest.mark.parametrize("mutate, error, pattern", [
    (lambda d: d.pop("shape"), MetadataError, "missing mandatory member 'shape'"),
    (lambda d: d.pop("codecs"), MetadataError, "'codecs'"),
    (lambda d: d.update(data_type="float128"), UnsupportedError, "data_type.*float128"),
    (lambda d: d.update(data_type="r7"), MetadataError, "multiple of 8"),
    (lambda d: d.update(zarr_format=2), MetadataError, "zarr_format"),
    (lambda d: d.update(shape=[2**62, 4]), MetadataError, "2\\^63"),
    (lambda d: d.update(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [0, 2]}}), MetadataError, "chunk_shape"),
    (lambda d: d.update(chunk_grid={"name": "rectilinear", "configuration": {}}), UnsupportedError, "rectilinear"),
    (lambda d: d.update(chunk_key_encoding={"name": "default", "configuration": {"separator": "-"}}), MetadataError, "separator"),
    (lambda d: d.update(storage_transformers=[{"name": "sharding"}]), UnsupportedError, "storage_transformers"),
    (lambda d: d.update(new_thing={"name": "x"}), UnsupportedError, "'new_thing'"),
    (lambda d: d.update(dimension_names=["x"]), MetadataError, "dimension_names"),
])
def test_bad_metadata_names_file_and_field(mutate, error, pattern):
    doc = array_doc([4, 4], "int16", [2, 2])
    mutate(doc)
    with pytest.raises(error, match=pattern) as info:
        parse(doc)
    assert "g/a/zarr.json" in str(info.value)


def test_malformed_json():
    with pytest.raises(MetadataError, match="g/a/zarr.json: not valid JSON"):
        parse_document(b"{not json", "g/a/zarr.json")


def test_ignorable_extensions_and_group():
    doc = array_doc([4], "uint8", [2], extra_ext={"name": "x", "must_understand": False},
                    storage_transformers=[], dimension_names=["t"])
    meta = parse(doc)
    assert isinstance(meta, ArrayMetadata) and meta.dimension_names == ("t",)
    assert meta.nbytes == 4
    assert isinstance(parse({"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}}), GroupMetadata)


def test_chunk_key_encodings():
    for enc, coords, key in [({"name": "default"}, (1, 2), "c/1/2"),
                             ({"name": "default", "configuration": {"separator": "."}}, (1, 2), "c.1.2"),
                             ({"name": "v2"}, (1, 2), "1.2"), ({"name": "v2", "configuration": {"separator": "/"}}, (1, 2), "1/2"),
                             ({"name": "default"}, (), "c"), ({"name": "v2"}, (), "0")]:
        meta = parse(array_doc([4] * len(coords), "uint8", [2] * len(coords), key_encoding=enc))
        assert meta.chunk_key_encoding.key(coords) == key


def test_zero_sized_and_default_fill():
    meta = parse(array_doc([0, 5], "float64", [3, 3]))
    assert math.prod(meta.shape) == 0 and meta.nbytes == 0
    assert default_fill("r24") == [0, 0, 0]
    assert np.isnan(parse(array_doc([1], "float64", [1], fill_value="NaN")).fill_value)


@pytest.mark.parametrize("data_type, fill, error, pattern", [
    ({"name": "numpy.datetime64", "configuration": {"unit": "fortnight"}}, 0, MetadataError, r"data_type.configuration.unit"),
    ({"name": "numpy.timedelta64", "configuration": {"unit": "s", "scale_factor": 0}}, 0, MetadataError, "scale_factor"),
    ({"name": "numpy.datetime64", "configuration": {"unit": "s"}}, 1.5, MetadataError, "fill_value"),
    ({"name": "fixed_length_utf32", "configuration": {"length_bytes": 6}}, "", MetadataError, "length_bytes"),
    ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 0}}, "", MetadataError, "length_bytes"),
    ({"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}}, "abc", MetadataError, "fill_value"),
    ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 1 << 20}}, "", UnsupportedError, "length_bytes"),
    ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 2}}, "not base64!", MetadataError, "fill_value"),
    ({"name": "structured", "configuration": {"fields": [["a", "float128"]]}}, "", UnsupportedError, r"fields\[0\]"),
    ({"name": "structured", "configuration": {"fields": [["a"]]}}, "", MetadataError, r"fields\[0\]"),
    ({"name": "structured", "configuration": {"fields": [["a", "string"]]}}, "", UnsupportedError, "variable-length"),
    ("string", [3], MetadataError, "fill_value"),
])
def test_numpy_type_refusals_name_the_field(data_type, fill, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        parse(array_doc([3], data_type, [2], fill_value=fill))
    assert "g/a/zarr.json" in str(info.value)


@pytest.mark.parametrize("data_type, fill, dtype, fill_hex", [
    ({"name": "numpy.datetime64", "configuration": {"unit": "ms", "scale_factor": 10}}, -(2**63), "<M8[10ms]",
     "0000000000000080"),
    ({"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}}, "é", "<U2", "e900000000000000"),
    ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 3}}, "YWI=", "|S3", "616200"),
    ({"name": "structured", "configuration": {"fields": [["a", "int16"], ["b", "bool"]]}}, "AQAB", None, "010001"),
    ("bool", 1, "|b1", "01"),
])
def test_numpy_types_and_their_fill_values(data_type, fill, dtype, fill_hex):
    meta = parse(array_doc([3], data_type, [2], fill_value=fill))
    assert dtype is None or meta.data_type.numpy == np.dtype(dtype)
    assert meta.fill_value.tobytes().hex() == fill_hex
    assert meta.data_type.fill_value(meta.data_type.fill_json(meta.fill_value)).tobytes().hex() == fill_hex


@pytest.mark.parametrize("order", [[None, None], [True, False], [0, 0], [1], "10", [0.0, 1.0]])
def test_a_transpose_order_that_is_no_permutation_is_refused_by_name(order):
    from zarrfs.codecs.chain import ChunkSpec, CodecChain
    spec = ChunkSpec((4, 8), parse_data_type("int32", "data_type"), 0)
    with pytest.raises(MetadataError, match=r"a/zarr.json: codecs\[0\] \(transpose\): order must be a permutation"):
        CodecChain([{"name": "transpose", "configuration": {"order": order}},
                    {"name": "bytes", "configuration": {"endian": "little"}}], spec, "a/zarr.json: codecs")
