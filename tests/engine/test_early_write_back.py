"""A long write is written back while it goes on, from EARLY_WRITE_BACK dirty bytes on, well
before a quarter of dirty_size: in process, with the flusher's timer set far off, so that only
the early start can store anything. The file system core serves it, with no FUSE adapter."""

import os

import numpy as np
import zarr

from mounting import wait_for
from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.engine.write_bound import EARLY_WRITE_BACK
from zarrfs.fs.filesystem import FileSystem, Options

CHUNK = 1 << 20


def test_a_long_write_starts_its_write_back_at_the_early_threshold(tmp_path):
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(64 * CHUNK,), chunks=(CHUNK,), dtype="u1", fill_value=0)
    values = np.random.default_rng(3).integers(0, 255, 64 * CHUNK, dtype="u1")
    options = Options(recovery_dir=str(tmp_path / "recovery"))  # not the machine's
    options.flush_interval = 600.0  # no timed write-back during the test
    assert EARLY_WRITE_BACK + 2 * CHUNK < options.dirty_limit // 4
    fs = FileSystem(str(root), options, HierarchyEdits)  # the core: no FUSE adapter, no mount
    fs.start()
    try:
        fh = fs.open("/a.zarr.bin", os.O_WRONLY)
        for offset in range(0, EARLY_WRITE_BACK + 2 * CHUNK, CHUNK):
            fs.write(fh, values[offset:offset + CHUNK].tobytes(), offset)
        wait_for(lambda: np.array_equal(zarr.open_array(str(root))[:EARLY_WRITE_BACK], values[:EARLY_WRITE_BACK]),
                 timeout=30, what="the early write-back, before any fsync")
        fs.release(fh)
    finally:
        fs.stop()
