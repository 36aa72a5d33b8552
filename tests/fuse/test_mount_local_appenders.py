"""A mount and another zarrfs process (zarrfs.open_raw) append to one array of a local store at
once (docs/writing.md, "Two writers on a local store"): the mount's records go through
NAME.bin with O_APPEND, each fsynced; every record of both is stored, each writer's in order."""

import multiprocessing
import multiprocessing.synchronize
import os

import numpy as np
import zarr

import zarrfs
from mounting import mounted

APPENDS = 200  # records each writer appends, each stored before the next
WIDTH = 3


def record(writer: int, n: int) -> bytes:
    return np.array([writer, n, -1], "<i4").tobytes()


def append_through_open_raw(root: str, start: multiprocessing.synchronize.Event) -> None:
    with zarrfs.open_raw(root, "a", mode="r+", grow="all") as view:
        start.wait(60)
        for n in range(APPENDS):
            view.append(record(2, n))
            view.flush()


def test_a_mount_and_open_raw_appending_at_once_store_every_record(tmp_path):
    root = tmp_path / "g.zarr"
    zarr.open_group(str(root), mode="w").create_array("a", shape=(0, WIDTH), chunks=(2, WIDTH), dtype="<i4",
                                                      fill_value=0)
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Event()
    other = spawn.Process(target=append_through_open_raw, args=(str(root), start))
    with mounted(root, tmp_path, "grow=all") as m:
        other.start()
        try:
            fd = os.open(m / "a.bin", os.O_WRONLY | os.O_APPEND)
            try:
                start.set()
                for n in range(APPENDS):
                    os.write(fd, record(1, n))
                    os.fsync(fd)
            finally:
                os.close(fd)
            other.join(300)
            assert other.exitcode == 0
        finally:
            if other.is_alive():
                other.kill()
                other.join()
    records = zarr.open_array(str(root), path="a")[...]
    assert records.shape == (2 * APPENDS, WIDTH)
    for writer in (1, 2):
        assert records[records[:, 0] == writer, 1].tolist() == list(range(APPENDS))
    assert (records[:, 2] == -1).all()
