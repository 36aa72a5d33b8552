"""The NumPy data types zarr-python 3 writes in v3 (datetimes, fixed-length text and bytes, structs)
as flat fixed-size elements, both ways; variable-length ones refused by the flat API."""

import json
import warnings

import numpy as np
import pytest
import zarr

import zarrfs
from v2_layouts import flat, values
from zarrfs.errors import MetadataError, UnsupportedError

# A NumPy struct is written as zarr-extensions' "struct" by a zarr-python that has that type (3.2+:
# Python 3.12 and newer), as the older "structured" by 3.1 (Python 3.11); zarrfs reads both.
STRUCT = "struct" if "Struct" in zarr.core.dtype.__all__ else "structured"
TYPES = {"<M8[s]": "numpy.datetime64", "<M8[ns]": "numpy.datetime64", "<m8[ms]": "numpy.timedelta64",
         "<U4": "fixed_length_utf32", "|S3": "null_terminated_bytes", "|V2": "raw_bytes",
         "struct": STRUCT}


def create(path, dtype, **kwargs):
    dtype = np.dtype([("a", "<i2"), ("b", "<f4"), ("c", "|S2")]) if dtype == "struct" else np.dtype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.create_array(str(path), shape=(5, 6), chunks=(2, 4), dtype=dtype, **kwargs)


@pytest.mark.parametrize("dtype", sorted(TYPES))
def test_reads_and_writes_numpy_types(tmp_path, dtype):
    rng = np.random.default_rng(7)
    z = create(tmp_path / "a", dtype)
    assert json.loads((tmp_path / "a" / "zarr.json").read_text())["data_type"]["name"] == TYPES[dtype]
    v = values(z.dtype, z.shape, rng)
    z[2:, :] = v[2:, :]
    expected = np.asarray(z[...], dtype=z.dtype)
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        assert view.read(0, view.size) == flat(expected)
        new = values(z.dtype, z.shape, rng)
        view.write(0, flat(new)[:7 * z.dtype.itemsize])  # the first seven elements
    expected.reshape(-1)[:7] = new.reshape(-1)[:7]
    assert flat(np.asarray(zarr.open_array(str(tmp_path / "a"))[...], dtype=z.dtype)) == flat(expected)


def test_sidecar_is_honest(tmp_path):
    from zarrfs.fs.hierarchy import Hierarchy

    create(tmp_path / "t" / "when", "<M8[ms]")
    create(tmp_path / "t" / "name", "<U4")
    create(tmp_path / "t" / "rec", "struct")
    zarr.open_group(str(tmp_path / "t"), mode="a")
    h = Hierarchy(zarrfs.stores.local.LocalStore(str(tmp_path / "t")))
    side = {n: json.loads(h.content(h.lookup(f"/{n}.json"))) for n in ("when", "name", "rec")}
    assert side["when"]["dtype"] == "<M8[ms]" and side["when"]["datetime_unit"] == "ms"
    assert side["when"]["data_type"] == "numpy.datetime64" and side["when"]["itemsize"] == 8
    assert side["name"]["dtype"] == "<U4" and side["name"]["itemsize"] == 16
    assert side["rec"]["dtype"] == [["a", "<i2"], ["b", "<f4"], ["c", "|S2"]] and side["rec"]["itemsize"] == 8
    assert np.dtype([tuple(f) for f in side["rec"]["dtype"]]).itemsize == 8


def test_bool_fill_value_zero_and_one_read_as_zarr_python_reads_them(tmp_path):
    for fill in (0, 1):
        zarr.create_array(str(tmp_path / f"b{fill}"), shape=(4,), chunks=(2,), dtype="bool")
        doc = json.loads((tmp_path / f"b{fill}" / "zarr.json").read_text())
        doc["fill_value"] = fill
        (tmp_path / f"b{fill}" / "zarr.json").write_text(json.dumps(doc))
        expected = np.asarray(zarr.open_array(str(tmp_path / f"b{fill}"))[...])
        assert expected.tolist() == [bool(fill)] * 4
        with zarrfs.open_raw(str(tmp_path / f"b{fill}")) as view:
            assert view.read(0, 4) == bytes([fill]) * 4


def test_variable_length_arrays_are_not_flat(tmp_path):
    zarr.create_array(str(tmp_path / "s"), shape=(3,), chunks=(2,), dtype=str)
    with pytest.raises(UnsupportedError, match="variable-length.*text"):
        zarrfs.open_raw(str(tmp_path / "s"))


@pytest.mark.parametrize("data_type", ["|O", "O"])
def test_a_v2_object_dtype_is_no_v3_data_type(tmp_path, data_type):
    zarr.create_array(str(tmp_path / "s"), shape=(3,), chunks=(2,), dtype=str)
    doc = json.loads((tmp_path / "s" / "zarr.json").read_text())
    doc["data_type"] = data_type
    (tmp_path / "s" / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=r"zarr\.json: data_type: '\|?O' is a Zarr v2 dtype, not a v3 data type"):
        zarrfs.open_raw(str(tmp_path / "s"))


@pytest.mark.parametrize("dtype", ["<f4", "<c8", "|b1", "<i8", "<U3", "|V6", "<M8[s]"])
def test_a_chunk_is_all_fill_value_only_when_every_element_is(dtype):
    """Whether a chunk need not be stored: a chunk that differs from the fill value in any one
    element, first, last or inside, is not all fill value (the ends are looked at first)."""
    from zarrfs.format.data_types import fill_is_all

    fill = np.zeros((), dtype)
    other = np.frombuffer(bytes(range(1, np.dtype(dtype).itemsize + 1)), dtype)[0]
    for shape in [(5,), (3, 4), (2, 3, 2)]:
        chunk = np.zeros(shape, dtype)
        assert fill_is_all(chunk, fill)
        for index in [(0,) * len(shape), tuple(n - 1 for n in shape), tuple(n // 2 for n in shape)]:
            changed = chunk.copy()
            changed[index] = other
            assert not fill_is_all(changed, fill), (shape, index)
