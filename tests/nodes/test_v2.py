"""Zarr v2: interoperability with zarr-python's zarr_format=2 writer in both directions, and
refusals that name their field."""

import base64
import json

import numpy as np
import pytest
import zarr

import zarrfs
from v2_layouts import COMPRESSORS, DTYPES, FILTER_DTYPES, FILTERS, create, flat, values
from zarrfs.errors import MetadataError, UnsupportedError
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.local import LocalStore


def dtype_id(dtype):
    return dtype if isinstance(dtype, str) else "struct" + str(len(dtype))


def read_all(path) -> bytes:
    with zarrfs.open_raw(str(path)) as view:
        data = view.read(0, view.size)
        assert view.size == len(data)
        return data


def check_reads(path, expected: np.ndarray, rng):
    want = flat(expected)
    assert read_all(path) == want
    with zarrfs.open_raw(str(path)) as view:
        for _ in range(10):
            offset = int(rng.integers(0, len(want) + 1))
            size = int(rng.integers(0, 40))
            assert view.read(offset, size) == want[offset:offset + size]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("order", ["C", "F"])
def test_reads_every_data_type_and_order(tmp_path, dtype, order):
    rng = np.random.default_rng(1)
    z = create(tmp_path / "a", dtype, order=order, separator="/" if order == "F" else ".", fill_value=None)
    v = values(z.dtype, z.shape, rng)
    z[1:, :] = v[1:, :]  # the first row of chunks stays unwritten: read as the (null) fill value, zeros
    check_reads(tmp_path / "a", z[...], rng)


@pytest.mark.parametrize("compressor", sorted(COMPRESSORS))
def test_reads_every_compressor(tmp_path, compressor):
    rng = np.random.default_rng(2)
    z = create(tmp_path / "a", ">f4", compressor=compressor, shape=(9, 10), chunks=(4, 4), fill_value="NaN")
    v = values(z.dtype, z.shape, rng)
    v[:4, :4] = np.nan
    z[...] = v
    check_reads(tmp_path / "a", z[...], rng)


@pytest.mark.parametrize("chain", sorted(FILTERS))
def test_reads_every_filter_chain(tmp_path, chain):
    rng = np.random.default_rng(3)
    dtype = FILTER_DTYPES[chain]
    z = create(tmp_path / "a", dtype, compressor="blosc-lz4-auto", filters=FILTERS[chain](dtype), order="F")
    z[...] = values(z.dtype, z.shape, rng)
    check_reads(tmp_path / "a", z[...], rng)


def write_randomly(path, size, rng, itemsize) -> bytes:
    """Random writes of whole elements through open_raw, then close; returns the model."""
    with zarrfs.open_raw(str(path), mode="r+") as view:
        model = bytearray(view.read(0, view.size))
        for i in range(12):
            first = int(rng.integers(0, size // itemsize))
            count = int(rng.integers(1, size // itemsize - first + 1))
            yield view, first * itemsize, count * itemsize, model
            if i % 5 == 0:
                view.flush()


@pytest.mark.parametrize("dtype, compressor, chain, order", [
    ("<i4", "zstd", None, "C"), (">f8", "blosc-lz4-auto", None, "F"), ("|b1", "gzip", None, "C"),
    ("<U3", "lzma", None, "F"), ("|S5", "bz2", None, "C"), (">M8[s]", "lz4", None, "C"),
    ([["a", "<i2"], ["b", ">f4"]], "zlib", None, "F"), ("<i4", "zlib", "delta", "C"),
    (">i2", "none", "delta-astype", "F"), ("<f4", "zstd", "astype", "C"), (">f8", "none", "shuffle+zlib", "C"),
    ("<i8", "blosc-zstd-bit", "delta+fletcher32", "F"),
], ids=str)
def test_zarr_python_reads_what_we_write(tmp_path, dtype, compressor, chain, order):
    rng = np.random.default_rng(4)
    filters = FILTERS[chain](dtype) if chain else None
    z = create(tmp_path / "a", dtype, compressor=compressor, filters=filters, order=order, fill_value=None)
    z[:2] = values(z.dtype, z.shape, rng)[:2]
    new = values(z.dtype, z.shape, rng)
    model = np.ascontiguousarray(z[...])
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        for _ in range(10):  # random element spans, written as whole elements
            first = int(rng.integers(0, model.size))
            last = int(rng.integers(first, model.size + 1))
            model.reshape(-1)[first:last] = new.reshape(-1)[first:last]
            itemsize = model.dtype.itemsize
            view.write(first * itemsize, flat(new).__getitem__(slice(first * itemsize, last * itemsize)))
    got = zarr.open_array(str(tmp_path / "a"), zarr_format=2)[...]
    assert flat(got) == flat(model)
    assert json.loads((tmp_path / "a" / ".zarray").read_text())["zarr_format"] == 2  # metadata untouched


def test_lossy_filter_stores_what_the_codec_keeps(tmp_path):
    import numcodecs

    create(tmp_path / "a", "<f8", filters=[numcodecs.Quantize(digits=2, dtype="<f8")], order="F")
    v = np.linspace(0, 1, 35).reshape(5, 7)
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        view.write(0, v.tobytes())
    got = zarr.open_array(str(tmp_path / "a"), zarr_format=2)[...]
    assert np.allclose(got, v, atol=0.01) and not np.array_equal(got, v)  # quantized, as the codec keeps it
    assert read_all(tmp_path / "a") == got.tobytes()


@pytest.mark.parametrize("fill, expected", [
    ("NaN", np.nan), ("Infinity", np.inf), ("-Infinity", -np.inf), (None, 0.0), (2.5, 2.5)])
def test_fill_value_forms(tmp_path, fill, expected):
    z = create(tmp_path / "a", ">f8", fill_value=None)
    doc = json.loads((tmp_path / "a" / ".zarray").read_text())
    doc["fill_value"] = fill
    (tmp_path / "a" / ".zarray").write_text(json.dumps(doc))
    ours = read_all(tmp_path / "a")
    theirs = np.asarray(zarr.open_array(str(tmp_path / "a"), zarr_format=2)[...], "<f8")
    assert ours == np.full(z.shape, expected, "<f8").tobytes()
    assert ours == theirs.tobytes()  # every form read as zarr-python reads it (null: zeros)


def test_base64_fill_values(tmp_path):
    create(tmp_path / "s", "|S3", fill_value=b"ab")
    assert read_all(tmp_path / "s") == b"ab\0" * 35
    create(tmp_path / "v", [["a", "<i2"], ["b", ">f4"]], fill_value=None)
    doc = json.loads((tmp_path / "v" / ".zarray").read_text())
    doc["fill_value"] = base64.b64encode(b"\x00\x01\x3f\x80\x00\x00").decode()  # a: 256 stored little-, b: 1.0 big-endian
    (tmp_path / "v" / ".zarray").write_text(json.dumps(doc))
    assert read_all(tmp_path / "v") == (np.int16(256).tobytes() + np.float32(1.0).tobytes()) * 35


def v2_doc(**changes):
    doc = {"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", "compressor": None, "fill_value": 0,
           "order": "C", "filters": None}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v != "DROP"}


@pytest.mark.parametrize("changes, error, pattern", [
    ({"shape": "DROP"}, MetadataError, "missing mandatory member 'shape'"),
    ({"chunks": [0]}, MetadataError, "chunks"),
    ({"chunks": [2, 2]}, MetadataError, "chunks has 2 dimensions"),
    ({"dtype": "|O"}, UnsupportedError, "dtype.*object"),
    ({"dtype": "<f16"}, UnsupportedError, "dtype"),
    ({"dtype": "nonsense"}, UnsupportedError, "dtype"),
    ({"dtype": "|S0"}, UnsupportedError, "dtype.*no bytes"),
    ({"dtype": [["a", "<U0"]]}, UnsupportedError, r"dtype\[0\]"),
    ({"dtype": [["a", "<f8", [100, 1000]]]}, UnsupportedError, "dtype: a struct of 800000 bytes"),
    ({"order": "K"}, MetadataError, "order"),
    ({"fill_value": "NaNa"}, MetadataError, "fill_value"),
    ({"dtype": "|S2", "fill_value": "not base64!"}, MetadataError, "fill_value"),
    ({"compressor": {"id": "nosuch"}}, UnsupportedError, "compressor.*nosuch"),
    ({"compressor": {"id": "zfpy"}}, UnsupportedError, "compressor.*'zfpy'.*package"),
    ({"compressor": "zlib"}, MetadataError, "compressor"),
    ({"filters": [{"id": "vlen-utf8"}, {"id": "nosuch"}]}, UnsupportedError, r"filters\[1\]"),
    ({"filters": {"id": "delta"}}, MetadataError, "filters"),
    ({"filters": [{"id": "pickle"}]}, UnsupportedError, r"filters\[0\]: codec 'pickle' is refused"),
    ({"dtype": "|O", "filters": [{"id": "vlen-utf8"}, {"id": "pickle"}], "fill_value": ""}, UnsupportedError,
     r"filters\[1\].*pickle"),
    ({"dtype": "|O", "filters": [{"id": "vlen-utf8"}], "fill_value": [1]}, MetadataError, "fill_value"),
    ({"dimension_separator": "-"}, MetadataError, "dimension_separator"),
    ({"zarr_format": 3}, MetadataError, "zarr_format"),
])
def test_refusals_name_the_field(tmp_path, changes, error, pattern):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".zarray").write_text(json.dumps(v2_doc(**changes)))
    with pytest.raises(error, match=pattern) as info:
        read_metadata(LocalStore(str(tmp_path)), "a")
    assert "a/.zarray" in str(info.value)


def test_attributes_come_from_zattrs(tmp_path):
    z = create(tmp_path / "a", "<i4")
    z.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    meta = read_metadata(LocalStore(str(tmp_path)), "a")
    assert meta.attributes == {"_ARRAY_DIMENSIONS": ["y", "x"]} and meta.zarr_format == 2
    (tmp_path / "a" / ".zattrs").write_text("[1]")
    with pytest.raises(MetadataError, match=r"\.zattrs"):
        read_metadata(LocalStore(str(tmp_path)), "a")


def test_text_past_unicode_is_refused_and_nothing_changes(tmp_path):
    from zarrfs.errors import InvalidValueError

    z = create(tmp_path / "a", "<U2", fill_value="ab")
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        with pytest.raises(InvalidValueError, match="U\\+10FFFF"):
            view.write(8, np.array([0x41, 0x110000], "<u4").tobytes())
    assert read_all(tmp_path / "a") == np.full(z.shape, "ab", "<U2").tobytes()


def test_a_compressor_used_as_a_filter_is_bounded_too(tmp_path):
    import numcodecs

    from zarrfs.errors import CorruptChunkError

    create(tmp_path / "a", "|u1", compressor="none", filters=[numcodecs.Zlib(1)], shape=(16,), chunks=(16,))
    (tmp_path / "a" / "0").write_bytes(numcodecs.Zlib(1).encode(bytes(64 << 20)))
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        with pytest.raises(CorruptChunkError, match="more than the"):
            view.read(0, 16)


def test_recovery_data_of_a_v2_array_is_replayed(tmp_path):
    from zarrfs.engine import recovery

    create(tmp_path / "a", ">i4", compressor="zlib", order="F", fill_value=None)
    meta = read_metadata(LocalStore(str(tmp_path / "a")), "")
    piece = np.arange(6, dtype="<i4").reshape(2, 3)
    saved = recovery.save([str(tmp_path / "rec")], str(tmp_path / "a"), "", meta.document,
                          [((slice(1, 3), slice(2, 5)), piece, None)])
    assert json.loads((tmp_path / "rec" / saved.rsplit("/", 1)[-1] / "recovery.json").read_text())["zarr_format"] == 2
    assert recovery.replay(saved, recovery.load(saved), LocalStore(str(tmp_path / "a"))) == 1
    expected = np.zeros((5, 7), "<i4")
    expected[1:3, 2:5] = piece
    assert np.array_equal(zarr.open_array(str(tmp_path / "a"), zarr_format=2)[...], expected)


def test_a_chunk_a_filter_cannot_encode_is_a_typed_error_and_stays_written(tmp_path):
    from zarrfs.errors import EncodeError

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".zarray").write_text(json.dumps(v2_doc(dtype="|u1", shape=[3], chunks=[3], filters=[
        {"id": "shuffle", "elementsize": 2}])))  # 3 bytes do not shuffle in elements of 2
    view = zarrfs.open_raw(str(tmp_path / "a"), mode="r+")
    view.write(0, b"\x01\x02\x03")
    with pytest.raises(EncodeError, match="shuffle cannot encode"):
        view.flush()
    assert view.read(0, 3) == b"\x01\x02\x03"  # still there, still dirty
    assert list((tmp_path / "a").iterdir()) == [tmp_path / "a" / ".zarray"]


def test_an_object_array_with_fill_value_zero_reads_as_zarr_python_reads_it(tmp_path):
    from zarrfs.engine.array import open_array
    from zarrfs.engine.chunk_cache import ChunkCache
    from zarrfs.views.text import render

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".zarray").write_text(json.dumps(v2_doc(dtype="|O", filters=[{"id": "vlen-utf8"}])))
    expected = zarr.open_array(str(tmp_path / "a"), zarr_format=2)[...]
    store = LocalStore(str(tmp_path))
    array = open_array(store, "a", read_metadata(store, "a"), ChunkCache(1 << 20))
    assert render(array.read((slice(0, 4),)), "a") == "".join(f"{v}\n" for v in expected).encode() == b"0\n" * 4


@pytest.mark.parametrize("dtype", ["|O", "O"])
def test_an_object_array_with_a_vlen_filter_reads_in_either_spelling(tmp_path, dtype):
    """zarr-python 2 writes "|O" and reads any spelling NumPy takes ("O" too): both read as text."""
    from zarrfs.engine.array import open_array
    from zarrfs.engine.chunk_cache import ChunkCache

    strings = ["α", "b", "", "dd", "e f"]
    zarr.create_array(str(tmp_path / "a"), shape=(5,), chunks=(2,), dtype=str, zarr_format=2)[...] = strings
    doc = json.loads((tmp_path / "a" / ".zarray").read_text())
    assert doc["dtype"] == "|O" and doc["filters"] == [{"id": "vlen-utf8"}]
    doc["dtype"] = dtype
    (tmp_path / "a" / ".zarray").write_text(json.dumps(doc))
    store = LocalStore(str(tmp_path))
    meta = read_metadata(store, "a")
    assert meta.data_type.name == "vlen-utf8"
    assert open_array(store, "a", meta, ChunkCache(1 << 20)).read((slice(0, 5),)).tolist() == strings
