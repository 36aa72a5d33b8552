"""Uncompressed chunks answered from the stored files themselves (engine/stored_as_is.py,
FileSystem.stored_ranges, fuse/replies.read_stored): the bytes always equal NumPy's, whichever
way each request goes, and the fast path is taken where it may be and nowhere else. Through a
real mount where the kernel makes the requests (read-ahead, its page cache, writes through it);
where the path each request takes is the subject, asked of the core without a mount (core.py),
whose reads take the stored files' ranges as the adapter's read_buf does."""

import errno
import os
import shutil
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from zarr.codecs import BytesCodec, ShardingCodec

from core import core_of
from mounting import Remounts, mounted
from zarr_layouts import create, random_values

FAST_ANY = "stored ranges as they are"  # the debug line of a READ answered from stored files


def flat(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes()


def pread_all(path, size: int, step: int, random: bool = False) -> bytes:
    """The file read with preads of `step` bytes; random: without the kernel's read-ahead, so
    that each page not cached is a READ of its own (a small read, which keeps its files open)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if random:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        return b"".join(os.pread(fd, step, offset) for offset in range(0, size, step))
    finally:
        os.close(fd)


def fast_reads(mount) -> int:
    """Reads answered from the stored files so far, counted once the mount is idle: the kernel's
    read-ahead goes on after the read that started it returns."""
    return mount.settled_log().count(FAST_ANY)


def fast_reads_in(core) -> int:
    """Reads the core answered from the stored files so far."""
    return core.log().count(FAST_ANY)


def pread_all_in(core, path: str, size: int, step: int) -> bytes:
    """The core's file read with preads of `step` bytes (each reaches the core: no page cache)."""
    fh = core.open(path, os.O_RDONLY)
    try:
        return b"".join(core.pread(fh, step, offset) for offset in range(0, size, step))
    finally:
        core.close(fh)


@pytest.fixture()
def uncompressed(tmp_path):
    """A 2-D float32 array whose chunks span whole rows except at the bottom edge, one chunk
    missing (a hole), and a 3-D int16 array whose chunks are narrower than its rows."""
    root = tmp_path / "data.zarr"
    group = zarr.open_group(str(root), mode="w")
    rng = np.random.default_rng(26)
    rows = random_values("float32", (1000, 300), rng)
    a = create(root / "rows", shape=rows.shape, layout="bytes-little", chunks=(64, 300))
    a[...] = rows
    a[128:192] = 0  # all fill value: zarr-python stores nothing there
    rows[128:192] = 0
    assert not (root / "rows" / "c" / "2" / "0").exists()
    cubes = random_values("int16", (7, 50, 90), rng)
    b = create(root / "cubes", dtype="int16", shape=cubes.shape, layout="bytes-little", chunks=(3, 16, 40))
    b[...] = cubes
    big = random_values("float64", (40, 33), rng)
    c = create(root / "big", dtype="float64", shape=big.shape, layout="bytes-big", chunks=(16, 33))
    c[...] = big
    del group
    return root, {"rows": rows, "cubes": cubes, "big": big}


@pytest.mark.parametrize("step", [4096, 1000, 65536, 1 << 20])
def test_uncompressed_reads_equal_numpy(uncompressed, tmp_path, step):
    """Every request size, aligned or not, across chunk edges, partial edge chunks and a hole."""
    root, arrays = uncompressed
    with mounted(root, tmp_path, "ro", "debug") as m:
        for name, values in arrays.items():
            expected = flat(values)
            assert pread_all(m / f"{name}.bin", len(expected), step) == expected, name
        assert fast_reads(m) > 0


def test_fast_path_taken_and_turned_off(uncompressed, tmp_path):
    """A 4 KiB read inside one stored chunk is answered from the stored file; with nozerocopy it is not
    (so this test fails if the fast path is disabled)."""
    root, arrays = uncompressed
    expected = flat(arrays["rows"])
    with core_of(root, tmp_path, "ro", "debug", name="on") as c:
        fh = c.open("/rows.bin", os.O_RDONLY)
        try:
            assert c.pread(fh, 4096, 8192) == expected[8192:12288]
        finally:
            c.close(fh)
        assert fast_reads_in(c) > 0
    with core_of(root, tmp_path, "ro", "debug", "nozerocopy", name="off") as c:
        assert pread_all_in(c, "/rows.bin", len(expected), 65536) == expected
        assert fast_reads_in(c) == 0


def test_holes_and_big_endian_fall_back(uncompressed, tmp_path):
    """A hole reads as the fill value and a big-endian array is swapped: neither from stored files."""
    root, arrays = uncompressed
    with core_of(root, tmp_path, "ro", "debug") as c:
        hole = 128 * 300 * 4
        fh = c.open("/rows.bin", os.O_RDONLY)
        try:
            assert c.pread(fh, 4096, hole) == bytes(4096)
        finally:
            c.close(fh)
        assert fast_reads_in(c) == 0
        expected = flat(arrays["big"])
        assert c.read_bytes("/big.bin") == expected
        assert fast_reads_in(c) == 0


def test_written_data_is_visible_before_and_after_write_back(uncompressed, tmp_path):
    """Dirty chunks in memory win over the stored bytes; after fsync the new stored bytes are served."""
    root, arrays = uncompressed
    rows = arrays["rows"].copy()
    expected = bytearray(flat(rows))
    with mounted(root, tmp_path, "debug") as m:
        path = m / "rows.bin"
        assert pread_all(path, len(expected), 1 << 20) == expected  # pages cached from the stored files
        fd = os.open(path, os.O_RDWR)
        try:
            patch = np.arange(1000, dtype="<f4").tobytes()
            os.pwrite(fd, patch, 50_000)
            expected[50_000:50_000 + len(patch)] = patch
            # a second open without the page cache: each READ reaches the daemon
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            assert pread_all(path, len(expected), 4096, random=True) == expected
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            before = fast_reads(m)
            assert pread_all(path, len(expected), 4096, random=True) == expected
            assert fast_reads(m) > before  # the written chunk is stored now: served as it is again
        finally:
            os.close(fd)
    stored = zarr.open_array(str(root / "rows"), mode="r")[...]
    assert flat(stored) == bytes(expected)


def test_sharded_bytes_inner_chunks(tmp_path):
    """Inner chunks stored as they are inside shards are served from ranges of the shard file;
    an empty inner chunk reads as the fill value."""
    root = tmp_path / "data.zarr"
    values = random_values("uint16", (3900, 512), np.random.default_rng(3))  # the last shard partial
    values[400:500] = 7  # the fill value: that inner chunk is left out of its shard
    a = zarr.create_array(str(root), shape=values.shape, dtype="uint16", chunks=(400, 512), fill_value=7,
                          compressors=None, serializer=ShardingCodec(chunk_shape=(100, 512), codecs=[BytesCodec()]))
    a[...] = values
    with core_of(root, tmp_path, "ro", "debug") as c:
        expected = flat(values)
        name = next(p for p in c.listdir("/") if p.endswith(".bin"))
        for step in (1000, 4096, 1 << 20):
            assert pread_all_in(c, f"/{name}", len(expected), step) == expected, step
        assert fast_reads_in(c) > 0


def test_truncated_chunk_is_an_error_not_a_short_file(uncompressed, tmp_path):
    """A stored chunk shorter than a chunk is corrupt: the read fails (EIO), as the decoding path
    says, and is never answered short from the file (a short reply would read as the end of file)."""
    root, arrays = uncompressed
    chunk = root / "rows" / "c" / "5" / "0"  # flat bytes 384000-460800
    chunk.write_bytes(chunk.read_bytes()[:4096 * 3])
    offset = 96 * 4096  # a page inside it, reaching past the bytes left
    with core_of(root, tmp_path, "ro", "debug") as c:
        fh = c.open("/rows.bin", os.O_RDONLY)
        try:
            with pytest.raises(OSError) as raised:
                c.pread(fh, 4096, offset)
            assert raised.value.errno == errno.EIO
            assert c.pread(fh, 4096, 0) == flat(arrays["rows"])[:4096]
        finally:
            c.close(fh)
        assert fast_reads_in(c) > 0


def test_npy_view_past_its_header(uncompressed, tmp_path):
    """NAME.npy is the header then the same bytes: past the header, served from the stored files too."""
    root, arrays = uncompressed
    with core_of(root, tmp_path, "ro", "debug") as c:
        before = fast_reads_in(c)
        for name in ("rows", "cubes"):
            with c.file(f"/{name}.npy") as f:
                np.testing.assert_array_equal(np.load(f), arrays[name])
        assert fast_reads_in(c) > before


def test_hdf5_view_datasets(tmp_path):
    """zarr.h5 maps each dataset's bytes onto its array's flat bytes (datasets of 1 MiB or more
    begin on a 1 MiB boundary): the kernel's reads within one are served from the stored files
    too, and h5py reads every value."""
    root = tmp_path / "data.zarr"
    zarr.open_group(str(root), mode="w")
    values = random_values("float32", (1024, 512), np.random.default_rng(5))  # 2 MiB, no hole
    create(root / "plain", shape=values.shape, layout="bytes-little", chunks=(128, 512))[...] = values
    with core_of(root, tmp_path, "ro", "debug") as c:
        with c.file("/zarr.h5") as file, h5py.File(file, "r") as f:
            np.testing.assert_array_equal(f["plain"][...], values)
        assert fast_reads_in(c) > 0


SIZE = 240 * 20 * 2  # uint16 (240, 20) in (64, 20) chunks: the last one overhangs


class StoredAsIsFile(Remounts, RuleBasedStateMachine):
    """A bytearray model against an uncompressed array's .bin under writes, fsyncs and reads
    that reach the daemon (the kernel's pages dropped first): stored bytes never win over
    written ones, before, during or after write-back. Holes come and go (fill value 9)."""

    held = "a.zarr.bin"

    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.root = self.tmp / "a.zarr"
        z = zarr.create_array(str(self.root), shape=(240, 20), chunks=(64, 20), dtype="uint16", fill_value=9,
                              compressors=None)
        z[70:] = np.arange(170 * 20).reshape(170, 20)  # the first chunk a hole
        self.model = bytearray(flat(np.asarray(z[...])))
        self._mount()

    def _mount(self):
        super()._mount()
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)  # small READs: they keep their files open

    @rule(offset=st.integers(0, SIZE - 1), data=st.binary(min_size=1, max_size=3000))
    def write(self, offset, data):
        data = data[:SIZE - offset]
        assert os.pwrite(self.fd, data, offset) == len(data)
        self.model[offset:offset + len(data)] = data

    @rule(offset=st.integers(0, SIZE + 10), size=st.integers(0, 5000))
    def read(self, offset, size):
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert os.pread(self.fd, size, offset) == bytes(self.model[offset:offset + size])

    @rule(value=st.sampled_from([9, 0]))
    def fill_all(self, value):
        """Every element the fill value (9): write-back deletes every chunk, a hole everywhere."""
        data = np.full(SIZE // 2, value, "<u2").tobytes()
        assert os.pwrite(self.fd, data, 0) == SIZE
        self.model[:] = data

    @rule()
    def fsync(self):
        os.fsync(self.fd)

    def teardown(self):
        try:
            self._unmount()
            assert flat(np.asarray(zarr.open_array(str(self.root))[...])) == bytes(self.model)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


StoredAsIsFile.TestCase.settings = settings(max_examples=10, stateful_step_count=30, deadline=None)
test_stored_as_is_file_matches_a_bytearray = StoredAsIsFile.TestCase
