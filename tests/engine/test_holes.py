"""SEEK_DATA/SEEK_HOLE arithmetic against a brute-force model of which flat elements are stored."""

import errno
import itertools

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import CountingStore
from zarrfs.byte_ranges import Suffix
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.holes import SEEK_DATA, SEEK_HOLE, Presence, SeekError, coords_of, seek
from zarrfs.format.v3 import ChunkKeyEncoding, parse_document
from zarrfs.fs.stored_usage import Usage
from zarrfs.stores.local import LocalStore


@st.composite
def grids(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0, 7)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    cells = list(itertools.product(*(range(-(-n // c)) for n, c in zip(shape, chunks, strict=False))))
    present = [c for c in cells if draw(st.booleans())]
    return shape, chunks, present


def stored_elements(shape, chunks, present) -> np.ndarray:
    """True for each flat element whose chunk is stored."""
    mask = np.zeros(shape, bool)
    for coords in present:
        mask[tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords, chunks, strict=False))] = True
    return mask.reshape(-1)


@settings(max_examples=300, deadline=None)
@given(grids(), st.sampled_from([1, 2, 8]))
def test_seek_matches_a_brute_force_model(grid, itemsize):
    shape, chunks, present = grid
    mask = stored_elements(shape, chunks, present)
    presence, size = Presence(shape, chunks, present), mask.size * itemsize
    for offset in range(size):
        element = offset // itemsize
        data = [i for i in range(element, mask.size) if mask[i]]
        holes = [i for i in range(element, mask.size) if not mask[i]]
        if data:
            assert seek(presence, itemsize, size, offset, SEEK_DATA) == max(offset, data[0] * itemsize)
        else:
            with pytest.raises(SeekError) as e:
                seek(presence, itemsize, size, offset, SEEK_DATA)
            assert e.value.errno == errno.ENXIO
        assert seek(presence, itemsize, size, offset, SEEK_HOLE) == (max(offset, holes[0] * itemsize) if holes
                                                                     else size)
    with pytest.raises(SeekError):
        seek(presence, itemsize, size, size, SEEK_HOLE)


def test_without_presence_everything_is_data():
    assert seek(None, 4, 400, 17, SEEK_DATA) == 17
    assert seek(None, 4, 400, 17, SEEK_HOLE) == 400


def test_chunk_keys_of_each_encoding():
    default, dotted, v2 = ChunkKeyEncoding("default", "/"), ChunkKeyEncoding("default", "."), ChunkKeyEncoding("v2", ".")
    assert coords_of("c/1/2", default, (3, 3)) == (1, 2)
    assert coords_of("c.1.2", dotted, (3, 3)) == (1, 2)
    assert coords_of("1.2", v2, (3, 3)) == (1, 2)
    assert coords_of("c", default, ()) == ()
    assert coords_of("0", v2, ()) == ()
    assert coords_of("c/3/0", default, (3, 3)) is None  # outside the grid
    assert coords_of("c/1", default, (3, 3)) is None
    assert coords_of("zarr.json", default, (3, 3)) is None


def test_the_places_of_stored_chunks_are_kept_within_a_bound(tmp_path):
    """SEEK_DATA needs where an array's chunks are stored: kept for many arrays, weighed by
    their stored chunks, the oldest dropped past the bound, and found again when asked."""
    root = tmp_path / "store"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for name in "abc":
        group.create_array(name, shape=(64,), chunks=(8,), dtype="uint8", fill_value=0)[:32] = 1  # 4 chunks
    store = LocalStore(str(root))
    usage = Usage(store, presence_chunks=10)
    metas = {name: parse_document((root / name / "zarr.json").read_bytes(), name) for name in "abc"}
    arrays = {name: open_array(store, name, metas[name], ChunkCache(1 << 20)) for name in "abc"}
    for name in "abc":
        presence = usage.presence(name, metas[name], arrays[name])
        assert presence.find(0, data=False) == 32  # the first element of a chunk not stored
        assert usage.presences.weight <= 10
    assert usage.presences.get("a") is None and usage.presences.get("c") is not None
    assert usage.presence("a", metas["a"], arrays["a"]).find(0, data=False) == 32


def test_a_shards_index_read_for_seek_data_serves_the_reads_that_follow(tmp_path):
    """SEEK_DATA finds inner chunks through the array's own shard views: the index it reads is
    the one reads then use, not fetched again (and on an object store, kept for its lifetime)."""
    root = tmp_path / "store"
    array = zarr.create_array(str(root), shape=(32,), shards=(16,), chunks=(4,), dtype="uint8", fill_value=0,
                              zarr_format=3)
    array[4:8] = 1  # one inner chunk of shard 0
    store = CountingStore(str(root))
    meta = parse_document((root / "zarr.json").read_bytes(), "zarr.json")
    opened = open_array(store, "", meta, ChunkCache(1 << 20))
    presence = Presence.of_array(["c/0"], meta, opened)
    assert presence.find(0, data=True) == 4 and presence.find(4, data=False) == 8
    assert opened.read((slice(4, 8),)).tolist() == [1] * 4
    index_reads = [get for get in store.gets if get[0] == "c/0" and isinstance(get[1], Suffix)]
    assert len(index_reads) == 1, store.gets
