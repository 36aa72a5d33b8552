"""Two file system cores on one local store append to one array (docs/writing.md, "Two writers
appending"), without a mount: the second one's records move after the first one's, and its
O_APPEND writes then go at the end the core has, not at the offset the kernel would send."""

import os

import numpy as np
import zarr

from core import core_of

RECORD = 12  # bytes: a record of 3 int32


def records(first: int, count: int) -> np.ndarray:
    return np.arange(first * 3, (first + count) * 3, dtype="<i4").reshape(count, 3) * 7 + 1


def test_an_o_append_write_after_a_rebase_goes_at_the_end_the_core_has(tmp_path):
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w")
    group.create_array("a", shape=(3, 3), chunks=(2, 3), dtype="<i4", fill_value=-1)[...] = records(0, 3)
    with core_of(root, tmp_path, "grow=all", name="first") as first, \
            core_of(root, tmp_path, "grow=all", name="second") as second:
        late = second.open("/a.bin", os.O_WRONLY | os.O_APPEND)
        second.pwrite(late, records(100, 2).tobytes(), 3 * RECORD)
        early = first.open("/a.bin", os.O_WRONLY | os.O_APPEND)
        first.pwrite(early, records(50, 3).tobytes(), 3 * RECORD)
        first.close(early)
        second.fsync(late)  # its records move after the first one's
        assert second.stat("/a.bin")["st_size"] == 8 * RECORD
        second.pwrite(late, records(102, 1).tobytes(), 5 * RECORD)  # the kernel's offset: the end it knew
        second.close(late)
        expected = np.concatenate([records(0, 3), records(50, 3), records(100, 3)])
        assert np.array_equal(zarr.open_array(str(root / "a"))[...], expected)
        assert second.read_bytes("/a.bin") == expected.tobytes()
        assert "appended at 96, the end, where the kernel had the end at 60" in second.log()
    assert np.array_equal(zarr.open_array(str(root / "a"))[...], expected)
    assert not list((tmp_path / "second.recovery").glob("*"))
