"""zarr.nc read by the netCDF tools people use (ncdump, netCDF4-python, xarray's netcdf4 and
h5netcdf engines, CDO, NCO) as they read the same CF dataset written by xarray as a real netCDF
file (the control): the same attribute types, the same dates, the same values and masks. What
h5py reads of a file made from odd attributes, and its log lines, are asked of the core without
a mount (core.py)."""

import base64
import json
import struct
import subprocess
import warnings

import h5py
import netCDF4
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from core import core_of
from mounting import mounted

FILL = 1e20


def cf_dataset() -> xr.Dataset:
    """Float tas (float32) and pr (float64) with missing cells and _FillValue 1e20 in xarray's
    encoding (issue 40's dataset), a float32 tos with missing_value too, a float32 ts packed with
    float32 scale_factor/add_offset, and a time coordinate in "days since"."""
    rng = np.random.default_rng(40)
    tas = (280 + rng.standard_normal((4, 3, 5))).astype("f4")
    tas[0, 1, 2] = np.nan
    tas[2, :, 4] = np.nan
    pr = rng.random((4, 3, 5))
    pr[1, 0, 0] = np.nan
    ts = (250 + 10 * rng.random((4, 3, 5))).astype("f4")
    tos = ts - 0.25
    tos[3, 2, :] = np.nan
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), tas, {"units": "K", "long_name": "near-surface air temperature"}),
         "pr": (("time", "lat", "lon"), pr, {"units": "kg m-2 s-1", "comment": "précipitation"}),
         "ts": (("time", "lat", "lon"), ts, {"units": "K"}),
         "tos": (("time", "lat", "lon"), tos, {"units": "K"})},
        coords={"time": pd.date_range("2000-01-01", periods=4), "lat": ("lat", [10.0, 20.0, 30.0], {"units": "degrees_north"}),
                "lon": ("lon", np.arange(5.0) * 10, {"units": "degrees_east"})},
        attrs={"title": "issue 40", "Conventions": "CF-1.8", "history": ""})
    ds["tas"].encoding = {"_FillValue": np.float32(FILL)}
    ds["tos"].encoding = {"_FillValue": np.float32(-999), "missing_value": np.float32(-999)}
    ds["pr"].encoding = {"_FillValue": FILL}
    ds["ts"].encoding = {"scale_factor": np.float32(0.5), "add_offset": np.float32(200)}
    ds["time"].encoding = {"units": "days since 2000-01-01", "calendar": "standard"}
    return ds


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{"control": the .nc xarray writes, "v3"/"v2": zarr.nc of the Zarr store through a mount}."""
    tmp = tmp_path_factory.mktemp("netcdf_tools")
    ds = cf_dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr's v3 spec and consolidated-metadata warnings
        ds.to_netcdf(tmp / "control.nc", engine="netcdf4")
        for fmt in (3, 2):
            ds.to_zarr(tmp / f"v{fmt}.zarr", zarr_format=fmt, mode="w")
    with netCDF4.Dataset(tmp / "control.nc", "a") as control:
        # netCDF4-python writes non-ASCII text as NC_STRING, which Octave cannot read; as bytes it
        # writes NC_CHAR in UTF-8, as netCDF-C's nc_put_att_text, NCO and CDO do
        control["pr"].setncattr("comment", control["pr"].getncattr("comment").encode())
    with mounted(tmp / "v3.zarr", tmp, "ro", name="m3") as m3, mounted(tmp / "v2.zarr", tmp, "ro", name="m2") as m2:
        yield {"control": tmp / "control.nc", "v3": m3 / "zarr.nc", "v2": m2 / "zarr.nc", "stores": tmp}


def run(command: list) -> str:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def declarations(path) -> set[str]:
    """ncdump -h's dimension, variable and attribute lines (with their types: `string` marks an
    NC_STRING, `f` a float), in no order: the view lists variables by name."""
    lines = run(["ncdump", "-h", path]).splitlines()[1:]
    return {line.strip() for line in lines if line.strip() not in ("", "}")}


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_ncdump_shows_the_attributes_and_types_of_the_control(files, version):
    control = declarations(files["control"])
    assert 'pr:comment = "précipitation" ;' in control and 'tas:units = "K" ;' in control
    assert declarations(files[version]) == control


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_ncdump_t_prints_dates(files, version):
    def data(path):
        return run(["ncdump", "-t", "-v", "time", path]).partition("data:")[2]

    assert '"2000-01-01", "2000-01-02", "2000-01-03", "2000-01-04"' in data(files["control"])
    assert data(files[version]) == data(files["control"])


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_netcdf4_reads_the_values_and_masks_of_the_control(files, version):
    with netCDF4.Dataset(files["control"]) as control, netCDF4.Dataset(files[version]) as view:
        for name in ("tas", "pr", "ts", "tos", "time", "lat", "lon"):
            expected, got = control[name][:], view[name][:]
            assert got.dtype == expected.dtype, name
            np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(expected), err_msg=name)
            np.testing.assert_array_equal(got.filled(0), expected.filled(0), err_msg=name)
        assert np.ma.getmaskarray(view["tas"][:]).sum() == 4
        assert view["tos"].getncattr("missing_value").dtype == np.float32
        assert view["ts"].getncattr("scale_factor").dtype == np.float32


@pytest.mark.parametrize("version", ["v3", "v2"])
@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_xarray_reads_the_control(files, version, engine):
    """As netCDF4 reads the control: h5netcdf reads its UTF-8 comment as surrogates (netCDF-C marks
    all text ASCII); the view marks non-ASCII text UTF-8, so both engines read the comment."""
    with xr.open_dataset(files["control"], engine="netcdf4") as control, \
            xr.open_dataset(files[version], engine=engine) as view:
        xr.testing.assert_identical(view.load(), control.load())
        assert int(view["tas"].isnull().sum()) == 4


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_cdo_fldmean_leaves_out_the_missing_cells(files, version):
    def means(path):
        return run(["cdo", "-s", "output", "-fldmean", "-selname,tas,tos", path])

    control = [float(v) for v in means(files["control"]).split()]
    assert len(control) == 8 and all(250 < v < 290 for v in control)  # no 1e20 nor -999 averaged in
    assert means(files[version]) == means(files["control"])


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_ncks_prints_what_it_prints_of_the_control(files, version):
    def dump(path):
        return run(["ncks", "-C", "-v", "tas,pr,tos,ts,time", path]).partition("\n")[2]  # after "netcdf NAME {"

    control = dump(files["control"])
    assert "tas:_FillValue = 1.e+20f ;" in control and " _," in control  # a missing cell
    assert dump(files[version]) == control


def test_xarray_complex_fill_is_two_float64s_in_base64(tmp_path):
    """xarray writes a complex _FillValue in v3 as a list of two base64 float64s, whatever the
    width: zarr.nc holds it as one element of the variable's compound type."""
    fill = [base64.b64encode(struct.pack("<d", part)).decode() for part in (1.5, -2.0)]
    zarr.create_array(tmp_path / "c.zarr", name="z", shape=(3,), dtype="complex64", fill_value=0,
                      attributes={"_FillValue": fill}, zarr_format=3)
    with core_of(tmp_path / "c.zarr", tmp_path, "ro") as c, c.file("/zarr.h5") as file, h5py.File(file, "r") as f:
        assert f["z"].attrs["_FillValue"] == np.complex64(1.5 - 2j)
        assert f["z"].attrs["_FillValue"].dtype == np.complex64


def test_cf_attributes_with_no_value_of_the_type_get_one_log_line_each(tmp_path):
    """Untrusted attributes: a base64 float64 beyond float32's range, bytes of no float's width, a
    missing_value with no int16 value. The file is still made; each gets one line naming it."""
    wide = base64.b64encode(struct.pack("<d", 1e300)).decode()
    root = zarr.open_group(tmp_path / "bad.zarr", mode="w", zarr_format=3)
    root.create_array("huge", shape=(2,), dtype="float32", attributes={"_FillValue": wide})
    root.create_array("odd", shape=(2,), dtype="float32", attributes={"_FillValue": "AAAA"})
    root.create_array("half", shape=(2,), dtype="int16", attributes={"missing_value": 0.5, "units": "1"})
    root.create_array("long", shape=(2,), dtype="float32", attributes={"_FillValue": "A" * 100_000})
    with core_of(tmp_path / "bad.zarr", tmp_path, "ro") as c:
        with c.file("/zarr.h5") as file, h5py.File(file, "r") as f:
            assert "_FillValue" not in f["huge"].attrs and "_FillValue" not in f["odd"].attrs
            assert f["half"].attrs["missing_value"] == 0.5 and f["half"].attrs["units"] == b"1"
        log = c.log()
    assert log.count(f"huge: fill value '{wide}' has no value of its type") == 1
    assert log.count("odd: fill value 'AAAA' has no value of its type") == 1
    assert log.count("half: attribute 'missing_value' = 0.5 has no value of the variable's type") == 1
    line, = (line for line in log.splitlines() if "long: fill value" in line)
    assert len(line) < 300  # the metadata's value is quoted cut, not whole


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_gdal_netcdf_driver_sees_the_nodata_and_range_of_the_control(files, version):
    """gdalinfo -mm through GDAL's netCDF driver: the whole report (NoData value, metadata, each
    band's computed min/max, which a fill cell read as data would make 1e20) as for the control."""
    def report(path, name):
        text = run(["gdalinfo", "-mm", f'NETCDF:"{path}":{name}'])
        return text.replace(str(path), "FILE")

    for name in ("tas", "pr"):
        control = report(files["control"], name)
        extremes = [float(v) for line in control.splitlines() if "Computed Min/Max=" in line
                    for v in line.partition("=")[2].split(",")]
        assert "NoData Value=" in control and len(extremes) == 8 and max(extremes) < 1e3  # no 1e20 cell
        assert report(files[version], name) == control, name


R_READ = """
library(ncdf4)
f <- nc_open(commandArgs(trailingOnly = TRUE)[1])
for (name in c("tas", "pr", "tos", "ts")) {
  v <- ncvar_get(f, name)
  cat(name, sum(is.na(v)), sprintf("%.9g", sum(v, na.rm = TRUE)), sprintf("%.9g", f$var[[name]]$missval),
      ncatt_get(f, name, "units")$value, "\\n")
}
origin <- sub("days since ", "", ncatt_get(f, "time", "units")$value)
cat(format(as.Date(ncvar_get(f, "time"), origin = as.Date(origin))), "\\n")
"""


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_r_ncdf4_reads_the_values_missing_cells_and_dates_of_the_control(files, version):
    def read(path):
        return run(["Rscript", "-e", R_READ, path])

    control = read(files["control"])
    assert control.startswith("tas 4 ") and "2000-01-01 2000-01-02 2000-01-03 2000-01-04" in control
    assert read(files[version]) == control


OCTAVE_READ = """
pkg load netcdf
f = '{path}';
info = ncinfo(f);
[~, order] = sort({{info.Variables.Name}});
for variable = info.Variables(order)
  v = ncread(f, variable.Name);
  printf('%s %d %.9g\\n', variable.Name, sum(isnan(v(:))), sum(v(~isnan(v))));
  [~, by_name] = sort({{variable.Attributes.Name}});
  for attribute = variable.Attributes(by_name)
    printf('  %s %s %s\\n', attribute.Name, class(attribute.Value), num2str(attribute.Value, 9));
  end
end
"""


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_octave_ncinfo_and_ncread_read_what_they_read_of_the_control(files, version):
    """Octave's netcdf package: ncinfo failed on NC_STRING attributes (issue 40)."""
    def read(path):
        assert "'" not in str(path)
        return run(["octave-cli", "--no-gui", "--quiet", "--eval", OCTAVE_READ.format(path=path)])

    control = read(files["control"])
    assert "tas 4 " in control and "  units char K" in control and "  _FillValue single 1.00000002e+20" in control
    assert read(files[version]) == control


def test_a_plain_number_beyond_the_type_and_a_lone_surrogate_lose_nothing_else(tmp_path):
    """A missing_value of 1e300 on float32 has no float32 value, as xarray's base64 one has none:
    it is written as it is, with a line, never made infinite; a text attribute holding a lone surrogate is written as JSON text, and the group's
    zarr.h5 is still made."""
    root = zarr.open_group(tmp_path / "odd.zarr", mode="w", zarr_format=3)
    root.create_array("big", shape=(2,), dtype="float32", attributes={"missing_value": 1e300})
    root.create_array("text", shape=(2,), dtype="float32", attributes={"long_name": "t"})
    document = tmp_path / "odd.zarr" / "text" / "zarr.json"
    meta = json.loads(document.read_text())
    meta["attributes"]["units"] = "\ud800K"
    document.write_text(json.dumps(meta))  # ASCII JSON: the surrogate as \ud800
    with core_of(tmp_path / "odd.zarr", tmp_path, "ro") as c:
        with c.file("/zarr.h5") as file, h5py.File(file, "r") as f:
            assert f["big"].attrs["missing_value"] == 1e300
            assert json.loads(f["text"].attrs["units"]) == "\ud800K" and f["text"].attrs["long_name"] == b"t"
        log = c.log()
    assert log.count("big: attribute 'missing_value' = 1e+300 has no value of the variable's type") == 1
