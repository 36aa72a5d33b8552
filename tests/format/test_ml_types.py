"""The registered data types NumPy lacks (bfloat16, float8/6/4, int2/int4/uint2/uint4, complex_*)
and `struct`: written by tensorstore where it can, else stores built by hand from the specs in
zarr-extensions; NAME.bin as docs/data-types.md states it, both ways."""

import io
import json
import os

import ml_dtypes
import numpy as np
import pytest
import tensorstore as ts  # the test extra has it: the writer of the types it knows

import zarrfs
import zarrfs.stores.local
from helpers import array_doc, write_doc
from zarrfs.errors import InvalidValueError, MetadataError

TS_TYPES = ["bfloat16", "float8_e3m4", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz", "float8_e5m2",
            "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int2", "int4"]
SUB_BYTE = {"float6_e2m3fn": 6, "float6_e3m2fn": 6, "float4_e2m1fn": 4, "int2": 2, "int4": 4, "uint2": 2, "uint4": 4}


def ts_open(path, data_type, create=False, **metadata):
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    if create:
        spec["metadata"] = {"shape": [5, 6], "data_type": data_type,
                            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 4]}}, **metadata}
    return ts.open(spec, create=create).result()


def natural(data_type: str, values: np.ndarray) -> bytes:
    """NAME.bin's bytes for these values: ml_dtypes' element, an int sign-extended to int8."""
    if data_type in ("int2", "int4", "uint2", "uint4"):
        return values.astype("i1" if data_type.startswith("int") else "u1").tobytes()
    return values.tobytes()


def some_values(data_type: str, shape, rng) -> np.ndarray:
    dtype = np.dtype(getattr(ml_dtypes, data_type))
    if dtype.kind in "iu":
        info = ml_dtypes.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    values = rng.normal(0, 2, shape)
    return (abs(values) if data_type == "float8_e8m0fnu" else values).astype(dtype)  # it has no sign


@pytest.mark.parametrize("data_type", TS_TYPES)
def test_tensorstore_writes_and_reads_what_zarrfs_shows_and_writes(tmp_path, data_type):
    rng = np.random.default_rng(3)
    t = ts_open(tmp_path / "a", data_type, create=True)
    v = some_values(data_type, (5, 6), rng)
    t[2:, :] = v[2:, :]
    expected = t.read().result()
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        itemsize = 2 if data_type == "bfloat16" else 1
        assert view.size == 30 * itemsize
        assert view.read(0, view.size) == natural(data_type, expected)
        new = some_values(data_type, (5, 6), rng)
        view.write(0, natural(data_type, new)[:7 * itemsize])  # the first seven elements
    expected.reshape(-1)[:7] = new.reshape(-1)[:7]
    assert ts_open(tmp_path / "a", data_type).read().result().tobytes() == expected.tobytes()


@pytest.mark.parametrize("data_type", sorted(SUB_BYTE))
def test_bits_above_a_sub_byte_width_never_show_and_writes_store_the_low_bits(tmp_path, data_type):
    bits = SUB_BYTE[data_type]
    stored = np.arange(256, dtype="u1")  # every byte: the upper bits arbitrary, as the spec allows
    write_doc(tmp_path, "a", array_doc([256], data_type, [256], fill_value=0))
    (tmp_path / "a" / "c").mkdir()
    (tmp_path / "a" / "c" / "0").write_bytes(stored.tobytes())
    low = stored & ((1 << bits) - 1)
    if data_type.startswith("int"):
        low = ((low.astype("i2") << (16 - bits)).astype("i2") >> (16 - bits)).astype("i1").view("u1")
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        assert view.read(0, 256) == low.tobytes()
        view.write(0, view.read(0, 256)[::-1])
        with pytest.raises(InvalidValueError, match="write at 3"):
            view.write(3, bytes([1 << bits]) if not data_type.startswith("int") else bytes([1 << (bits - 1)]))
    assert (tmp_path / "a" / "c" / "0").read_bytes() == (stored & ((1 << bits) - 1))[::-1].tobytes()


@pytest.mark.parametrize("data_type", ["float6_e2m3fn", "float6_e3m2fn", "float8_e4m3", "uint4", "uint2"])
def test_types_tensorstore_lacks_read_from_hand_built_stores(tmp_path, data_type):
    dtype = np.dtype(getattr(ml_dtypes, data_type))
    values = some_values(data_type, (6,), np.random.default_rng(5))
    write_doc(tmp_path, "a", array_doc([6], data_type, [4], fill_value=1))
    (tmp_path / "a" / "c").mkdir()
    (tmp_path / "a" / "c" / "0").write_bytes(values[:4].tobytes())
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        expected = np.concatenate([values[:4], np.ones(2, dtype)])
        assert view.read(0, 6) == natural(data_type, expected)


@pytest.mark.parametrize("data_type, part", [("complex_bfloat16", "bfloat16"), ("complex_float16", "float16"),
                                             ("complex_float8_e4m3", "float8_e4m3"),
                                             ("complex_float4_e2m1fn", "float4_e2m1fn"),
                                             ("complex_float32", "float32"), ("complex_float64", "float64")])
def test_complex_variants_are_real_then_imaginary(tmp_path, data_type, part):
    part_dtype = np.dtype(getattr(ml_dtypes, part, None) or part)
    pairs = np.array([1.5, -2, 0.5, 3, -1, 0.25], np.float64).astype(part_dtype)
    stored = pairs.astype(part_dtype.newbyteorder(">")).tobytes()
    write_doc(tmp_path, "a", array_doc([4], data_type, [3], fill_value=[1, "-Infinity" if "float4" not in part else -6],
                                       codecs=[{"name": "bytes", "configuration": {"endian": "big"}}]))
    (tmp_path / "a" / "c").mkdir()
    (tmp_path / "a" / "c" / "0").write_bytes(stored)
    fill = np.array([1, -np.inf if "float4" not in part else -6]).astype(part_dtype)
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        assert view.read(0, view.size) == pairs.tobytes() + fill.tobytes()
        view.write(0, pairs[::-1].tobytes())
    assert (tmp_path / "a" / "c" / "0").read_bytes() == pairs[::-1].astype(part_dtype.newbyteorder(">")).tobytes()


@pytest.mark.parametrize("data_type, fill, expected", [
    ("bfloat16", "NaN", "7fc0"), ("float8_e4m3", "NaN", "7c"), ("float8_e5m2fnuz", "NaN", "80"),
    ("float8_e4m3", "-Infinity", "f8"), ("float4_e2m1fn", "0x7", "07"), ("float4_e2m1fn", 0.25, "00"),
    ("bfloat16", 1.00390625, "3f80"),  # halfway between 1 and the next bfloat16: ties to even
    ("bfloat16", "0x7f81", "7f81"), ("float8_e8m0fnu", 4, "81")])
def test_fill_values_follow_the_core_float_rules(data_type, fill, expected):
    from zarrfs.format.data_types import parse_data_type

    dt = parse_data_type(data_type)
    assert dt.fill_value(fill).tobytes()[::-1].hex() == expected


@pytest.mark.parametrize("data_type, fill", [("float4_e2m1fn", "NaN"), ("float6_e3m2fn", "Infinity"),
                                             ("float8_e4m3fnuz", "Infinity"), ("float4_e2m1fn", "0x17"),
                                             ("int4", 8), ("uint2", -1), ("int2", 1.0)])
def test_fill_values_a_type_cannot_hold_are_refused(data_type, fill):
    from zarrfs.format.data_types import parse_data_type

    with pytest.raises(MetadataError, match=data_type.split("_")[0] if isinstance(fill, str) else "fill value"):
        parse_data_type(data_type).fill_value(fill)


def test_sidecar_names_the_type_and_its_width(tmp_path):
    from zarrfs.fs.hierarchy import Hierarchy

    for name in ("bfloat16", "int4", "complex_float8_e5m2"):
        fill = [0, 0] if name.startswith("complex") else 0
        write_doc(tmp_path, name, array_doc([3], name, [3], fill_value=fill))
    write_doc(tmp_path, "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    h = Hierarchy(zarrfs.stores.local.LocalStore(str(tmp_path)))
    side = {n: json.loads(h.content(h.lookup(f"/{n}.json"))) for n in ("bfloat16", "int4", "complex_float8_e5m2")}
    assert (side["bfloat16"]["dtype"], side["bfloat16"]["itemsize"]) == ("bfloat16", 2)
    assert (side["int4"]["dtype"], side["int4"]["itemsize"], side["int4"]["data_type"]) == ("int4", 1, "int4")
    assert side["complex_float8_e5m2"]["dtype"] == [["real", "float8_e5m2"], ["imag", "float8_e5m2"]]
    assert side["complex_float8_e5m2"]["itemsize"] == 2


def test_views_only_where_the_format_has_the_type(tmp_path):
    from zarrfs.fs.hierarchy import Hierarchy

    for name in ("bfloat16", "int4", "uint2", "float8_e4m3", "complex_float8_e5m2"):
        write_doc(tmp_path, name, array_doc([3, 4], name, [3, 4], fill_value=[0, 0] if "complex" in name else 0))
    write_doc(tmp_path, "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    listing = Hierarchy(zarrfs.stores.local.LocalStore(str(tmp_path)), views=("npy", "envi", "mhd", "nrrd", "vrt")).listing("")
    assert sorted(n for n in listing if n.startswith("bfloat16")) == ["bfloat16.bin", "bfloat16.json"]
    assert sorted(n for n in listing if n.startswith("float8")) == ["float8_e4m3.bin", "float8_e4m3.json"]
    assert sorted(n for n in listing if n.startswith("complex")) == ["complex_float8_e5m2.bin",
                                                                    "complex_float8_e5m2.json"]
    assert {"int4.npy", "uint2.npy"} <= set(listing)  # NAME.bin of int4 is int8: NumPy's own type


def test_struct_with_object_fields_and_object_fill(tmp_path):
    fields = [{"name": "id", "data_type": "int32"}, {"name": "q", "data_type": {"name": "int4"}},
              {"name": "p", "data_type": {"name": "struct", "configuration": {"fields": [
                  {"name": "x", "data_type": "bfloat16"}, {"name": "y", "data_type": "float32"}]}}}]
    data_type = {"name": "struct", "configuration": {"fields": fields}}
    fill = {"id": 7, "q": -3, "p": {"x": 1.5, "y": "NaN"}}
    write_doc(tmp_path, "a", array_doc([3], data_type, [2], fill_value=fill,
                                       codecs=[{"name": "bytes", "configuration": {"endian": "big"}}]))
    record = (np.array(-5, ">i4").tobytes() + bytes([0xfe])  # q = -2, upper bits set
              + np.array(2.0, ml_dtypes.bfloat16).tobytes()[::-1] + np.array(4, ">f4").tobytes())
    (tmp_path / "a" / "c").mkdir()
    (tmp_path / "a" / "c" / "0").write_bytes(record * 2)
    one = (np.int32(-5).tobytes() + bytes([0xfe]) + np.array(2.0, ml_dtypes.bfloat16).tobytes()
           + np.float32(4).tobytes())
    filled = (np.int32(7).tobytes() + bytes([0xfd]) + np.array(1.5, ml_dtypes.bfloat16).tobytes()
              + np.float32(np.nan).tobytes())
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        assert view.size == 33
        assert view.read(0, 33) == one * 2 + filled


@pytest.mark.parametrize("endian", ["little", "big"])
def test_structured_base64_fill_follows_the_bytes_codec_byte_order(tmp_path, endian):
    data_type = {"name": "structured", "configuration": {"fields": [["a", "int16"], ["b", "uint8"]]}}
    write_doc(tmp_path, "a", array_doc([2], data_type, [2], fill_value="AAEC",  # bytes 00 01 02
                                       codecs=[{"name": "bytes", "configuration": {"endian": endian}}]))
    a = 1 if endian == "big" else 256
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        assert view.read(0, 6) == (np.int16(a).astype("<i2").tobytes() + b"\x02") * 2


def test_struct_refuses_duplicate_fields_and_incomplete_fills():
    from zarrfs.format.data_types import parse_data_type

    with pytest.raises(MetadataError, match="duplicate"):
        parse_data_type({"name": "struct", "configuration": {"fields": [
            {"name": "a", "data_type": "int8"}, {"name": "a", "data_type": "int8"}]}})
    dt = parse_data_type({"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": "int8"}, {"name": "b", "data_type": "int8"}]}})
    with pytest.raises(MetadataError, match="exactly the fields"):
        dt.fill_value({"a": 1})




def test_round_trip_through_the_file_system_read_back_by_tensorstore(tmp_path):
    from core import core_of

    store = tmp_path / "store"
    write_doc(store, "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    rng = np.random.default_rng(11)
    written = {}
    for name in ("bfloat16", "int4", "float8_e5m2"):
        ts_open(store / name, name, create=True, fill_value=1)
        written[name] = some_values(name, (5, 6), rng)
    with core_of(store, tmp_path, "views=npy") as c:
        for name, values in written.items():
            fh = c.open(f"/{name}.bin", os.O_RDWR)
            assert c.pread(fh, 1 << 20, 0) == natural(name, np.ones((5, 6), values.dtype))
            c.pwrite(fh, natural(name, values), 0)
            c.close(fh)
        side = json.loads(c.read_text("/int4.json"))
        assert (side["dtype"], side["itemsize"], side["data_type"]) == ("int4", 1, "int4")
        assert np.array_equal(np.load(io.BytesIO(c.read_bytes("/int4.npy"))), written["int4"].astype("i1"))
        assert not c.exists("/bfloat16.npy")
    for name, values in written.items():
        assert ts_open(store / name, name).read().result().tobytes() == values.tobytes()


def test_a_sub_byte_write_out_of_range_is_einval(tmp_path):
    import errno

    from core import core_of

    write_doc(tmp_path / "s", "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    write_doc(tmp_path / "s", "u", array_doc([4], "uint2", [4], fill_value=3))
    with core_of(tmp_path / "s", tmp_path) as c:
        fh = c.open("/u.bin", os.O_RDWR)
        try:
            with pytest.raises(OSError) as e:
                c.pwrite(fh, b"\x04", 1)
                c.fsync(fh)
            assert e.value.errno == errno.EINVAL
            c.pwrite(fh, b"\x02", 1)
        finally:
            c.close(fh)
        assert c.read_bytes("/u.bin") == b"\x03\x02\x03\x03"


@pytest.mark.parametrize("data_type", ["bfloat16", "int4", "float4_e2m1fn"])
def test_tensorstore_sharded_both_ways(tmp_path, data_type):
    codecs = [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 2], "index_location": "start",
        "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "zstd"}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]
    t = ts_open(tmp_path / "a", data_type, create=True, codecs=codecs)
    values = some_values(data_type, (5, 6), np.random.default_rng(8))
    t[...] = values
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        itemsize = 2 if data_type == "bfloat16" else 1
        assert view.read(0, view.size) == natural(data_type, values)
        assert view.read(itemsize * 9, itemsize) == natural(data_type, values[1:2, 3:4])
        view.write(0, natural(data_type, values[::-1].copy()))
    assert ts_open(tmp_path / "a", data_type).read().result().tobytes() == values[::-1].tobytes()
