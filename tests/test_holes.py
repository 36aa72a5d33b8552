"""SEEK_DATA/SEEK_HOLE arithmetic against a brute-force model of which flat elements are stored."""

import errno
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zarrfs.holes import SEEK_DATA, SEEK_HOLE, Presence, SeekError, coords_of, seek
from zarrfs.metadata import ChunkKeyEncoding


@st.composite
def grids(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0, 7)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    cells = list(itertools.product(*(range(-(-n // c)) for n, c in zip(shape, chunks))))
    present = [c for c in cells if draw(st.booleans())]
    return shape, chunks, present


def stored_elements(shape, chunks, present) -> np.ndarray:
    """True for each flat element whose chunk is stored."""
    mask = np.zeros(shape, bool)
    for coords in present:
        mask[tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords, chunks))] = True
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
