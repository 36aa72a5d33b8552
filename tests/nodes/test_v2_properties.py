"""Zarr v2 metadata of every kind: what zarrfs writes, zarr-python reads, byte for byte."""

import json
import os

import numpy as np
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zarrfs
from strategies import v2_arrays
from v2_layouts import flat

SETTINGS = settings(max_examples=int(os.environ.get("ZARRFS_EXAMPLES", 100)) // 2, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(v2_arrays(), st.lists(st.tuples(st.floats(0, 1), st.integers(0, 60), st.integers(0, 2**32 - 1)), max_size=6))
def test_zarr_python_reads_what_zarrfs_writes(tmp_path_factory, doc, writes):
    root = tmp_path_factory.mktemp("a")
    (root / ".zarray").write_text(json.dumps(doc))
    z = zarr.open_array(str(root), zarr_format=2, mode="r")
    before = np.asarray(z[...], dtype=z.dtype)  # a 0-d read is a scalar, perhaps of a narrower type
    model = bytearray(flat(before))
    with zarrfs.open_raw(str(root), mode="r+") as view:
        assert view.read(0, view.size + 1) == bytes(model)  # the fill value, as zarr-python reads it
        itemsize = before.dtype.itemsize
        for where, length, seed in writes:
            first = int(where * (len(model) // itemsize)) if itemsize else 0
            count = min(length, len(model) // itemsize - first)
            if count <= 0:
                continue
            new = np.frombuffer(np.random.default_rng(seed).bytes(count * itemsize), "u1").copy()
            if before.dtype.kind == "b":
                new %= 2
            if before.dtype.kind == "U":  # valid code points: others are refused (test_v2.py)
                new = (new.view("<u4") % 0x110000).view("u1")
            view.write(first * itemsize, new.tobytes())
            model[first * itemsize:(first + count) * itemsize] = new.tobytes()
    after = np.asarray(zarr.open_array(str(root), zarr_format=2, mode="r")[...], dtype=z.dtype)
    assert flat(after) == bytes(model)
    with zarrfs.open_raw(str(root)) as view:
        assert view.read(0, view.size) == bytes(model)
