"""xarray's to_zarr (v2 and v3, with its default consolidated metadata), read back through a real
mount and compared with xarray's own reading of the raw (undecoded) values."""

import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from mounting import mounted
from zarrfs.views.text import unescape


def dataset():
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {"temperature": (("time", "station"), rng.standard_normal((5, 3)).astype("f4")),
         "flag": (("time",), np.array([True, False, True, True, False])),
         "label": (("time",), np.array(["a", "bb\nc", "", "d\\e", "é"], dtype=object))},
        coords={"time": pd.date_range("2020-01-01", periods=5), "station": ["Zürich", "Oslo", "Lima"],
                "height": ("station", [1.5, 2.0, 3.25])})
    ds["temperature"].encoding = {"dtype": "int16", "scale_factor": 0.01, "_FillValue": -9999}
    ds["temperature"][1, 1] = np.nan  # stored as the _FillValue
    return ds


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_to_zarr_reads_back_through_the_mount(tmp_path, zarr_format):
    store = tmp_path / "ds.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset().to_zarr(store, zarr_format=zarr_format, mode="w")  # consolidated by default
        raw = xr.open_zarr(store, decode_cf=False, mask_and_scale=False, consolidated=True)
    assert (store / ".zmetadata").exists() if zarr_format == 2 else "consolidated_metadata" in json.loads(
        (store / "zarr.json").read_text())
    with mounted(store, tmp_path, "ro") as m:
        names = set(os.listdir(m.path))
        for name, variable in raw.variables.items():
            values = np.asarray(variable.values)
            if values.dtype.kind in "OT":  # variable-length (numpy 2 StringDType too): text
                assert f"{name}.txt" in names
                lines = (m / f"{name}.txt").read_bytes().split(b"\n")[:-1]
                assert [unescape(line.decode()).decode() for line in lines] == list(values.reshape(-1)), name
                continue
            side = json.loads((m / f"{name}.json").read_text())
            assert side["shape"] == list(values.shape) and side["zarr_format"] == zarr_format
            assert side["dimension_names"] == list(variable.dims), name
            expected = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
            assert (m / f"{name}.bin").read_bytes() == expected.tobytes(), name
            assert np.dtype(side["dtype"]) == expected.dtype, name
        assert "consolidated metadata" not in m.log()  # nothing stale, nothing refused
