"""zarr.h5 and zarr.nc (the hdf5 view), opened through a real mount by h5py, netCDF4, h5netcdf,
xarray and Debian's ncdump, h5dump and h5ls: every array of every data type in 2-D to 5-D,
sharded, with fill-value holes, v2 and v3, reads exactly as zarr-python reads it. Which files
-o views makes, what h5py reads of a file alone, the sizes group files list against the bytes
they read, and the bound of a view, are asked of the core without a mount (core.py)."""

import errno
import io
import json
import os
import shutil
import subprocess
import time
import warnings

import h5netcdf
import h5py
import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from core import core_of
from helpers import CountingStore, delete_array
from mounting import mounted
from zarr_layouts import NUMERIC, random_values
from zarrfs.fs.hierarchy import Hierarchy
from zarrfs.stores.local import LocalStore
from zarrfs.views import hdf5

SHAPES = {2: (5, 7), 3: (3, 5, 7), 4: (2, 3, 5, 7), 5: (2, 2, 3, 5, 7)}
DIMS = ("t", "c", "z", "y", "x")
TYPES = [t for t in NUMERIC if t != "float16"]
ROOT_ATTRIBUTES = {"title": "matrix", "count": 3, "ratio": 0.5, "flags": [True, False], "names": ["a", "bc"],
                   "nested": {"k": [1, 2]}, "nothing": None, "mixed": [1, "a"], "huge": 2 ** 70, "empty": []}


def build_v3(root) -> dict[str, np.ndarray]:
    """{store path: values} of every array an HDF5 view holds."""
    rng = np.random.default_rng(5)
    g = zarr.open_group(str(root), mode="w", zarr_format=3)
    g.attrs.update(ROOT_ATTRIBUTES)
    types = g.create_group("types")
    expected = {}
    for dtype in TYPES:
        for ndim, shape in SHAPES.items():
            name = f"{dtype}_{ndim}d"
            a = types.create_array(name, shape=shape, chunks=(2,) * ndim, dtype=dtype, dimension_names=DIMS[-ndim:])
            a.attrs.update({"long_name": name, "scale": [1.5, 2]})
            values = random_values(dtype, shape, rng)
            if np.dtype(dtype).kind == "f":
                values = rng.normal(size=shape).astype(dtype)
            elif np.dtype(dtype).kind == "c":  # real and imaginary parts differ: their order shows
                values = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
            a[...] = values
            expected[f"types/{name}"] = a[...]
    x = types.create_array("x", shape=(7,), chunks=(4,), dtype="f8", dimension_names=("x",))
    x[...] = np.arange(7) * 0.5
    expected["types/x"] = x[...]
    types.create_array("half", shape=(3,), chunks=(2,), dtype="f2")
    labels = types.create_array("labels", shape=(2,), chunks=(2,), dtype=str)
    labels[...] = np.array(["a", "b"], dtype=object)
    special = g.create_group("special")
    sharded = special.create_array("sharded", shape=(8, 12), chunks=(2, 3), shards=(4, 6), dtype="i4",
                                   dimension_names=("a", "b"))
    sharded[...] = np.arange(96, dtype="i4").reshape(8, 12)
    holes = special.create_array("holes", shape=(6, 6), chunks=(2, 2), dtype="f4", fill_value=7.5,
                                 dimension_names=("a_", "b_"))
    holes[2:4, 2:4] = 1.0  # one chunk stored: the others are holes, filled with 7.5
    clash = special.create_array("clash", shape=(5,), chunks=(5,), dtype="u1", dimension_names=("b",))
    clash[...] = np.arange(5)
    for name in ("sharded", "holes", "clash"):
        expected[f"special/{name}"] = special[name][...]
    special.create_group("empty")
    edge = g.create_group("edge")
    scalar = edge.create_array("scalar", shape=(), dtype="f8")
    scalar[...] = 3.5
    edge.create_array("nothing", shape=(0, 4), chunks=(1, 4), dtype="i2", dimension_names=("n", "m"))
    m = edge.create_array("m", shape=(3,), chunks=(3,), dtype="u4", dimension_names=("m",),
                          attributes={"CLASS": "mine", "NAME": "mine too", "units": "m", "": "no name",
                                      "n" * 70_000: "a name HDF5 refuses", "_FillValue": "NaN", "text": "a\0b"})
    m[...] = [1, 2, 3]
    k = edge.create_array("k", shape=(2, 2), chunks=(2, 2), dtype="i1", dimension_names=("k", "j"))
    slash = edge.create_array("slash", shape=(6,), chunks=(6,), dtype="i1", dimension_names=("a/b",))
    slash[...] = 1
    k[...] = [[1, 2], [3, 4]]
    for name in ("scalar", "nothing", "m", "k", "slash"):
        expected[f"edge/{name}"] = edge[name][...]
    return expected


def build_v2(root) -> dict[str, np.ndarray]:
    g = zarr.open_group(str(root), mode="w", zarr_format=2)
    g.attrs["source"] = "v2"
    expected = {}
    for dtype, fill in (("f8", -1.0), ("i2", -99), ("bool", False), ("c16", 0), ("u8", 3)):
        a = g.create_array(f"a_{dtype}", shape=(4, 6), chunks=(2, 3), dtype=dtype, fill_value=fill,
                           attributes={"_ARRAY_DIMENSIONS": ["row", "col"]})
        a[:2, :3] = np.ones((2, 3), dtype=dtype)  # the rest is fill value
        expected[f"a_{dtype}"] = a[...]
    for name, dtype in (("fixed_text", "<U4"), ("fixed_bytes", "|S4")):  # no netCDF type: left out
        g.create_array(name, shape=(2,), chunks=(2,), dtype=dtype)
    return expected


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("h5")
    return {"v3": (base / "v3.zarr", build_v3(base / "v3.zarr")), "v2": (base / "v2.zarr", build_v2(base / "v2.zarr"))}


@pytest.fixture(scope="module")
def mounts(stores, tmp_path_factory):
    with mounted(stores["v3"][0], tmp_path_factory.mktemp("m3"), "ro") as m3, \
            mounted(stores["v2"][0], tmp_path_factory.mktemp("m2"), "ro") as m2:
        yield {"v3": m3, "v2": m2}


def as_stored(values: np.ndarray) -> np.ndarray:
    """The values as the HDF5 dataset holds them: bool as int8 0/1."""
    return values.astype("i1") if values.dtype == bool else values


def from_compound(values: np.ndarray) -> np.ndarray:
    """complex from the committed {r, i} compound readers without complex support return."""
    if values.dtype.names == ("r", "i"):
        return values["r"] + 1j * values["i"]
    return values


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_h5py_reads_every_dataset_attribute_and_group(mounts, stores, version):
    mnt, expected = mounts[version], stores[version][1]
    assert (mnt / "zarr.h5").read_bytes() == (mnt / "zarr.nc").read_bytes()
    with h5py.File(mnt / "zarr.h5", "r") as f:
        datasets = []
        f.visititems(lambda name, obj: datasets.append(name) if isinstance(obj, h5py.Dataset) else None)
        scales = {n for n in datasets if f[n].attrs.get("CLASS") == b"DIMENSION_SCALE" and n not in expected}
        assert set(datasets) - scales == set(expected)
        for path, values in expected.items():
            dataset = f[path]
            assert dataset.shape == values.shape, path
            np.testing.assert_array_equal(from_compound(dataset[...]), as_stored(values), err_msg=path)
            assert dataset.id.get_create_plist().get_layout() == h5py.h5d.CONTIGUOUS
            if values.dtype == bool:
                assert dataset.attrs["dtype"] == b"bool"  # NC_CHAR: h5py reads fixed-length strings as bytes
            if values.dtype.kind == "c":
                stored = dataset.id.get_type()  # h5py shows the compound as complex
                assert stored.get_class() == h5py.h5t.COMPOUND and stored.committed()
                assert [stored.get_member_name(i) for i in range(2)] == [b"r", b"i"]
        if version == "v3":
            check_v3_metadata(f)
        else:
            assert f.attrs["source"] == b"v2"
            assert list(f.attrs["zarrfs_omitted"]) == ["fixed_bytes", "fixed_text"]
            assert f["a_i2"].attrs["_FillValue"] == -99 and f["a_f8"].attrs["_FillValue"] == -1.0
            assert [d.label or d[0].name for d in f["a_f8"].dims] == ["/row", "/col"]


def check_v3_metadata(f):
    attrs = dict(f.attrs)
    assert attrs["title"] == b"matrix" and attrs["count"] == 3 and attrs["ratio"] == 0.5
    assert list(attrs["flags"]) == [1, 0] and list(attrs["names"]) == ["a", "bc"]
    for key in ("nested", "nothing", "mixed", "huge", "empty"):  # no HDF5 type holds them: JSON text
        assert json.loads(attrs[key]) == ROOT_ATTRIBUTES[key], key
    assert set(f) >= {"types", "special", "complex64", "complex128"}
    assert isinstance(f["special/empty"], h5py.Group) and not len(f["special/empty"])
    assert list(f["types"].attrs["zarrfs_omitted"]) == ["half", "labels"]
    assert "zarrfs_omitted" not in f.attrs
    variable = f["types/int16_4d"]
    assert variable.attrs["long_name"] == b"int16_4d"
    np.testing.assert_array_equal(variable.attrs["scale"], [1.5, 2.0])
    assert [d[0].name for d in variable.dims] == ["/types/c", "/types/z", "/types/y", "/types/x"]
    assert f["types/x"].attrs["CLASS"] == b"DIMENSION_SCALE"  # the coordinate variable is the scale
    assert "_FillValue" not in f["special/holes"].attrs  # a v3 fill_value is no _FillValue
    # clash, first in name order, keeps b (length 5); sharded's b of length 12 becomes b_12
    assert f["special/clash"].dims[0][0].name == "/special/b"
    assert [d[0].name for d in f["special/sharded"].dims] == ["/special/a", "/special/b_12"]


def test_netcdf4_sees_named_dimensions_and_values(mounts, stores):
    expected = stores["v3"][1]
    with netCDF4.Dataset(mounts["v3"] / "zarr.nc", "r") as nc:  # complex: as the {r, i} compound
        nc.set_auto_maskandscale(False)
        types = nc.groups["types"]
        assert {name: len(d) for name, d in types.dimensions.items()} == {"t": 2, "c": 2, "z": 3, "y": 5, "x": 7}
        for path, values in expected.items():
            group, name = path.split("/")
            variable = nc.groups[group].variables[name]
            dims = DIMS[-values.ndim:] if group == "types" else None
            if dims is not None:
                assert variable.dimensions == dims, path
            np.testing.assert_array_equal(from_compound(variable[...]), as_stored(values), err_msg=path)
        assert set(nc.groups["special"].groups) == {"empty"}
        assert nc.groups["special"].dimensions["b_12"].size == 12
        assert nc.getncattr("title") == "matrix"
        assert list(types.getncattr("zarrfs_omitted")) == ["half", "labels"] or \
            types.getncattr("zarrfs_omitted") == ["half", "labels"]


def test_h5netcdf_sees_named_dimensions_and_values(mounts, stores):
    for version in ("v3", "v2"):
        with h5netcdf.File(mounts[version] / "zarr.nc", "r") as f:
            for path, values in stores[version][1].items():
                variable = f[path]
                if version == "v2":
                    assert variable.dimensions == ("row", "col")
                np.testing.assert_array_equal(from_compound(np.asarray(variable[...])), as_stored(values), err_msg=path)


def xarray_dataset():
    rng = np.random.default_rng(1)
    ds = xr.Dataset(
        {"temperature": (("time", "station"), rng.standard_normal((5, 3)).astype("f4")),
         "counts": (("time", "station", "level"), rng.integers(0, 100, (5, 3, 2)).astype("i4")),
         "flag": (("time",), np.array([True, False, True, True, False])),
         "wind": (("station", "level"), rng.standard_normal((3, 2)))},
        coords={"time": pd.date_range("2020-01-01", periods=5), "station": [10, 20, 30],
                "height": ("station", [1.5, 2.0, 3.25]), "level": [0.5, 1.5]},
        attrs={"title": "stations", "version": 2})
    ds["temperature"].encoding = {"dtype": "int16", "scale_factor": 0.01, "_FillValue": -9999}
    ds["temperature"][1, 1] = np.nan
    ds["wind"].attrs = {"units": "m/s"}
    return ds


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_xarray_reads_the_same_dataset_as_open_zarr(tmp_path, zarr_format, engine):
    store = tmp_path / "ds.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xarray_dataset().to_zarr(store, zarr_format=zarr_format, mode="w")
        expected = xr.open_zarr(store).load()
    with mounted(store, tmp_path, "ro") as m:
        with xr.open_dataset(m / "zarr.nc", engine=engine) as ds:
            xr.testing.assert_identical(ds.load(), expected)


def test_debian_tools_read_the_file(mounts):
    path = mounts["v3"] / "zarr.nc"
    header = run(["ncdump", "-h", str(path)])
    assert "group: types {" in header and "int64 int64_5d(t, c, z, y, x) ;" in header
    assert "byte bool_2d(y, x) ;" in header and 'bool_2d:dtype = "bool" ;' in header
    assert "complex128 complex128_3d(z, y, x) ;" in header and "group: empty {" in header
    assert "float holes(a_, b_) ;" in header and 'zarrfs_omitted = "half", "labels" ;' in header
    data = run(["ncdump", "-v", "/special/sharded", str(path)])
    assert "sharded =\n  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,\n  12, 13," in data
    listing = run(["h5ls", "-r", str(mounts["v3"] / "zarr.h5")])
    assert "/types/uint16_5d         Dataset {2, 2, 3, 5, 7}" in listing and "/special/empty" in listing
    dump = run(["h5dump", "-H", str(mounts["v2"] / "zarr.h5")])
    assert 'DATASET "a_c16"' in dump and 'ATTRIBUTE "_FillValue"' in dump


def run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "error" not in result.stderr.lower(), result.stderr
    return result.stdout


def test_every_group_has_its_own_file_read_only(mounts):
    mnt = mounts["v3"]
    for directory in ("", "types", "special", "special/empty"):
        for name in ("zarr.h5", "zarr.nc"):
            assert name in os.listdir(mnt / directory)
    with h5py.File(mnt / "special" / "zarr.h5", "r") as f:
        assert set(f) == {"sharded", "holes", "clash", "empty", "a", "b", "a_", "b_", "b_12"}
    with h5py.File(mnt / "special" / "empty" / "zarr.h5", "r") as f:
        assert not len(f)
    assert os.stat(mnt / "zarr.h5").st_mode & 0o777 == 0o444
    with pytest.raises(OSError) as e:
        open(mnt / "zarr.h5", "r+b")
    assert e.value.errno in (errno.EROFS, errno.EACCES)


def test_writes_below_the_group_show_in_its_file_and_new_arrays_in_its_layout(tmp_path):
    store = tmp_path / "w.zarr"
    g = zarr.open_group(str(store), mode="w")
    a = g.create_array("a", shape=(4, 4), chunks=(2, 2), dtype="i4", dimension_names=("y", "x"))
    a[...] = 1
    with mounted(store, tmp_path) as m:
        with h5py.File(m / "zarr.h5", "r") as f:
            assert f["a"][0, 0] == 1
        with open(m / "a.bin", "r+b") as out:
            out.write(np.full(16, 5, "<i4").tobytes())
        with h5py.File(m / "zarr.h5", "r") as f:
            assert (f["a"][...] == 5).all()  # the kernel's pages of zarr.h5 were dropped
        b = zarr.open_group(str(store), mode="a").create_array("b", shape=(3,), chunks=(3,), dtype="f8")
        b[...] = [1, 2, 3]
        with h5py.File(m / "zarr.h5", "r") as f:
            assert list(f["b"][...]) == [1, 2, 3] and (f["a"][...] == 5).all()
        assert os.path.getsize(m / "zarr.h5") == os.path.getsize(m / "zarr.nc")
        for change in (lambda: os.rename(m / "zarr.h5", m / "x.h5"), lambda: open(m / "zarr.nc", "r+b")):
            with pytest.raises(OSError) as e:
                change()
            assert e.value.errno in (errno.EPERM, errno.EACCES)
        os.unlink(m / "zarr.nc")  # removed alone, a group file is hidden and deletes nothing (it goes with its group)
        assert "zarr.nc" not in os.listdir(m.path) and (m / "zarr.h5").exists() and (m / "b.bin").exists()
        os.mkdir(m / "sub")
        with h5py.File(m / "zarr.h5", "r") as f:  # a group made through the mount: the file is made anew
            assert isinstance(f["sub"], h5py.Group)
        os.rmdir(m / "sub")  # its group files do not keep it from being empty
        assert not (store / "sub").exists()
        np.save(tmp_path / "c.npy", np.arange(6, dtype="<i2"))
        subprocess.run(["cp", str(tmp_path / "c.npy"), str(m.path)], check=True)  # an array made through the mount
        with h5py.File(m / "zarr.h5", "r") as f:
            assert "sub" not in f and list(f["c"][...]) == list(range(6))


def test_views_none_and_views_without_hdf5_show_no_group_files(stores, tmp_path):
    for i, views in enumerate(("views=none", "views=npy", "views=hdf5")):
        with core_of(stores["v2"][0], tmp_path, "ro", views, name=f"core{i}") as c:
            names = set(c.listdir())
            assert ("zarr.h5" in names) == (views == "views=hdf5"), views
            assert ("a_f8.npy" in names) == (views == "views=npy"), views


def test_without_h5py_the_view_is_off_with_one_line_naming_the_extra(stores, tmp_path):
    shadow = tmp_path / "shadow" / "h5py"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('h5py is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    with mounted(stores["v2"][0], tmp_path, "ro", env=env) as m:
        names = set(os.listdir(m.path))
        assert "zarr.h5" not in names and "a_f8.npy" in names
        assert m.settled_log().count("pip install 'zarrfs[hdf5]'") == 1
    result = subprocess.run([shutil.which("zarrfs") or "zarrfs", str(stores["v2"][0]), str(tmp_path / "mnt"),
                             "-o", "views=hdf5"], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode != 0 and "zarrfs[hdf5]" in result.stderr


def test_a_hierarchy_beyond_the_bound_fails_only_its_view(stores, tmp_path):
    with core_of(stores["v3"][0], tmp_path, "ro", "header_cache_size=4K") as c:
        with pytest.raises(OSError) as e:
            c.read_bytes("/zarr.h5")
        assert e.value.errno == errno.EFBIG
        assert "zarr.h5: no HDF5 view" in c.log() and "header_cache_size" in c.log()
        with c.file("/special/empty/zarr.h5") as file, h5py.File(file, "r") as f:  # small enough
            assert not len(f)
        assert c.stat("/types/int8_2d.bin")["st_size"] == 35


def group_files(c) -> list[str]:
    """Every zarr.h5 of the core, as `find -name zarr.h5` finds them."""
    return [path for path in c.files() if os.path.basename(path) == "zarr.h5"]


def test_every_group_file_lists_the_size_it_reads_before_it_is_first_opened(stores, tmp_path):
    with core_of(stores["v3"][0], tmp_path, "ro") as c:
        listed = {path: c.stat(path)["st_size"] for path in group_files(c)}  # no file opened yet
        assert len(listed) > 3
        for path, size in listed.items():
            data = c.read_bytes(path)
            assert data[:8] == b"\x89HDF\r\n\x1a\n" and len(data) == size, path
            with c.file(path.removesuffix(".h5") + ".nc") as f:
                assert f.raw.size == size and f.read() == data  # its size as fstat sees it once open
        with c.file("/zarr.h5") as file, h5py.File(file, "r") as f:  # the zeros after HDF5's end are no concern of readers
            assert len(f) > 0
        assert "listed before it was made" not in c.log()  # the bound held: no size moved


def test_a_file_made_larger_than_its_bound_lists_the_size_it_reads(tmp_path, monkeypatch):
    """Should h5py write more than size_bound allowed for, the file is shown whole: every stat
    after the open says the size read, since a kernel reads no further than the size it holds."""
    monkeypatch.setattr(hdf5, "BOUND_BASE", 0)  # a bound too small for any file
    monkeypatch.setattr(hdf5, "BOUND_MEMBER", 0)
    store = tmp_path / "s.zarr"
    zarr.open_group(str(store), mode="w").create_array("x", shape=(3,), dtype="f8", attributes={"units": "K"})
    with core_of(store, tmp_path, "ro") as c:
        listed = c.stat("/zarr.h5")["st_size"]
        data = c.read_bytes("/zarr.h5")
        assert len(data) > listed and "listed before it was made" in c.log()
        assert c.stat("/zarr.h5")["st_size"] == c.stat("/zarr.nc")["st_size"] == len(data)
        assert [name for name in c.listdir("/") if name.startswith("zarr.")]  # a listing, as ls -l stats after it
        assert c.stat("/zarr.h5")["st_size"] == len(data)
        with h5py.File(io.BytesIO(data), "r") as f:
            assert f["x"].attrs["units"] == b"K"


def test_the_bound_holds_attributes_whose_hdf5_form_outgrows_their_json(tmp_path):
    """A list of small numbers is 8 bytes an element in HDF5 ("0, " in JSON), a list of short
    strings a reference and a heap object each: the size listed is still the size read."""
    store = tmp_path / "s.zarr"
    group = zarr.open_group(str(store), mode="w")
    group.create_array("x", shape=(3,), dtype="f8", attributes={"counts": [0] * 10000, "labels": ["a"] * 2000})
    group.create_group("g", attributes={"names": ["b"] * 3000})
    with core_of(store, tmp_path, "ro") as c:
        listed = {path: c.stat(path)["st_size"] for path in ("/zarr.h5", "/g/zarr.h5")}
        for path, size in listed.items():
            data = c.read_bytes(path)
            assert len(data) == size == c.stat(path)["st_size"], path
        with h5py.File(io.BytesIO(c.read_bytes("/zarr.h5")), "r") as f:
            assert list(f["x"].attrs["counts"]) == [0] * 10000 and len(f["x"].attrs["labels"]) == 2000
            assert len(f["g"].attrs["names"]) == 3000
        assert "listed before it was made" not in c.log()


def test_a_file_made_after_another_programs_change_lists_the_size_it_reads(tmp_path):
    """A group's size is kept 30 s, but a file made from nodes another program changed meanwhile
    is not the size kept: every stat after the open shows the size read (a kernel reads no further)."""
    store = tmp_path / "s.zarr"
    group = zarr.open_group(str(store), mode="w")
    group.create_group("g").create_array("a", shape=(10,), dtype="f8")
    with core_of(store, tmp_path, "ro") as c:
        listed = [c.stat(path)["st_size"] for path in ("/zarr.h5", "/g/zarr.h5")]
        group["g"].create_array("b", shape=(100_000,), dtype="f8")  # another program
        for path, before in zip(("/g/zarr.h5", "/zarr.h5"), listed[::-1], strict=True):
            data = c.read_bytes(path)
            assert len(data) > before and c.stat(path)["st_size"] == len(data), path


def test_a_group_files_mtime_moves_on_when_the_mount_moves_or_deletes_an_array_below(tmp_path):
    """A node moved or deleted leaves no newer time in a store: the mount's own edit is the
    change time. A rename to a name as long keeps the size, so a backup goes by the mtime; and
    deleting the array with the newest data must not move the mtime back."""
    store = tmp_path / "s.zarr"
    group = zarr.open_group(str(store), mode="w")
    for name in ("a", "b"):
        group.create_array(f"g/{name}", shape=(10,), dtype="f8")[...] = 1.0
    with core_of(store, tmp_path) as c:
        def times():
            return [c.stat(path)["st_mtime"] for path in ("/zarr.h5", "/g/zarr.h5")]

        before, size = times(), c.stat("/g/zarr.h5")["st_size"]
        c.rename("/g/a.bin", "/g/c.bin")
        moved = times()
        assert c.stat("/g/zarr.h5")["st_size"] == size and all(m > b for m, b in zip(moved, before, strict=True))
        for name in [name for name in c.listdir("/g") if name.startswith("b.")]:
            c.unlink(f"/g/{name}")
        assert all(d > m for d, m in zip(times(), moved, strict=True))


def test_a_group_file_shows_the_size_of_its_nodes_after_an_array_below_is_deleted_made_or_moved(tmp_path):
    store = tmp_path / "g.zarr"
    root = zarr.open_group(str(store), mode="w")
    for name in ("a", "b"):
        root.create_array(f"g/{name}", shape=(300,), chunks=(100,), dtype="f8")[...] = 1.0
    with mounted(store, tmp_path) as m:
        sizes = [(m / "zarr.h5").stat().st_size, (m / "g" / "zarr.h5").stat().st_size]  # into the kernel's cache
        for change in (lambda: delete_array(m / "g", "b"),  # as rm b.*: an array goes with its last file
                       lambda: (m / "g" / "c.npy").write_bytes(npy_bytes(np.zeros(5000))),
                       lambda: os.rename(m / "g" / "a.bin", m / "g" / "renamed_far_longer.bin")):
            change()
            now = [(m / "zarr.h5").stat().st_size, (m / "g" / "zarr.h5").stat().st_size]
            assert now != sizes
            assert now == [len((m / "zarr.h5").read_bytes()), len((m / "g" / "zarr.h5").read_bytes())]
            sizes = now


def npy_bytes(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def test_file_managers_learn_the_types(mounts):
    assert os.getxattr(mounts["v2"] / "zarr.h5", "user.mime_type") == b"application/x-hdf5"
    assert os.getxattr(mounts["v2"] / "zarr.nc", "user.mime_type") == b"application/x-netcdf"


def test_scalars_empty_arrays_reserved_attributes_and_taken_dimension_names(mounts):
    with h5py.File(mounts["v3"] / "edge" / "zarr.h5", "r") as f:
        assert f["scalar"].shape == () and f["scalar"][()] == 3.5
        assert f["nothing"].shape == (0, 4)
        dims = {name: [d[0].name for d in f[name].dims] for name in ("nothing", "k", "slash")}
        # m is the coordinate variable of m (length 3: a scale itself), so nothing's m of length 4
        # is m_4; the 2-D k cannot be the coordinate variable of k, so its dimension k is k_2; a
        # name that cannot be an HDF5 link (a/b would be a group a) is a phony dimension
        assert dims == {"nothing": ["/n", "/m_4"], "k": ["/k_2", "/j"], "slash": ["/phony_dim_0"]}
        assert "a" not in f
        assert f["m"].attrs["CLASS"] == b"DIMENSION_SCALE" and f["m"].attrs["NAME"] == b"m"  # not the Zarr ones
        # names HDF5 cannot hold and a _FillValue with no value of the type are left out, the rest kept
        scale = {"CLASS", "NAME", "_Netcdf4Dimid"}  # written by HDF5 and for netCDF-4
        assert {k: v for k, v in f["m"].attrs.items() if k not in scale} == {"units": b"m", "text": json.dumps("a\0b").encode()}
    header = run(["ncdump", "-h", str(mounts["v3"] / "edge" / "zarr.nc")])
    assert "double scalar ;" in header and "short nothing(n, m_4) ;" in header and "byte k(k_2, j) ;" in header


def test_an_array_named_as_the_complex_type_keeps_its_name(tmp_path):
    store = tmp_path / "c.zarr"
    g = zarr.open_group(str(store), mode="w")
    for name, dtype in (("a", "c8"), ("complex64", "i2")):  # the type is committed first, at the root
        g.create_array(name, shape=(2,), chunks=(2,), dtype=dtype)[...] = [1, 2]
    with core_of(store, tmp_path, "ro") as c, c.file("/zarr.h5") as file, h5py.File(file, "r") as f:
        assert list(f["complex64"][...]) == [1, 2] and list(f["a"][...]) == [1, 2]
        assert isinstance(f["complex64_type"], h5py.Datatype)


def test_a_large_dataset_streams_from_an_aligned_offset(tmp_path):
    """Datasets of 1 MiB or more begin at a multiple of 1 MiB, so that the kernel's 1 MiB reads
    fall within one dataset and are answered by the array itself."""
    store = tmp_path / "big.zarr"
    g = zarr.open_group(str(store), mode="w")
    small = g.create_array("a_small", shape=(10,), chunks=(10,), dtype="u1")
    small[...] = np.arange(10)
    big = g.create_array("big", shape=(1024, 1000), chunks=(256, 500), shards=(512, 1000), dtype="f4",
                         fill_value=-1.0, dimension_names=("y", "x"))
    values = np.random.default_rng(2).normal(size=(1024, 1000)).astype("f4")
    values[512:] = -1.0  # its second shard is never stored: a hole of fill values
    big[:512] = values[:512]
    with core_of(store, tmp_path, "ro") as c:
        with c.file("/zarr.h5") as file, h5py.File(file, "r") as f:
            offset = f["big"].id.get_offset()
            assert offset % (1 << 20) == 0
            np.testing.assert_array_equal(f["big"][...], values)
            assert list(f["a_small"][...]) == list(range(10))
        with c.file("/zarr.h5") as f:  # 1 MiB reads, each within the dataset
            f.seek(offset)
            assert f.read(values.nbytes) == c.read_bytes("/big.bin")


def varied_hierarchy(root, seed: int) -> None:
    """Groups and arrays of every kind the HDF5 view writes or leaves out: many attributes of
    every JSON shape (more than 8: HDF5's dense storage), long names, groups of many members,
    named, shared and unnamed dimensions, types HDF5 holds and types it omits."""
    rng = np.random.default_rng(seed)
    values = [1, 2.5, "text" * 50, list(range(40)), {"a": [1, "b"]}, True, None, ["s", "tt"] * 9, "çé", 1e300]

    def attributes():
        return {f"k{'e' * int(rng.integers(0, 40))}{i}": values[int(rng.integers(len(values)))]
                for i in range(int(rng.choice([0, 1, 3, 9, 20])))}

    group = zarr.open_group(str(root), mode="w", zarr_format=3, attributes=attributes())
    groups = [group]
    for i in range(120):
        parent = groups[int(rng.integers(len(groups)))]
        name = f"{rng.choice(['lat', 'lon', 'time', 'x' * int(rng.integers(1, 60))])}{i}"
        if rng.random() < 0.15:
            groups.append(parent.create_group(name, attributes=attributes()))
            continue
        ndim = int(rng.integers(0, 4))
        shape = tuple(int(rng.choice([1, 3, 10, 40])) for _ in range(ndim))
        dims = [str(rng.choice(["time", "lat", "lon", f"d{i}"])) for _ in range(ndim)] if rng.random() < 0.5 else None
        dtype = str(rng.choice(["f8", "f4", "i1", "u2", "c8", "bool", "i8", "f2", "M8[s]"]))
        parent.create_array(name, shape=shape, chunks=shape or "auto", dtype=dtype, dimension_names=dims,
                            attributes=attributes(), fill_value=0)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_size_listed_holds_every_varied_hierarchy(tmp_path, seed):
    """The size a listing shows is a bound worked out from metadata (hdf5.size_bound); the file
    h5py makes is padded to it, and never exceeds it: no size moves when a file is opened."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        varied_hierarchy(tmp_path / "v.zarr", seed)
    with core_of(tmp_path / "v.zarr", tmp_path, "ro") as c:
        listed = {path: c.stat(path)["st_size"] for path in group_files(c)}
        for path, size in listed.items():
            with c.file(path) as file, h5py.File(file, "r") as f:
                f.visit(lambda name: None)
            assert len(c.read_bytes(path)) == c.stat(path)["st_size"] == size, path  # the size listed is the size read
        assert "listed before it was made" not in c.log()


def five_groups(root) -> None:
    """Four arrays at the root and four groups of four arrays each: twenty arrays, each stored,
    everything stored a day old."""
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for path in [f"a{i}" for i in range(4)] + [f"g{g}/a{i}" for g in range(4) for i in range(4)]:
        group.create_array(path, shape=(8,), chunks=(4,), dtype="i2")[...] = 1
    for directory, _, files in os.walk(root):
        for name in [*files, "."]:
            os.utime(os.path.join(directory, name), ns=(DAY_AGO, DAY_AGO))


DAY_AGO = time.time_ns() - 86_400 * 10**9


def test_a_group_files_stat_lists_the_stored_values_below_it_once(tmp_path):
    """Its mtime is the newest of the stored values of every array below: one listing of the
    group finds them all (an array's own listing each cost twenty LISTs of a store of twenty)."""
    five_groups(tmp_path / "s.zarr")
    os.utime(tmp_path / "s.zarr" / "g3" / "a3" / "c" / "1", ns=(DAY_AGO + 10**9, DAY_AGO + 10**9))
    store = CountingStore(str(tmp_path / "s.zarr"), read_only=True)
    with core_of(tmp_path / "s.zarr", tmp_path, "ro", store=store) as c:
        store.reset()
        assert c.stat("/zarr.h5")["st_mtime"] == DAY_AGO + 10**9
        assert store.listed == [""]
        assert c.stat("/g3/zarr.h5")["st_mtime"] == c.stat("/g3/a3.bin")["st_mtime"] == DAY_AGO + 10**9
        assert c.stat("/g2/zarr.h5")["st_mtime"] == DAY_AGO
        assert store.listed == [""]  # what the first listing found serves the groups below and their arrays


def test_a_group_beyond_the_bound_is_walked_no_further_than_the_bound(tmp_path, monkeypatch):
    """A hierarchy of more nodes than one HDF5 view describes shows size 0: counting them stops
    at the bound, without listing the groups below or any stored value."""
    monkeypatch.setattr(hdf5, "MAX_NODES", 5)
    five_groups(tmp_path / "s.zarr")
    store = CountingStore(str(tmp_path / "s.zarr"), read_only=True)
    with core_of(tmp_path / "s.zarr", tmp_path, "ro", store=store) as c:
        c.listdir("/")
        store.reset()
        assert c.stat("/zarr.h5")["st_size"] == 0
        assert store.dirs_listed == [] and store.listed == []
        assert c.stat("/g0/zarr.h5")["st_size"] > 0


def test_a_group_size_walked_before_an_edit_is_not_kept_after_it(tmp_path):
    """A stat that listed the group before an edit landed, and summed it after, stored what it
    summed with a fresh lifetime: the edit's expiry was undone, and stats showed the size before
    the edit for 30 s. What a walk made is kept only when no edit came while it walked."""
    store = tmp_path / "s.zarr"
    zarr.open_group(str(store), mode="w").create_array("a", shape=(10,), dtype="f8")
    hierarchy = Hierarchy(LocalStore(str(store)))
    entry = hierarchy.lookup("/zarr.h5")

    def edited_meanwhile(paths):  # the edit lands while the stat walks: after its listing, before its sum
        zarr.open_group(str(store), mode="r+").create_array("b", shape=(100_000,), dtype="f8")
        hierarchy.changed("b")
        return dict.fromkeys(paths, 0)

    before = hierarchy.group_file_facts(entry, edited_meanwhile)[0]
    after = hierarchy.group_file_facts(entry, lambda paths: dict.fromkeys(paths, 0))[0]
    assert after >= before + 800_000
