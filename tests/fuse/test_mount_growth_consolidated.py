"""Arrays that grow in a hierarchy with consolidated metadata, as xarray writes it by default
(docs/writing.md, "Appending"): a time series xarray made gets records appended through
NAME.bin, and xarray and zarr-python reading the consolidated copy alone see them."""

import os
import subprocess

import numpy as np
import pytest
import xarray as xr
import zarr

from mounting import kill_9_with_open, mounted
from servers.seaweed import unique_prefix

PLANE = (3, 5)  # each record of `temperature`: a 3 x 5 plane of float32, 60 bytes


def temperature(first: int, count: int) -> np.ndarray:
    return (np.arange(first * 15, (first + count) * 15, dtype="<f4") * 0.5 + 1).reshape(count, *PLANE)


def times(first: int, count: int) -> np.ndarray:
    return np.arange(first, first + count, dtype="<i8") * 3600


def dataset(count: int) -> xr.Dataset:
    return xr.Dataset({"temperature": (("time", "y", "x"), temperature(0, count))},
                      coords={"time": ("time", times(0, count))})


def write(store, zarr_format: int, count: int = 4) -> None:
    """xarray's to_zarr with its default, consolidated metadata; chunks of 2 records, so the end
    lies inside a chunk."""
    encoding = {"temperature": {"chunks": (2, *PLANE)}, "time": {"chunks": (2,)}}
    dataset(count).to_zarr(store, mode="w", zarr_format=zarr_format, encoding=encoding)


def append_through(m, first: int, count: int, scratch) -> None:
    """`count` records from `first`: temperature by Python's append mode, time by `cat >>`."""
    with open(m / "temperature.bin", "ab") as f:
        f.write(temperature(first, count).tobytes())
    more = scratch / "times.raw"
    more.write_bytes(times(first, count).tobytes())
    subprocess.run(f"cat {more} >> {m / 'time.bin'}", shell=True, check=True)


def assert_consolidated(store, count: int) -> None:
    """xarray and zarr-python, each from the consolidated copy alone, see `count` records."""
    assert zarr.open_consolidated(store)["temperature"].shape == (count, *PLANE)
    with xr.open_zarr(store, consolidated=True) as ds:
        assert ds.sizes["time"] == count
        assert np.array_equal(ds["temperature"].values, temperature(0, count))
        assert np.array_equal(ds["time"].values, times(0, count))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_records_appended_to_a_dataset_xarray_wrote_show_in_its_consolidated_metadata(tmp_path, zarr_format):
    root = tmp_path / "ds.zarr"
    write(str(root), zarr_format)
    with mounted(root, tmp_path, "grow=all") as m:
        append_through(m, 4, 3, tmp_path)
        assert_consolidated(str(root), 7)  # stored at close
        append_through(m, 7, 2, tmp_path)
        assert "WARNING" not in m.settled_log()  # the mount's own copy of the metadata follows: never stale
    assert_consolidated(str(root), 9)


def test_truncate_changes_the_consolidated_shape(tmp_path):
    """truncate to fewer records shrinks the consolidated shape, to more grows it (fill value)."""
    root = tmp_path / "ds.zarr"
    write(str(root), 3, count=6)
    record = 15 * 4
    with mounted(root, tmp_path, "grow=all") as m:
        os.truncate(m / "temperature.bin", 3 * record)
        assert zarr.open_consolidated(str(root))["temperature"].shape == (3, *PLANE)
        os.truncate(m / "temperature.bin", 5 * record)
    grown = zarr.open_consolidated(str(root))["temperature"]
    assert grown.shape == (5, *PLANE)
    assert np.array_equal(grown[:3], temperature(0, 3)) and np.isnan(grown[3:]).all()


def test_records_appended_on_an_object_store_show_in_its_consolidated_metadata(seaweed, tmp_path):
    prefix = unique_prefix("consolidated")
    write(seaweed.zarr_store(prefix), 3)
    with mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options("grow=all"), env=seaweed.env()) as m:
        append_through(m, 4, 3, tmp_path)
    assert_consolidated(seaweed.zarr_store(prefix), 7)


def test_kill_9_while_appending_leaves_a_consolidated_shape_within_the_stored_chunks(tmp_path):
    """kill -9 while records are appended and fsynced: the consolidated copy holds the old or a
    new shape, never one past the records stored, and zarr-python reads every record it shows."""
    root = tmp_path / "ds.zarr"
    write(str(root), 3, count=1)
    with mounted(root, tmp_path, "grow=all") as m:
        fd = os.open(m / "temperature.bin", os.O_WRONLY | os.O_APPEND)
        for r in range(1, 40):
            os.write(fd, temperature(r, 1).tobytes())
            if r % 5 == 0:
                os.fsync(fd)
        kill_9_with_open(m, fd)
    own = zarr.open_array(str(root / "temperature"), mode="r")
    copy = zarr.open_consolidated(str(root))["temperature"]
    assert 35 <= copy.shape[0] <= own.shape[0] <= 40
    assert np.array_equal(copy[...], temperature(0, copy.shape[0]))


def test_a_second_mount_s_records_follow_the_first_one_s_in_the_consolidated_copy(seaweed, tmp_path):
    """Mount b holds a partial record while mount a appends 3 records; b's completed records move
    after a's (growth.rebase), and the consolidated copy, which both rewrite, shows all 9."""
    prefix = unique_prefix("consolidated-rebase")
    write(seaweed.zarr_store(prefix), 2)
    mine = temperature(100, 2).tobytes()
    with mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options("grow=all"), name="a", env=seaweed.env()) as a, \
            mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options("grow=all"), name="b",
                    env=seaweed.env()) as b:
        second = os.open(b / "temperature.bin", os.O_WRONLY | os.O_APPEND)
        try:
            os.write(second, mine[:50])  # pending in b: never stored before it is completed
            with open(a / "temperature.bin", "ab") as first:
                first.write(temperature(50, 3).tobytes())
            os.write(second, mine[50:])
            os.fsync(second)
        finally:
            os.close(second)
        assert "ERROR" not in b.settled_log()
    copy = zarr.open_consolidated(seaweed.zarr_store(prefix))["temperature"]
    assert np.array_equal(copy[...], np.concatenate([temperature(0, 4), temperature(50, 3), temperature(100, 2)]))
