"""Zarr v2 and mixed v2/v3 hierarchies as the file system shows them, asked of the core without
a mount (core.py); start-up messages that say which format a refused store is, from the command."""

import errno
import io
import json
import os
import subprocess

import numpy as np
import pytest
import zarr

from core import core_of
from mounting import ZARRFS
from v2_layouts import create


def mixed_tree(root):
    """A v3 root group with a v3 array and a v2 group holding v2 arrays (zarr-python 3 allows it)."""
    group = zarr.open_group(str(root), mode="w")
    group.create_array("v3", shape=(6,), chunks=(4,), dtype="int32")[...] = np.arange(6)
    legacy = zarr.open_group(str(root / "legacy"), mode="w", zarr_format=2)
    legacy.attrs["title"] = "old data"
    z = create(root / "legacy" / "temp", ">f4", compressor="blosc-lz4-auto", order="F", separator="/")
    z[...] = np.arange(35, dtype=">f4").reshape(5, 7)
    z.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    t = create(root / "legacy" / "when", "<M8[ms]", shape=(3,), chunks=(2,), fill_value=None)
    t[:2] = np.array(["2020-01-01", "2021-06-30"], "M8[ms]")
    return root


def test_mixed_tree_lists_reads_and_writes(tmp_path):
    source = mixed_tree(tmp_path / "data.zarr")
    with core_of(source, tmp_path) as c:
        assert sorted(c.listdir()) == ["legacy", "v3.bin", "v3.bin.hdr", "v3.bin.nhdr", "v3.json", "v3.mhd", "v3.npy",
                                       "v3.vrt", "zarr.h5", "zarr.json", "zarr.nc"]
        assert sorted(c.listdir("/legacy")) == [".zattrs", ".zgroup", "temp.bin", "temp.bin.hdr", "temp.bin.nhdr",
                                                "temp.json", "temp.mhd", "temp.npy", "temp.tif", "temp.vrt", "when.bin",
                                                "when.json", "when.npy", "zarr.h5", "zarr.nc"]  # datetimes: .npy only
        assert json.loads(c.read_text("/legacy/.zattrs")) == {"title": "old data"}
        assert json.loads(c.read_text("/legacy/.zgroup"))["zarr_format"] == 2
        assert c.read_bytes("/v3.bin") == np.arange(6, dtype="<i4").tobytes()
        assert c.read_bytes("/legacy/temp.bin") == np.arange(35, dtype="<f4").tobytes()
        sidecar = json.loads(c.read_text("/legacy/temp.json"))
        assert sidecar["zarr_format"] == 2 and sidecar["dtype"] == "<f4" and sidecar["data_type"] == ">f4"
        assert sidecar["dimension_names"] == ["y", "x"] and sidecar["shape"] == [5, 7]
        assert json.loads(c.read_text("/v3.json"))["zarr_format"] == 3
        when = json.loads(c.read_text("/legacy/when.json"))
        assert when["dtype"] == "<M8[ms]" and when["datetime_unit"] == "ms"
        got = np.frombuffer(c.read_bytes("/legacy/when.bin"), "<M8[ms]")
        assert str(got[1]) == "2021-06-30T00:00:00.000" and np.isnat(got[2])
        npy = np.load(io.BytesIO(c.read_bytes("/legacy/when.npy")))
        assert np.array_equal(npy, got, equal_nan=True)  # typed, with its unit
        fh = c.open("/legacy/temp.bin", os.O_RDWR)
        c.pwrite(fh, np.array([-1.5, -2.5], "<f4").tobytes(), 4 * 8)
        c.close(fh)
    expected = np.arange(35, dtype="f4")
    expected[8:10] = [-1.5, -2.5]
    got = zarr.open_array(str(source / "legacy" / "temp"), zarr_format=2)[...]
    assert got.dtype == ">f4" and np.array_equal(got.reshape(-1), expected)


def test_whole_v2_store(tmp_path):
    root = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    z = root.create_array("a", shape=(4, 4), chunks=(3, 3), dtype="<u2", compressors=None)
    z[...] = np.arange(16).reshape(4, 4)
    with core_of(tmp_path / "v2.zarr", tmp_path, "ro") as c:
        assert sorted(c.listdir()) == [".zattrs", ".zgroup", "a.bin", "a.bin.hdr", "a.bin.nhdr", "a.json", "a.mhd",
                                       "a.npy", "a.tif", "a.vrt", "zarr.h5", "zarr.nc"]  # views for v2 arrays too
        assert c.read_bytes("/a.bin") == np.arange(16, dtype="<u2").tobytes()


def run_zarrfs(*args):
    return subprocess.run([ZARRFS, *map(str, args)], capture_output=True, text=True, timeout=30)


def test_a_v2_store_that_cannot_be_served_says_so(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".zgroup").write_text('{"zarr_format": 3}')
    (tmp_path / "mnt").mkdir()
    result = run_zarrfs(tmp_path / "bad", tmp_path / "mnt")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "a Zarr v2 store that cannot be served" in lines[0] and ".zgroup: zarr_format" in lines[0]
    assert not os.path.ismount(tmp_path / "mnt")


@pytest.mark.parametrize("fmt", ["v2 dtype", "v3 data_type", "v3 codec"])
def test_unsupported_root_is_listed_and_fails_to_open_with_one_log_line(tmp_path, fmt):
    source = tmp_path / "arr"
    if fmt == "v2 dtype":
        create(source, "<i4")
        doc = json.loads((source / ".zarray").read_text())
        doc["dtype"], field = "|O", ".zarray: dtype"
        (source / ".zarray").write_text(json.dumps(doc))
    else:
        zarr.create_array(str(source), shape=(4,), chunks=(2,), dtype="int8")
        doc = json.loads((source / "zarr.json").read_text())
        if fmt == "v3 data_type":
            doc["data_type"], field = "float128", "zarr.json: data_type"
        else:
            doc["codecs"].append({"name": "numcodecs.nosuch"})
            field = f"zarr.json: codecs[{len(doc['codecs']) - 1}] (numcodecs.nosuch): unsupported codec"
        (source / "zarr.json").write_text(json.dumps(doc))
    with core_of(source, tmp_path, "ro") as c:
        assert sorted(c.listdir()) == ["arr.bin", "arr.json"]
        for _ in range(2):
            with pytest.raises(OSError) as info:
                c.open("/arr.bin", os.O_RDONLY)
            assert info.value.errno == errno.EOPNOTSUPP
        lines = [line for line in c.log().splitlines() if field in line]  # once: not twice
    assert len(lines) == 1 and "WARNING" in lines[0], c.log()


def test_v2_documents_outside_the_store_are_not_followed(tmp_path):
    root = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    root.create_array("good", shape=(2,), chunks=(2,), dtype="|u1", compressors=None)[...] = [1, 2]
    outside = tmp_path / "outside"
    create(outside, "<i4")
    (tmp_path / "v2.zarr" / "escape").mkdir()
    os.symlink(outside / ".zarray", tmp_path / "v2.zarr" / "escape" / ".zarray")
    create(tmp_path / "v2.zarr" / "attrs", "|u1", shape=(2,), chunks=(2,))
    (tmp_path / "v2.zarr" / "attrs" / ".zattrs").unlink()
    os.symlink(outside / ".zattrs", tmp_path / "v2.zarr" / "attrs" / ".zattrs")
    with core_of(tmp_path / "v2.zarr", tmp_path, "ro") as c:
        assert {"escape.bin", "attrs.bin", "good.bin"} <= set(c.listdir())
        for name in ("escape.bin", "attrs.bin"):
            with pytest.raises(OSError) as info:
                c.open(f"/{name}", os.O_RDONLY)
            assert info.value.errno == errno.EACCES, name
        assert c.read_bytes("/good.bin") == b"\x01\x02"
        assert "escape/.zarray" in c.log() and "attrs/.zattrs" in c.log()
