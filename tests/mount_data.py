"""A nested hierarchy written by zarr-python: every layout and every data type, with expected bytes."""

import numpy as np
import zarr

from zarr_layouts import LAYOUTS, NUMERIC, random_values


def build(root) -> dict[str, np.ndarray]:
    """Write the hierarchy; returns {"path/in/mount.bin": expected array}."""
    rng = np.random.default_rng(7)
    group = zarr.open_group(str(root), mode="w", attributes={"title": "test"})
    expected = {}
    layouts = group.create_group("layouts")
    for name in sorted(LAYOUTS):
        kwargs = {"chunks": (4, 3), **LAYOUTS[name]}
        z = layouts.create_array(name, shape=(13, 11), dtype="float32", fill_value=float("nan"), **kwargs)
        values = random_values("float32", z.shape, rng)
        values[:4, :3] = np.nan
        z[...] = values
        expected[f"layouts/{name}.bin"] = values
    types = group.create_group("types")
    for dtype in NUMERIC:
        z = types.create_array(dtype, shape=(9, 7), chunks=(4, 4), shards=(8, 8), dtype=dtype)
        values = random_values(dtype, z.shape, rng)
        z[...] = values
        expected[f"types/{dtype}.bin"] = np.asarray(z[...])
    z = group.create_array("scalar", shape=(), dtype="int64", chunks=(), fill_value=3)
    z[...] = 42
    expected["scalar.bin"] = np.asarray(z[...])
    z = group.create_array("empty", shape=(0, 4), chunks=(2, 2), dtype="uint8")
    expected["empty.bin"] = np.zeros((0, 4), "u1")
    z = group.create_array("xr", shape=(6,), chunks=(4,), dtype="int16", attributes={"_ARRAY_DIMENSIONS": ["time"]})
    z[...] = np.arange(6)
    expected["xr.bin"] = np.arange(6, dtype="<i2")
    return expected


def flat(values: np.ndarray) -> bytes:
    return values.astype(values.dtype.newbyteorder("<")).tobytes()
