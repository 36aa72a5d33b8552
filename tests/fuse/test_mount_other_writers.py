"""What a mount of a local store shows of another program's writes to the store (zarr-python
writing it directly while it is mounted): a read-only mount, which no write of its own goes
through, shows them once the file's mtime follows them; a writable one once it finds stored
values it did not store itself (fs/kernel_caching.py). Each mount trusts its listings and the
kernel its attributes for -o metadata_ttl=2 instead of the default 30 s: the same ways of
noticing, looked at sooner."""

import os

import numpy as np
import zarr

from mounting import mounted, wait_for


def test_a_read_only_mount_shows_values_another_program_rewrote(tmp_path):
    """zarr-python rewrites every element of two arrays in place (same shape, same size) while
    a read-only mount serves them, after a reader has read them through the kernel's page cache.
    The reader, reading the whole file again, sees the new values once the file's mtime shows the
    change. With the kernel's auto_inval_data turned off for every local mount, its pages of the
    old values were kept until a remount, whatever the mtime said."""
    root = tmp_path / "g.zarr"
    group = zarr.open_group(root, mode="w", zarr_format=3)
    old = np.arange(40 * 1024, dtype="<i4").reshape(40, 1024)
    for name, compressors in (("raw", None), ("packed", "auto")):
        group.create_array(name, shape=old.shape, chunks=(10, 1024), dtype="<i4", compressors=compressors)[...] = old
    new = old * 3 + 1
    with mounted(root, tmp_path, "ro", "metadata_ttl=2") as m:
        for name in ("raw", "packed"):
            assert (m / f"{name}.bin").read_bytes() == old.tobytes()  # now in the kernel's pages
        for name in ("raw", "packed"):
            zarr.open_array(root / name, mode="r+")[...] = new
        # the mtime follows the stored values within their lifetime (metadata_ttl, stored_usage.py)
        # and the kernel's attributes' (as long): bounded well past both
        for name in ("raw", "packed"):
            wait_for(lambda name=name: (m / f"{name}.bin").read_bytes() == new.tobytes(), 60, f"{name}.bin's new values")


def test_a_writable_mount_shows_a_chunk_another_program_rewrote(tmp_path):
    """A writable mount serves two arrays whose pages a reader holds (after a write through the
    mount moved their mtimes): of `held` by a descriptor kept open, of `reopened` by reading the
    whole file. zarr-python rewrites one chunk of each in place (same shape). The held descriptor
    (which sends no request for pages the kernel holds) and a new open read the new values and
    the mount's own write beside them. The pages of a writable mount were kept until a remount:
    its own writes move the mtime, so a new one said nothing."""
    root = tmp_path / "g.zarr"
    old = np.arange(40 * 1024, dtype="<i4").reshape(40, 1024)
    group = zarr.open_group(root, mode="w", zarr_format=3)
    for name in ("held", "reopened"):
        group.create_array(name, shape=old.shape, chunks=(10, 1024), dtype="<i4", compressors="auto")[...] = old
    mine, theirs = np.full((10, 1024), 5, "<i4"), np.full((10, 1024), 9, "<i4")
    before, expected = np.concatenate([old[:30], mine]), np.concatenate([theirs, old[10:30], mine])
    with mounted(root, tmp_path, "metadata_ttl=2") as m:
        for name in ("held", "reopened"):
            with open(m / f"{name}.bin", "r+b") as f:
                os.pwrite(f.fileno(), mine.tobytes(), 30 * 1024 * 4)  # the last chunk, through the mount
                os.fsync(f.fileno())
        held = os.open(m / "held.bin", os.O_RDONLY)
        try:
            assert os.pread(held, old.nbytes, 0) == before.tobytes()  # now in the kernel's pages
            assert (m / "reopened.bin").read_bytes() == before.tobytes()
            for name in ("held", "reopened"):
                zarr.open_array(root / name, mode="r+")[:10] = theirs
            # the stored values are listed again after their lifetime (metadata_ttl, stored_usage.py)
            # and a held array looked at as often (FileSystem._watch_stored_changes): bounded well past both
            wait_for(lambda: os.pread(held, old.nbytes, 0) == expected.tobytes(), 60,
                     "the held descriptor to read the new chunk")
            wait_for(lambda: (m / "reopened.bin").read_bytes() == expected.tobytes(), 60,
                     "a new open to read the new chunk")
        finally:
            os.close(held)
        assert "ERROR" not in m.settled_log()
    for name in ("held", "reopened"):
        assert np.array_equal(zarr.open_array(root / name, mode="r")[...], expected)
