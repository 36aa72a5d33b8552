"""What a mount of a local store shows of another program's writes to the store (zarr-python
writing it directly while it is mounted): a read-only mount, which no write of its own goes
through, shows them once the file's mtime follows them (fs/kernel_caching.py)."""

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
    with mounted(root, tmp_path, "ro") as m:
        for name in ("raw", "packed"):
            assert (m / f"{name}.bin").read_bytes() == old.tobytes()  # now in the kernel's pages
        for name in ("raw", "packed"):
            zarr.open_array(root / name, mode="r+")[...] = new
        # the mtime follows the stored values within their lifetime (30 s, stored_usage.py) and the
        # kernel's attributes' (30 s): bounded well past both
        for name in ("raw", "packed"):
            wait_for(lambda name=name: (m / f"{name}.bin").read_bytes() == new.tobytes(), 150, f"{name}.bin's new values")
