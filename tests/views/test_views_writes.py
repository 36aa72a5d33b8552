"""Writing through NAME.npy, and coherence between the views of one array: NAME.bin, NAME.npy and
NAME.img (NIfTI) are separate files to the kernel, yet each sees the others' writes at once,
through read and through mmap.

What the file system refuses is asked of the core without a mount (core.py); coherence between
the kernel's pages of the views, mmap and listings need a mount."""

import errno
import io
import mmap
import os
import shutil
import stat
import subprocess
import time

import numpy as np
import pytest
import zarr

from core import core_of
from helpers import run_together
from mounting import mounted

SHAPE = (64, 1024)  # 256 KiB of int32 in 16 chunks: pages of both views are cached apart


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "data.zarr"
    group = zarr.open_group(str(root), mode="w")
    z = group.create_array("a", shape=SHAPE, chunks=(16, 256), dtype="int32", dimension_names=["y", "x"])
    z[...] = np.arange(np.prod(SHAPE), dtype="int32").reshape(SHAPE)
    return root


def oracle(root) -> np.ndarray:
    return np.asarray(zarr.open_array(str(root / "a"), mode="r")[...])


def test_np_load_r_plus_writes_reach_the_bin_and_the_store(store, tmp_path):
    expected = oracle(store)
    with mounted(store, tmp_path) as m:
        values = np.load(m / "a.npy", mmap_mode="r+")
        values[3, 5:9] = [-1, -2, -3, -4]
        values[60, :] = 7
        values.flush()
        del values
        expected[3, 5:9] = [-1, -2, -3, -4]
        expected[60, :] = 7
        assert (m / "a.bin").read_bytes() == expected.astype("<i4").tobytes()
    np.testing.assert_array_equal(oracle(store), expected)


def test_a_write_that_would_change_the_header_fails_with_eperm(store, tmp_path):
    with core_of(store, tmp_path) as c:
        size = c.stat("/a.npy")["st_size"]
        assert size == 128 + c.stat("/a.bin")["st_size"]
        fh = c.open("/a.npy", os.O_WRONLY)
        try:
            for offset, data in [(0, b"X"), (120, b"\0" * 16), (10, b"{'descr': '<f8'")]:
                with pytest.raises(OSError) as info:
                    c.pwrite(fh, data, offset)
                assert info.value.errno == errno.EPERM
            assert c.pwrite(fh, np.int32(-9).tobytes(), 128) == 4  # the first element, just past the header
        finally:
            c.close(fh)
        assert "would change its 128-byte header" in c.log()
        assert np.load(io.BytesIO(c.read_bytes("/a.npy")))[0, 0] == -9
    assert oracle(store)[0, 0] == -9


def test_cp_of_a_same_shape_npy_replaces_the_data(store, tmp_path):
    """np.save of the same shape and type writes the same header: cp over NAME.npy is a full overwrite."""
    new = np.full(SHAPE, 5, "<i4")
    np.save(tmp_path / "new.npy", new)
    with mounted(store, tmp_path) as m:
        shutil.copyfile(tmp_path / "new.npy", m / "a.npy")  # O_TRUNC, then writes from offset 0
        assert np.array_equal(np.fromfile(m / "a.bin", "<i4").reshape(SHAPE), new)
        np.save(tmp_path / "other.npy", new.astype("<f4"))
        with pytest.raises(OSError) as info:
            shutil.copyfile(tmp_path / "other.npy", m / "a.npy")
        assert info.value.errno == errno.EPERM
    np.testing.assert_array_equal(oracle(store), new)


def test_views_stay_coherent_under_mmap_and_pwrite(store, tmp_path):
    with mounted(store, tmp_path, "views=npy,nifti") as m:
        fd = os.open(m / "a.bin", os.O_RDWR)
        try:
            mapping = mmap.mmap(fd, 0)
            bin_map = np.frombuffer(mapping, "<i4").reshape(SHAPE)
            npy = np.load(m / "a.npy", mmap_mode="r+")
            img = np.memmap(m / "a.img", "<i4", mode="r", shape=SHAPE)
            assert bin_map[3, 5] == npy[3, 5] == img[3, 5] == 3 * 1024 + 5  # every view's pages are cached now
            bin_map[3, 5] = -7  # through the mmap of NAME.bin
            mapping.flush()
            assert npy[3, 5] == img[3, 5] == -7
            npy[10, 10] = -8  # through the mmap of NAME.npy
            npy.flush()
            assert bin_map[10, 10] == img[10, 10] == -8
            os.pwrite(fd, np.int32(-9).tobytes(), 4 * (20 * 1024))  # through write(2) on NAME.bin
            assert npy[20, 0] == img[20, 0] == -9
            assert np.load(m / "a.npy")[20, 0] == -9  # and through read(2)
            del npy, img, bin_map
            mapping.close()
        finally:
            os.close(fd)
    expected = np.arange(np.prod(SHAPE), dtype="int32").reshape(SHAPE)
    expected[3, 5], expected[10, 10], expected[20, 0] = -7, -8, -9
    np.testing.assert_array_equal(oracle(store), expected)


def test_a_read_only_mount_refuses_writes_to_npy(store, tmp_path):
    with core_of(store, tmp_path, "ro") as c:
        with pytest.raises(OSError) as info:
            c.open("/a.npy", os.O_RDWR)
        assert info.value.errno == errno.EROFS
        with pytest.raises(OSError) as info:
            c.open("/a.mhd", os.O_RDWR)
        assert info.value.errno in (errno.EROFS, errno.EACCES)
        for name in ("/a.npy", "/a.mhd"):
            assert stat.filemode(c.stat(name)["st_mode"]) == "-r--r--r--"



def test_a_listing_after_a_write_shows_the_new_mtime_of_every_data_view(store, tmp_path):
    """Listings carry attributes (readdirplus), kept packed between listings: a write makes them
    anew. Headers and sidecars, made from the metadata alone, keep its mtime."""
    for stored in [store / "a", *(store / "a").rglob("*")]:  # the files' mtime is the newest of the
        os.utime(stored, (1000, 1000))                          # array's stored values and directories

    def mtimes(m):
        out = subprocess.run(["ls", "-l", "--time-style=+%s", str(m.path)], capture_output=True, text=True,
                             check=True).stdout
        return {line.split()[-1]: int(line.split()[-2]) for line in out.splitlines()[1:]}

    with mounted(store, tmp_path) as m:
        assert {mtimes(m)[name] for name in ("a.bin", "a.npy", "a.vrt", "a.json")} == {1000}
        started = int(time.time())
        with open(m / "a.bin", "r+b") as f:
            f.write(b"\1")
        after = mtimes(m)
        assert min(after[name] for name in ("a.bin", "a.npy")) >= started
        assert {after[name] for name in ("a.vrt", "a.mhd", "a.json")} == {1000}  # made from the metadata alone


def test_mmap_writers_on_two_views_at_once_end_coherent(store, tmp_path):
    """Writers through an mmap of NAME.bin, an mmap of NAME.npy and pwrite on both, at once: each
    write drops the other view's pages while the other may be holding them (a write that waited
    for that would wait for ever); all finish, and the views and the store agree afterwards."""
    with mounted(store, tmp_path) as m:
        fd, fdn = os.open(m / "a.bin", os.O_RDWR), os.open(m / "a.npy", os.O_RDWR)
        mapping = mmap.mmap(fd, 0)
        bin_map = np.frombuffer(mapping, "<i4").reshape(SHAPE)
        npy = np.load(m / "a.npy", mmap_mode="r+")

        def through_bin_map():
            for i in range(60):
                bin_map[i % 64, :] = i
                mapping.flush()

        def through_npy_map():
            for i in range(60):
                npy[(i * 7) % 64, :] = -i
                npy.flush()

        def through_pwrite():
            for i in range(60):
                os.pwrite(fd, np.full(1024, 1000 + i, "<i4").tobytes(), 4096 * ((i * 13) % 64))
                os.pwrite(fdn, np.full(1024, 2000 + i, "<i4").tobytes(), 128 + 4096 * ((i * 5) % 64))

        try:
            run_together(through_bin_map, through_npy_map, through_pwrite)  # raises what any of them raised
        finally:
            bin_map = npy = None  # the maps go before the mapping closes
            mapping.close()
            os.close(fd)
            os.close(fdn)
    with mounted(store, tmp_path, "ro", name="again") as m:  # fresh pages: what the store holds
        final = np.fromfile(m / "a.bin", "<i4").reshape(SHAPE)
        assert np.array_equal(np.load(m / "a.npy"), final)
    np.testing.assert_array_equal(oracle(store), final)
