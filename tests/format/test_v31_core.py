"""The Zarr v3.1 core (zarr-specs, docs/v3/core): short-hand names at every extension point,
reserved node names, and fill values rounded from their JSON text."""

import json

import numpy as np
import pytest
import zarr

import zarrfs
from helpers import array_doc, group_doc, sharding, write_doc
from zarrfs.format.data_types import parse_data_type
from zarrfs.format.v3 import parse_document
from zarrfs.fs.hierarchy import Hierarchy
from zarrfs.stores.local import LocalStore


def test_short_hand_names_at_every_extension_point(tmp_path):
    """`"codecs": ["bytes", "crc32c"]`, `"chunk_key_encoding": "default"`, short-hand index
    codecs, `{"name": "int32"}`: read the same as their objects, and written back so."""
    z = zarr.create_array(str(tmp_path / "a"), shape=(4, 6), chunks=(2, 6), shards=(4, 6), dtype="int32",
                          fill_value=-1, compressors=None)
    z[:3] = np.arange(18, dtype="int32").reshape(3, 6)
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    doc["data_type"] = {"name": "int32"}
    doc["chunk_key_encoding"] = "default"
    doc["codecs"][0]["configuration"]["index_codecs"] = ["bytes", "crc32c"]
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    write_doc(tmp_path, "b", array_doc([5], "uint8", [2], codecs=["bytes", "crc32c"], key_encoding="default"))
    expected = np.full((4, 6), -1, "<i4")
    expected[:3] = np.arange(18).reshape(3, 6)
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        assert view.read(0, view.size) == expected.tobytes()
        view.write(3 * 24, np.arange(6, dtype="<i4").tobytes())
    with zarrfs.open_raw(str(tmp_path / "b"), mode="r+") as view:
        view.write(1, b"\x07\x08")
    expected[3] = np.arange(6)
    doc.update(data_type="int32", chunk_key_encoding={"name": "default"})  # what zarr-python 3.1 reads
    doc["codecs"][0]["configuration"]["index_codecs"] = [{"name": "bytes", "configuration": {"endian": "little"}},
                                                         {"name": "crc32c"}]
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    assert np.array_equal(zarr.open_array(str(tmp_path / "a"))[...], expected)
    chunk = (tmp_path / "b" / "c" / "0").read_bytes()
    assert chunk[:2] == b"\x00\x07" and len(chunk) == 6  # two bytes and a crc32c
    assert (tmp_path / "b" / "c" / "1").read_bytes()[:2] == b"\x08\x00"


def test_the_shard_index_short_hand_bytes_is_little_endian_but_data_must_say_its_order(tmp_path):
    write_doc(tmp_path, "a", array_doc([4], "uint16", [4], codecs=[sharding([2], index_codecs=["bytes"])],
                                       fill_value=9))
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        view.write(0, np.array([1, 2], "<u2").tobytes())
    shard = (tmp_path / "a" / "c" / "0").read_bytes()
    assert shard[-32:] == np.array([0, 4, 2**64 - 1, 2**64 - 1], "<u8").tobytes()
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        assert view.read(0, 8) == np.array([1, 2, 9, 9], "<u2").tobytes()
    write_doc(tmp_path, "b", array_doc([4], "uint16", [4], codecs=["bytes"]))
    with pytest.raises(zarrfs.errors.MetadataError, match="endian"):
        zarrfs.open_raw(str(tmp_path / "b"))


def test_names_starting_with_two_underscores_are_no_nodes(tmp_path):
    write_doc(tmp_path, "", group_doc())
    write_doc(tmp_path, "__ext", array_doc([2], "uint8", [2]))
    write_doc(tmp_path, "__zarr_meta", group_doc())
    write_doc(tmp_path, "_one", array_doc([2], "uint8", [2]))
    listing = Hierarchy(LocalStore(str(tmp_path))).listing("")
    assert "_one.bin" in listing
    assert not [name for name in listing if name.startswith("__")]


def test_v2_names_with_two_underscores_are_still_nodes(tmp_path):
    root = zarr.open_group(str(tmp_path), mode="w", zarr_format=2)
    root.create_array("__x", shape=(2,), dtype="u1")
    assert "__x.bin" in Hierarchy(LocalStore(str(tmp_path))).listing("")


@pytest.mark.parametrize("data_type, text, expected", [
    ("float32", "1.0000000596046447753906250000001", "3f800001"),  # above the tie: float64 would round to it
    ("float32", "1.000000059604644775390625", "3f800000"),  # the tie: to even
    ("float16", "1.00048828125000000001", "3c01"),
    ("float32", "1e400", "7f800000"), ("float64", "-1e400", "fff0000000000000"),
    ("float64", "-0.0", "8000000000000000"), ("float32", "1e-50", "00000000"),
    ("float32", "1152921573326323713", "5d800001"),  # an integer: 2**60 + 2**36 + 1, above the tie
    ("float64", "1" + "0" * 400, "7ff0000000000000"),
    ("float32", '"NaN"', "7fc00000"), ("float64", '"-Infinity"', "fff0000000000000"),
    ("float32", '"0x7fc00001"', "7fc00001"), ("float16", '"0x7E01"', "7e01"), ("bfloat16", "1.00390625", "3f80"),
    ("bfloat16", "1.003906250000001", "3f81")])
def test_fill_values_are_rounded_once_from_their_json_text(tmp_path, data_type, text, expected):
    raw = json.dumps(array_doc([1], data_type, [1])).replace('"fill_value": 0', f'"fill_value": {text}')
    meta = parse_document(raw.encode(), "zarr.json")
    assert meta.fill_value.tobytes()[::-1].hex() == expected


@pytest.mark.parametrize("data_type, fill", [("float32", "nan"), ("float32", "0x1ffffffff"), ("int8", 1.5),
                                             ("int8", 128), ("float64", "inf"), ("uint8", True)])
def test_fill_values_outside_the_json_rules_are_refused(data_type, fill):
    with pytest.raises(zarrfs.errors.MetadataError, match="fill"):
        parse_data_type(data_type).fill_value(fill)
