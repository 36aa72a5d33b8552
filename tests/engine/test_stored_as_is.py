"""engine/stored_as_is.py without a mount: which stored bytes hold which flat bytes, checked
against a brute-force map of every byte, and which arrays qualify at all."""

import math

import numpy as np
import pytest
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import zarrfs
from zarr_layouts import create
from zarrfs.engine import stored_as_is


def brute_force(shape, leaf, itemsize) -> list[tuple[tuple, int]]:
    """(chunk coords, byte offset in the stored chunk) of every byte of the flat file."""
    out = []
    for index in np.ndindex(*shape):
        coords = tuple(i // c for i, c in zip(index, leaf, strict=True))
        local = tuple(i % c for i, c in zip(index, leaf, strict=True))
        position = int(np.ravel_multi_index(local, leaf)) * itemsize
        out.extend((coords, position + b) for b in range(itemsize))
    return out


@st.composite
def layouts(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 7)) for _ in range(ndim))
    split = draw(st.integers(0, ndim - 1))  # dimensions after it are whole in every chunk
    leaf = tuple(draw(st.integers(1, 8)) if d <= split else shape[d] for d in range(ndim))
    itemsize = draw(st.sampled_from([1, 2, 4]))
    size = math.prod(shape) * itemsize
    offset = draw(st.integers(0, size - 1))
    n = draw(st.integers(1, size - offset))
    return shape, leaf, itemsize, offset, n


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_runs_cover_exactly_the_bytes_asked_for(case):
    shape, leaf, itemsize, offset, n = case
    split = max([d for d in range(len(leaf)) if leaf[d] != shape[d]], default=0)
    plan = stored_as_is.Layout(shape, leaf, None, split, math.prod(shape[split + 1:]) * itemsize,
                               math.prod(leaf) * itemsize)
    runs = stored_as_is.runs(plan, offset, n)
    expected = brute_force(shape, leaf, itemsize)[offset:offset + n]
    if runs is None:  # too many ranges: the caller decodes instead
        return
    got = [(coords, within + i) for coords, within, length in runs for i in range(length)]
    assert got == expected


@pytest.mark.parametrize("layout, dtype, qualifies", [
    ("bytes-little", "float32", True), ("bytes-little", "int16", True), ("bytes-little", "uint8", True),
    ("bytes-big", "float32", False), ("bytes-big", "uint8", True),  # one byte has no order
    ("bytes-little", "bool", False),  # stored bytes may be any nonzero value, the flat file shows 0 or 1
    ("zstd", "float32", False), ("crc32c", "float32", False), ("transpose", "float32", False),
    ("sharded-end", "float32", False), ("nested-sharding", "float32", False),
])
def test_which_arrays_qualify(tmp_path, layout, dtype, qualifies):
    create(tmp_path / "a.zarr", dtype=dtype, layout=layout)
    raw = zarrfs.open_raw(str(tmp_path / "a.zarr"), "")._raw
    assert (stored_as_is.layout(raw.array) is not None) == qualifies


def test_sharded_bytes_inner_chunks_qualify(tmp_path):
    from zarr.codecs import BytesCodec, ShardingCodec
    zarr.create_array(str(tmp_path / "a.zarr"), shape=(10, 8), dtype="float32", chunks=(4, 8), compressors=None,
                      serializer=ShardingCodec(chunk_shape=(2, 8), codecs=[BytesCodec()]))
    plan = stored_as_is.layout(zarrfs.open_raw(str(tmp_path / "a.zarr"), "")._raw.array)
    assert plan is not None and plan.leaf == (2, 8) and plan.outer == (4, 8)
