"""Rectilinear chunk grids (zarr-extensions, chunk-grids/rectilinear) against zarr-python 3.4,
the first writer of them here (3.1 refuses them, and 3.2+ needs Python >= 3.12), both ways: zarrfs
reads what zarr-python writes, zarr-python reads what zarrfs writes, and the chunk and shard files
zarrfs stores are the very bytes zarr-python stores for the same values."""

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, ZstdCodec

import zarrfs

pytestmark = pytest.mark.needs_python312

SHAPE = (12, 10)
LAYOUTS = {  # name -> keyword arguments for zarr.create_array on a grid of irregular edges
    "chunks": dict(chunks=[[1, 4, 7], [3, 3, 4]], compressors=[ZstdCodec(level=1)]),
    "chunks-uncompressed": dict(chunks=[[5, 1, 6], [2, 8]], compressors=None),
    "shards": dict(shards=[[4, 6, 2], [6, 4]], chunks=(2, 2), compressors=None),
    "shards-big-endian": dict(shards=[[9, 3], [10]], chunks=(1, 10), serializer=BytesCodec(endian="big"),
                              compressors=None),
}


@pytest.fixture(autouse=True)
def rectilinear_chunks():
    with zarr.config.set({"array.rectilinear_chunks": True}):  # experimental in zarr-python: off by default
        yield


def create(path, layout):
    return zarr.create_array(str(path), shape=SHAPE, dtype="int32", fill_value=-7, **LAYOUTS[layout])


def values(rng) -> np.ndarray:
    out = rng.integers(-(2**31), 2**31, SHAPE, dtype=np.int64).astype(np.int32)
    out[:1, :] = -7  # chunks, or inner chunks, that are all fill value: stored by neither
    return out


def stored(path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted((path / "c").rglob("*")) if p.is_file()}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reads_what_zarr_python_writes(tmp_path, layout):
    rng = np.random.default_rng(11)
    expected = values(rng)
    create(tmp_path / "a", layout)[...] = expected
    flat = expected.astype("<i4").tobytes()
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        assert view.size == len(flat)
        for _ in range(30):
            offset = int(rng.integers(0, len(flat) + 1))
            size = int(rng.integers(0, 80))
            assert view.read(offset, size) == flat[offset:offset + size]
        assert view.read(0, view.size) == flat


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_zarr_python_reads_what_we_write(tmp_path, layout):
    rng = np.random.default_rng(12)
    create(tmp_path / "a", layout)[...] = values(rng)
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        model = bytearray(view.read(0, view.size))
        for i in range(30):
            offset = int(rng.integers(0, len(model)))
            data = rng.integers(0, 256, int(rng.integers(0, min(90, len(model) - offset) + 1)), dtype=np.uint8).tobytes()
            view.write(offset, data)
            model[offset:offset + len(data)] = data
            if i % 7 == 0:
                view.flush()
    assert zarr.open_array(str(tmp_path / "a"))[...].astype("<i4").tobytes() == bytes(model)


# Not "shards": zarr-python lays a shard's inner chunks out in Morton order, zarrfs in C order (a
# stream reads a shard front to back); the format leaves the order free, and each reads the other's
# (above). Where a shard holds a single column of inner chunks the two orders are one.
@pytest.mark.parametrize("layout", ["chunks-uncompressed", "shards-big-endian"])
def test_stores_the_bytes_zarr_python_stores(tmp_path, layout):
    expected = values(np.random.default_rng(13))
    create(tmp_path / "theirs", layout)[...] = expected
    create(tmp_path / "ours", layout)
    with zarrfs.open_raw(str(tmp_path / "ours"), mode="r+") as view:
        view.write(0, expected.astype("<i4").tobytes())
    assert stored(tmp_path / "ours") == stored(tmp_path / "theirs")
