"""Arrays that grow on an object store (SeaweedFS, issue 39): records appended through one mount
are stored with the new shape in zarr.json (a conditional PUT), zarr-python reads them, a second
mount sees the new shape within metadata_ttl, and a second appender that still knows the old
shape stores its records after the first one's, never over them."""

import os

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

from mounting import mounted, wait_for
from servers.seaweed import unique_prefix

ROW = 64  # int32 elements a record


def records(first: int, count: int) -> np.ndarray:
    return np.arange(first * ROW, (first + count) * ROW, dtype="<i4").reshape(count, ROW)


def mount(seaweed, prefix, tmp_path, *options, name):
    return mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options("grow=all", *options), name=name,
                   env=seaweed.env())


def stored(seaweed, prefix) -> np.ndarray:
    return zarr.open_array(seaweed.zarr_store(prefix), path="a", mode="r")[...]


@pytest.mark.parametrize("shards", [None, (8, ROW)])
def test_appends_on_an_object_store(seaweed, tmp_path, shards):
    prefix = unique_prefix("grow")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array(
        "a", shape=(3, ROW), chunks=(2, ROW), shards=shards, dtype="<i4", compressors=[ZstdCodec(level=1)]
    )[...] = records(0, 3)
    with mount(seaweed, prefix, tmp_path, "metadata_ttl=1", name="reader") as reader, \
            mount(seaweed, prefix, tmp_path, name="writer") as writer:
        assert os.stat(reader / "a.bin").st_size == 3 * ROW * 4
        with open(writer / "a.bin", "ab") as f:
            f.write(records(3, 5).tobytes())
        assert np.array_equal(stored(seaweed, prefix), records(0, 8))
        wait_for(lambda: os.stat(reader / "a.bin").st_size == 8 * ROW * 4, timeout=30,
                 what="the other mount to see the new shape")
        assert (reader / "a.bin").read_bytes() == records(0, 8).tobytes()


def test_a_second_appender_on_an_object_store_appends_after_the_first(seaweed, tmp_path):
    """The second mount's descriptor knows 2 records; the first mount stores 3 more. The
    second's record, written for the old end, is stored after them: nothing is written over."""
    prefix = unique_prefix("grow2")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array(
        "a", shape=(2, ROW), chunks=(2, ROW), dtype="<i4", compressors=[ZstdCodec(level=1)])[...] = records(0, 2)
    expected = np.concatenate([records(0, 5), records(100, 1)])
    with mount(seaweed, prefix, tmp_path, name="first") as first, \
            mount(seaweed, prefix, tmp_path, name="second") as second:
        late = os.open(second / "a.bin", os.O_WRONLY | os.O_APPEND)  # knows 2 records
        try:
            with open(first / "a.bin", "ab") as f:
                f.write(records(2, 3).tobytes())
            os.write(late, records(100, 1).tobytes())
            os.fsync(late)
            assert np.array_equal(stored(seaweed, prefix), expected)
        finally:
            os.close(late)
    assert np.array_equal(stored(seaweed, prefix), expected)
    assert not list((tmp_path / "second.recovery").glob("*"))
