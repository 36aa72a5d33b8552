"""The flat view against a bytes model (numpy's C-order little-endian bytes) for every layout."""

import math
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import array_doc, open_raw_file, write_doc
from strategies import layouts
from zarrfs.format.data_types import parse_data_type
from zarrfs.stores.local import LocalStore

SETTINGS = settings(max_examples=int(os.environ.get("ZARRFS_EXAMPLES", 150)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def normalise(data_type: str, data: bytes) -> bytes:
    """What the flat view holds after `data` is written: bool is one byte, 0 or 1."""
    return bytes(b != 0 for b in data) if data_type == "bool" else data


def fill_bytes(data_type, fill, n):
    return parse_data_type(data_type).fill_value(fill).tobytes() * n if fill is not None else None


operations = st.lists(st.tuples(st.sampled_from(["write", "write", "read", "flush", "reopen"]),
                                st.floats(0, 1), st.integers(0, 80), st.integers(0, 2**32 - 1)), max_size=12)


@SETTINGS
@given(layouts(), operations)
def test_reads_and_writes_match_a_bytes_model(tmp_path_factory, layout, ops):
    shape, data_type, fill, chunk_shape, codecs = layout
    root = tmp_path_factory.mktemp("a")
    doc = array_doc(shape, data_type, chunk_shape, codecs, fill_value=fill)
    write_doc(root, "", doc)
    store = LocalStore(root)
    raw = open_raw_file(store, cache_bytes=4096)  # a small cache: evictions happen
    n = math.prod(shape)
    model = bytearray(parse_data_type(data_type).fill_value(doc["fill_value"]).tobytes() * n)
    assert raw.size == len(model)
    for op, where, length, seed in ops:
        offset = int(where * len(model))
        if op == "write":
            length = min(length, len(model) - offset)
            data = np.random.default_rng(seed).integers(0, 256, length, dtype=np.uint8).tobytes()
            assert raw.write(offset, data) == length
            element = raw.itemsize
            model[offset:offset + length] = data
            first, last = offset // element * element, -(-(offset + length) // element) * element
            model[first:last] = normalise(data_type, bytes(model[first:last]))
        elif op == "read":
            assert raw.read(offset, length) == bytes(model[offset:offset + length])
        elif op == "flush":
            raw.flush()
        else:
            raw.flush()
            raw = open_raw_file(store)
    assert raw.read(0, len(model) + 10) == bytes(model)
    raw.flush()
    assert open_raw_file(store).read(0, len(model)) == bytes(model)


@SETTINGS
@given(layouts(max_ndim=2), st.integers(0, 2**32 - 1))
def test_full_overwrite_then_all_fill_deletes_everything(tmp_path_factory, layout, seed):
    shape, data_type, fill, chunk_shape, codecs = layout
    root = tmp_path_factory.mktemp("a")
    write_doc(root, "", array_doc(shape, data_type, chunk_shape, codecs, fill_value=fill))
    raw = open_raw_file(LocalStore(root))
    data = np.random.default_rng(seed).integers(0, 256, raw.size, dtype=np.uint8).tobytes()
    raw.write(0, data)
    raw.flush()
    assert open_raw_file(LocalStore(root)).read(0, raw.size) == normalise(data_type, data)
    fill_value = parse_data_type(data_type).fill_value(array_doc(shape, data_type, chunk_shape, fill_value=fill)["fill_value"])
    raw.write(0, fill_value.tobytes() * math.prod(shape))
    raw.flush()
    assert [p.name for p in root.rglob("*") if p.is_file()] == ["zarr.json"]
