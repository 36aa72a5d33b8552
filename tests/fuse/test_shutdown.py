"""Stopping with data that cannot be stored: it is retried, saved for recovery, replayed by
zarrfs-recover, and the daemon's exit status says so. A close that has nothing to write back
writes and syncs nothing."""

import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from helpers import fill_disk
from mounting import RECOVER, mounted, reap, unmount


@pytest.mark.parametrize("stop", ["unmount", "SIGTERM"])
def test_unstorable_data_is_saved_replayed_and_the_exit_status_says_so(tmp_path, tiny_tmpfs, stop):
    root = tiny_tmpfs / "a.zarr"
    z = zarr.create_array(str(root), shape=(64, 1024), chunks=(8, 512), shards=(16, 1024), dtype="uint8",
                          compressors=None, fill_value=0)
    original = np.random.default_rng(3).integers(0, 256, (64, 1024), dtype=np.uint8)
    z[...] = original
    fill_disk(tiny_tmpfs / "filler")
    recovery = tmp_path / "recovery"
    expected = original.copy()
    expected[3, 100:900] = 0xAB  # a part of one inner chunk, merged with its stored bytes
    expected[40:48] = 0xCD  # whole inner chunks of another shard
    with mounted(root, tmp_path, f"recovery_dir={recovery}") as m:
        fd = os.open(m / "a.zarr.bin", os.O_RDWR)
        os.pwrite(fd, b"\xab" * 800, 3 * 1024 + 100)
        os.pwrite(fd, b"\xcd" * (8 * 1024), 40 * 1024)
        try:
            os.close(fd)  # close reports the failed write-back...
        except OSError:
            pass
        if stop == "unmount":  # ...and the mount goes away while the disk is still full
            unmount(m.path)
        else:
            m.process.send_signal(signal.SIGTERM)
        reap(m.process)
        assert m.process.returncode != 0
        log = m.log()
    assert (np.asarray(zarr.open_array(str(root))[...]) == original).all()  # the store as it was
    saved = sorted(recovery.iterdir())
    assert len(saved) == 1 and f"zarrfs-recover {saved[0]}" in log, log
    assert "could not be stored" in log and "Traceback" not in log

    os.unlink(tiny_tmpfs / "filler")
    result = subprocess.run([*RECOVER, str(saved[0])], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (np.asarray(zarr.open_array(str(root))[...]) == expected).all()
    assert not saved[0].exists()  # replayed, then removed


def test_recover_refuses_an_array_whose_shape_changed(tmp_path, tiny_tmpfs):
    root = tiny_tmpfs / "a.zarr"
    zarr.create_array(str(root), shape=(4096,), chunks=(1024,), dtype="uint8", compressors=None)
    fill_disk(tiny_tmpfs / "filler")
    recovery = tmp_path / "recovery"
    with mounted(root, tmp_path, f"recovery_dir={recovery}") as m:
        fd = os.open(m / "a.zarr.bin", os.O_WRONLY)
        os.pwrite(fd, b"\x01" * 1024, 0)
        with pytest.raises(OSError):
            os.close(fd)
        unmount(m.path)
        reap(m.process)
    os.unlink(tiny_tmpfs / "filler")
    zarr.create_array(str(root), shape=(8192,), chunks=(1024,), dtype="uint8", overwrite=True)
    [saved] = recovery.iterdir()
    result = subprocess.run([*RECOVER, str(saved)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "shape or data type changed" in result.stderr
    assert saved.exists()


def chunk_inodes(root) -> dict:
    return {p: p.stat().st_ino for p in Path(root).rglob("c/*")}


def test_closing_an_inherited_descriptor_with_nothing_dirty_writes_nothing(tmp_path):
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(4096,), chunks=(1024,), dtype="uint8", compressors=None)
    with mounted(root, tmp_path) as m:
        fd = os.open(m / "a.zarr.bin", os.O_RDWR)
        try:
            os.pwrite(fd, b"\x05" * 4096, 0)
            os.fsync(fd)
            stored = chunk_inodes(root)
            assert len(stored) == 4
            subprocess.run(["true"], pass_fds=[fd], check=True)  # its exit closes a copy of fd
            os.pwrite(fd, b"\x06" * 10, 0)  # dirty again: the next copy's close writes back this chunk only
            subprocess.run(["true"], pass_fds=[fd], check=True)
            now = chunk_inodes(root)
            assert [p for p in stored if now[p] != stored[p]] == [root / "c" / "0"]
        finally:
            os.close(fd)
