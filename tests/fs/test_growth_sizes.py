"""NAME.bin's size while the array grows, asked of the core without FUSE: the size the kernel
takes from getattr never goes back to a smaller stored one, even when a write-back stores the
new shape (and swaps the array's node) in the middle of the getattr."""

import os

import numpy as np
import pytest
import zarr

from helpers import make_store
from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.fs.filesystem import FileSystem, Options


@pytest.fixture
def core(tmp_path):
    root = make_store(tmp_path / "s.zarr")  # a: 4 int32, records of 4 bytes
    fs = FileSystem(str(root), Options(recovery_dir=str(tmp_path / "recovery"), grow="all"), HierarchyEdits)
    try:
        yield fs, root
    finally:
        fs.stop()


def write_back_after_lookup(fs: FileSystem) -> None:
    """The next lookup of the hierarchy returns its entry, and then (before the caller uses it)
    the table's write-back runs: the window a flusher thread may hit."""
    lookup = fs.hierarchy.lookup

    def looked_up(path):
        fs.hierarchy.lookup = lookup
        entry = lookup(path)
        fs.arrays.flush_all()
        return entry

    fs.hierarchy.lookup = looked_up


def test_a_getattr_that_a_write_back_of_a_growth_overtakes_answers_the_grown_size(core):
    fs, root = core
    fh = fs.open("/a.bin", os.O_WRONLY)
    fs.write(fh, np.array([4, 5], "<i4").tobytes(), 16)  # two records appended, not stored yet
    write_back_after_lookup(fs)
    assert fs.getattr("/a.bin")["st_size"] == 24
    assert zarr.open_array(str(root / "a")).shape == (6,)  # the write-back did store it meanwhile
    assert fs.getattr("/a.bin")["st_size"] == 24
    fs.release(fh)

