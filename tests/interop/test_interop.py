"""Interoperability with zarr-python 3.1 in both directions, byte for byte."""

import numpy as np
import pytest
import zarr

import zarrfs
from zarr_layouts import LAYOUTS, NUMERIC, create, random_values


def check_reads(path, expected: np.ndarray, rng):
    flat = expected.astype(expected.dtype.newbyteorder("<")).tobytes()
    with zarrfs.open_raw(str(path)) as view:
        assert view.size == len(flat)
        assert view.read(0, view.size) == flat
        for _ in range(20):
            offset = int(rng.integers(0, len(flat) + 1))
            size = int(rng.integers(0, 64))
            assert view.read(offset, size) == flat[offset:offset + size]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reads_what_zarr_python_writes(tmp_path, layout):
    rng = np.random.default_rng(1)
    z = create(tmp_path / "a", layout=layout, fill_value=np.nan)
    values = random_values("float32", z.shape, rng)
    values[:4, :3] = np.nan  # one chunk all fill value: zarr-python does not store it
    z[...] = values
    check_reads(tmp_path / "a", values, rng)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", ["zstd", "bytes-big", "sharded-end"])
def test_reads_every_data_type(tmp_path, dtype, layout):
    rng = np.random.default_rng(2)
    z = create(tmp_path / "a", dtype=dtype, layout=layout)
    values = random_values(dtype, z.shape, rng)
    z[2:, 1:] = values[2:, 1:]  # the rest stays fill value
    expected = np.asarray(z[...])
    check_reads(tmp_path / "a", expected, rng)


@pytest.mark.parametrize("shape, chunks", [((), ()), ((0, 5), (2, 2)), ((7,), (10,))])
def test_reads_edge_shapes(tmp_path, shape, chunks):
    rng = np.random.default_rng(3)
    z = zarr.create_array(str(tmp_path / "a"), shape=shape, chunks=chunks, dtype="int32", fill_value=5)
    values = rng.integers(-100, 100, shape).astype("int32")
    z[...] = values
    check_reads(tmp_path / "a", values, rng)


def write_randomly(path, nbytes, rng, writes=30) -> bytes:
    """Random partial writes through open_raw, then a full flush; returns the model."""
    with zarrfs.open_raw(str(path), mode="r+") as view:
        model = bytearray(view.read(0, view.size))
        for i in range(writes):
            offset = int(rng.integers(0, nbytes))
            size = int(rng.integers(0, min(200, nbytes - offset) + 1))
            data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
            view.write(offset, data)
            model[offset:offset + size] = data
            if i % 7 == 0:
                view.flush()
    return bytes(model)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_zarr_python_reads_what_we_write(tmp_path, layout):
    rng = np.random.default_rng(4)
    z = create(tmp_path / "a", layout=layout, fill_value=0.0)
    z[:5] = random_values("float32", (5, 11), rng)
    model = write_randomly(tmp_path / "a", z.nbytes, rng)
    got = zarr.open_array(str(tmp_path / "a"))[...]
    assert got.astype("<f4").tobytes() == model


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("layout", ["gzip", "transpose-big-gzip-crc", "nested-sharding"])
def test_zarr_python_reads_every_data_type_we_write(tmp_path, dtype, layout):
    rng = np.random.default_rng(5)
    z = create(tmp_path / "a", dtype=dtype, layout=layout)
    values = random_values(dtype, z.shape, rng)
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        view.write(0, values.tobytes())
    got = zarr.open_array(str(tmp_path / "a"))[...]
    assert got.astype(got.dtype.newbyteorder("<")).tobytes() == values.tobytes()


def test_all_fill_chunks_are_deleted_and_zarr_python_agrees(tmp_path):
    z = create(tmp_path / "a", layout="sharded-end", fill_value=0.0)
    z[...] = 1.0
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        view.write(0, bytes(view.size))
    assert not (tmp_path / "a" / "c").exists() or not any(p.is_file() for p in (tmp_path / "a" / "c").rglob("*"))
    assert (zarr.open_array(str(tmp_path / "a"))[...] == 0).all()
