"""engine/growth.py and RawFile's appends, in process: records appended past the end, a partial
record held, truncate as zarr-python's resize, and the order in which a new shape is stored."""

import json

import numpy as np
import pytest
import zarr

from zarrfs.engine import growth
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import OutOfBoundsError
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.local import LocalStore

ROW = 4  # int16 elements a record: 8 bytes


def rows(first: int, count: int) -> np.ndarray:
    return np.arange(first * ROW, (first + count) * ROW, dtype="<i2").reshape(count, ROW)


def raw_file(tmp_path, count: int = 3, **options) -> RawFile:
    root = tmp_path / "s.zarr"
    zarr.create_array(str(root), shape=(count, ROW), chunks=(2, ROW), dtype="<i2", fill_value=-1,
                      **options)[...] = rows(0, count)
    store = LocalStore(str(root))
    return RawFile(open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20)), writable=True)


def stored_shape(tmp_path) -> list[int]:
    return json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())["shape"]


def test_records_are_appended_and_a_partial_one_is_held(tmp_path):
    raw = raw_file(tmp_path)
    new = rows(3, 2).tobytes()
    assert raw.write(24, new[:5], grow=True) == 5  # part of a record: held, not stored
    assert (raw.size, raw.file_size) == (24, 29) and raw.read(20, 100) == rows(2, 1).tobytes()[4:] + new[:5]
    assert raw.write(29, new[5:], grow=True) == len(new) - 5
    assert (raw.size, raw.pending) == (40, b"") and raw.read(0, 100) == rows(0, 5).tobytes()
    with pytest.raises(OutOfBoundsError, match="would leave a hole"):
        raw.write(41, b"x", grow=True)
    assert stored_shape(tmp_path) == [3, ROW]  # until the write-back
    raw.flush()
    assert stored_shape(tmp_path) == [5, ROW]
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], rows(0, 5))


def test_a_growth_waits_for_the_shards_an_early_write_back_leaves_out(tmp_path):
    """An early write-back stores only wholly written shards: the shape that shows records in a
    shard it left out is stored with that shard, never before it."""
    raw = raw_file(tmp_path, count=3, shards=(4, ROW))
    raw.write(24, rows(3, 6).tobytes(), grow=True)  # shard 0 in part (row 3), 1 whole (rows 4-7), 2 to the end
    raw.flush(whole_only=True)
    assert stored_shape(tmp_path) == [3, ROW]
    raw.flush()
    assert stored_shape(tmp_path) == [9, ROW]
    assert np.array_equal(zarr.open_array(str(tmp_path / "s.zarr"))[...], rows(0, 9))


@pytest.mark.parametrize("options", [{}, {"shards": (4, ROW)}])
def test_truncate_shrinks_as_resize_and_grows_with_the_fill_value(tmp_path, options):
    raw = raw_file(tmp_path, count=7, **options)
    raw.truncate(3 * ROW * 2)
    assert stored_shape(tmp_path) == [3, ROW]
    raw.truncate(6 * ROW * 2)  # the old rows 3-5 must not come back
    grown = zarr.open_array(str(tmp_path / "s.zarr"))[...]
    assert np.array_equal(grown[:3], rows(0, 3)) and (grown[3:] == -1).all()
    assert raw.read(0, 1000) == grown.tobytes()


def test_what_cannot_grow(tmp_path):
    scalar = tmp_path / "scalar.zarr"
    zarr.create_array(str(scalar), shape=(), dtype="<i2", zarr_format=3)
    store = LocalStore(str(scalar))
    array = open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20))
    assert growth.why_fixed(array) == "a scalar array has no dimension to grow"
    wide = tmp_path / "wide.zarr"
    zarr.create_array(str(wide), shape=(1, growth.MAX_RECORD), chunks=(1, 1 << 20), dtype="u1")
    store = LocalStore(str(wide))
    array = open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20))
    assert growth.why_fixed(array) is None
    wider = tmp_path / "wider.zarr"
    zarr.create_array(str(wider), shape=(1, growth.MAX_RECORD + 1), chunks=(1, 1 << 20), dtype="u1")
    store = LocalStore(str(wider))
    array = open_array(store, "", read_metadata(store, ""), ChunkCache(1 << 20))
    assert "more than the 67108864 a partial one may hold" in growth.why_fixed(array)
