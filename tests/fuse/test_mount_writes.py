"""Writes: pwrite, mmap, cp, truncate, crashes, full disks, concurrent writers, fio. What the file
system does with writes (bytes stored, ENOSPC told, the dirty bound) is asked of the core without
a mount (core.py); mmap, cp, kill -9, writers in other processes and fio go through a mount."""

import errno
import os
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import zarr

from core import core_of
from helpers import fill_disk
from mount_data import flat
from mounting import fsynced_writes_then_kill_9, mounted, wait_for
from zarr_layouts import LAYOUTS, NUMERIC, create, random_values

HERE = Path(__file__).parents[1]  # tests/, where the shared fixtures and C programs are


def zarr_bytes(path) -> bytes:
    return flat(np.asarray(zarr.open_array(str(path))[...]))


def build_arrays(root, rng):
    """One array per layout (float32) and per data type (sharded); returns {name: store path}."""
    arrays = {}
    for layout in sorted(LAYOUTS):
        z = create(root / "layouts" / layout, layout=layout, fill_value=0.0)
        z[:6] = random_values("float32", (6, 11), rng)
        arrays[f"layouts/{layout}"] = root / "layouts" / layout
    for dtype in NUMERIC:
        z = create(root / "types" / dtype, dtype=dtype, layout="nested-sharding")
        z[2:] = random_values(dtype, (11, 11), rng)
        arrays[f"types/{dtype}"] = root / "types" / dtype
    zarr.open_group(str(root), mode="a")
    zarr.open_group(str(root / "layouts"), mode="a")
    zarr.open_group(str(root / "types"), mode="a")
    return arrays


def test_random_pwrites_reach_the_store(tmp_path):
    rng = np.random.default_rng(11)
    root = tmp_path / "data.zarr"
    arrays = build_arrays(root, rng)
    models = {name: bytearray(zarr_bytes(path)) for name, path in arrays.items()}
    with core_of(root, tmp_path) as c:
        for name, model in models.items():
            fh = c.open(f"/{name}.bin", os.O_RDWR)
            try:
                for i in range(12):
                    offset = int(rng.integers(0, len(model)))
                    data = rng.integers(0, 256, int(rng.integers(1, 120)), dtype=np.uint8).tobytes()
                    data = data[:len(model) - offset]
                    if name.endswith("bool"):
                        data = bytes(b & 1 for b in data)
                    assert c.pwrite(fh, data, offset) == len(data)
                    model[offset:offset + len(data)] = data
                    if i % 5 == 0:
                        c.fsync(fh)
                assert c.pread(fh, len(model), 0) == bytes(model)  # seen at once
            finally:
                c.close(fh)
    for name, path in arrays.items():
        assert zarr_bytes(path) == bytes(models[name]), name


def test_mmap_writes_from_python_and_c(tmp_path):
    rng = np.random.default_rng(12)
    root = tmp_path / "data.zarr"
    create(root, layout="sharded-end", fill_value=0.0)[...] = random_values("float32", (13, 11), rng)
    model = bytearray(zarr_bytes(root))
    exe = tmp_path / "mmap_write"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(HERE / "c" / "mmap_write.c")], check=True)
    with mounted(root, tmp_path) as m:
        name = "data.zarr.bin"  # SOURCE is the array itself
        mapped = np.memmap(m / name, dtype="<f4", shape=(13, 11), mode="r+")
        mapped[3:5, 2:9] = -1.5
        mapped.flush()
        del mapped
        expected = np.frombuffer(bytes(model), "<f4").reshape(13, 11).copy()
        expected[3:5, 2:9] = -1.5
        model = bytearray(expected.tobytes())
        subprocess.run([str(exe), str(m / name), "101", "77"], check=True)
        model[101:178] = bytes((i * 7 + 3) & 0xFF for i in range(77))
        assert (m / name).read_bytes() == bytes(model)
    assert zarr_bytes(root) == bytes(model)


def test_cp_truncate_and_the_fixed_size(tmp_path):
    rng = np.random.default_rng(13)
    root = tmp_path / "a.zarr"
    create(root, layout="zstd", fill_value=0.0)[...] = random_values("float32", (13, 11), rng)
    size = 13 * 11 * 4
    same, larger = tmp_path / "same.bin", tmp_path / "larger.bin"
    same.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    larger.write_bytes(rng.integers(0, 256, size + 1000, dtype=np.uint8).tobytes())
    with mounted(root, tmp_path) as m:
        target = m / "a.zarr.bin"
        subprocess.run(["cp", str(same), str(target)], check=True)
        assert target.read_bytes() == same.read_bytes()
        result = subprocess.run(["cp", str(larger), str(target)], capture_output=True, text=True)
        assert result.returncode != 0 and "File too large" in result.stderr
        assert target.read_bytes() == larger.read_bytes()[:size]  # the part that fits was written
        before = target.read_bytes()
        for length in (0, 10, size + 1):
            assert subprocess.run(["truncate", "-s", str(length), str(target)], capture_output=True).returncode
        assert subprocess.run(["truncate", "-s", str(size), str(target)]).returncode == 0
        assert target.read_bytes() == before and os.stat(target).st_size == size
        fd = os.open(target, os.O_WRONLY)
        try:
            with pytest.raises(OSError) as info:
                os.pwrite(fd, b"x", size)
            assert info.value.errno == errno.EFBIG
        finally:
            os.close(fd)
        sidecar = (m / "a.zarr.json").read_bytes()
        with pytest.raises(OSError) as info:  # the sidecar is written for its attributes only
            (m / "a.zarr.json").write_bytes(sidecar.replace(b"float32", b"float64"))
        assert info.value.errno == errno.EINVAL and (m / "a.zarr.json").read_bytes() == sidecar
    assert zarr_bytes(root) == larger.read_bytes()[:size]


def test_kill_9_keeps_every_fsynced_write_and_leaves_no_torn_shard(tmp_path):
    rng = np.random.default_rng(14)
    root = tmp_path / "a.zarr"
    z = zarr.create_array(str(root), shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="uint32", fill_value=0)
    z[...] = 0
    model = bytearray(zarr_bytes(root))
    with mounted(root, tmp_path, name="m1") as m:
        fsynced_writes_then_kill_9(m, "a.zarr.bin", model, rng, acknowledged=40, unacknowledged=20)
    stored = np.frombuffer(zarr_bytes(root), "u1")  # every shard decodes: none is torn
    expected = np.frombuffer(bytes(model), "u1")
    differs = stored != expected
    assert (stored[differs] == 0xFF).all()  # only unacknowledged writes differ
    with mounted(root, tmp_path, name="m2"):
        pass
    assert not list(root.rglob(".zarrfs-tmp-*"))  # leftovers cleaned at mount


def test_full_disk_fails_with_enospc_keeps_the_store_and_loses_nothing(tmp_path, tiny_tmpfs):
    root = tiny_tmpfs / "a.zarr"
    z = zarr.create_array(str(root), shape=(64, 1024), chunks=(16, 1024), dtype="uint8", compressors=None)
    original = np.random.default_rng(16).integers(0, 256, (64, 1024), dtype=np.uint8)
    z[...] = original
    fill_disk(tiny_tmpfs / "filler")
    with core_of(root, tmp_path) as c:
        fh = c.open("/a.zarr.bin", os.O_RDWR)
        c.pwrite(fh, b"\x02" * (64 * 1024), 0)
        with pytest.raises(OSError) as info:
            c.fsync(fh)
        assert info.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as info:
            c.close(fh)
        assert info.value.errno == errno.ENOSPC
        assert (np.asarray(zarr.open_array(str(root))[...]) == original).all()  # the store as it was
        # Nothing left behind: the background write-back tries again every 2 s, and a try holds a
        # temporary file for as long as its write takes, so look for a moment between tries.
        wait_for(lambda: not list(root.rglob(".zarrfs-tmp-*")), timeout=10, what="no temporary files")
        assert "No space left on device" in c.log()
        os.unlink(tiny_tmpfs / "filler")  # room again: the data kept in memory is written
        fh = c.open("/a.zarr.bin", os.O_RDWR)
        c.fsync(fh)
        c.close(fh)
    assert (np.asarray(zarr.open_array(str(root))[...]) == 2).all()


def test_a_failed_background_write_back_is_reported_at_the_next_fsync(tmp_path, tiny_tmpfs):
    root = tiny_tmpfs / "a.zarr"
    zarr.create_array(str(root), shape=(64 * 1024,), chunks=(16 * 1024,), dtype="uint8", compressors=None)
    fill_disk(tiny_tmpfs / "filler")
    with core_of(root, tmp_path) as c:
        fh = c.open("/a.zarr.bin", os.O_RDWR)
        try:
            c.pwrite(fh, b"\x03" * 4096, 0)
            wait_for(lambda: "write-back of" in c.log(), what="the background write-back to fail")
            os.unlink(tiny_tmpfs / "filler")  # a retry would succeed now; the failure must still be told
            with pytest.raises(OSError) as info:
                c.fsync(fh)
            assert info.value.errno == errno.ENOSPC
            c.fsync(fh)  # told once; the data was kept and now reaches the store
        finally:
            c.close(fh)
    assert (np.asarray(zarr.open_array(str(root))[:4096]) == 3).all()


def _hammer(args):
    path, start, length, rounds = args
    fd = os.open(path, os.O_RDWR)
    try:
        for r in range(rounds):
            os.pwrite(fd, bytes([(start // length + r) & 0xFF]) * length, start)
            if r % 3 == 0:
                os.fsync(fd)
    finally:
        os.close(fd)
    return (start // length + rounds - 1) & 0xFF


def test_concurrent_writers_on_one_shard_lose_nothing(tmp_path):
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(4096,), chunks=(256,), shards=(4096,), dtype="uint8", fill_value=0)
    with mounted(root, tmp_path) as m:
        jobs = [(str(m / "a.zarr.bin"), i * 1000, 1000, 25) for i in range(4)]
        with ProcessPoolExecutor(4) as pool:
            finals = list(pool.map(_hammer, jobs))
    stored = np.asarray(zarr.open_array(str(root))[...])
    for (_, start, length, _), final in zip(jobs, finals, strict=False):
        assert (stored[start:start + length] == final).all()
    assert (stored[4000:] == 0).all()


def test_a_long_write_is_written_back_while_it_goes_on(tmp_path):
    """dirty_size bounds the decoded bytes a writer may leave unwritten: past it, the write
    flushes; past a quarter of it, the flusher starts on the shards the writer has filled."""
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(1 << 20,), chunks=(1 << 14,), shards=(1 << 18,), dtype="<f4", fill_value=0)
    values = np.random.default_rng(5).random(1 << 20, dtype=np.float32)
    block = 64 << 10
    with core_of(root, tmp_path, "dirty_size=256K") as c:
        fh = c.open("/a.zarr.bin", os.O_WRONLY)
        try:
            for offset in range(0, values.nbytes // 2, block):
                assert c.pwrite(fh, values.view("u1")[offset:offset + block].tobytes(), offset) == block
            first_shard = np.asarray(zarr.open_array(str(root))[:1 << 18])  # 1 MiB: already stored
            assert np.array_equal(first_shard, values[:1 << 18])
            for offset in range(values.nbytes // 2, values.nbytes, block):
                assert c.pwrite(fh, values.view("u1")[offset:offset + block].tobytes(), offset) == block
        finally:
            c.close(fh)
        assert np.array_equal(np.frombuffer(c.read_bytes("/a.zarr.bin"), "<f4"), values)
    assert np.array_equal(zarr.open_array(str(root))[...], values)


def test_fio_randrw_verifies_also_after_remount(tmp_path):
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(4 << 20,), chunks=(1 << 18,), shards=(1 << 20,), dtype="uint8", fill_value=0)
    fio = ["fio", "--name=zarrfs", "--ioengine=psync", "--bs=4k", "--size=4m", "--rw=randrw", "--verify=crc32c",
           "--randseed=1234", "--fallocate=none", "--allow_file_create=0", "--create_on_open=0",
           "--unlink=0", "--end_fsync=1"]
    with mounted(root, tmp_path, name="m1") as m:
        result = subprocess.run([*fio, f"--filename={m / 'a.zarr.bin'}"], capture_output=True, text=True,
                                cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "verify" not in result.stderr.lower()
    with mounted(root, tmp_path, name="m2") as m:
        result = subprocess.run([*fio, "--verify_only", f"--filename={m / 'a.zarr.bin'}"], capture_output=True,
                                text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr


def test_a_name_looked_up_in_vain_is_there_once_an_edit_makes_it(tmp_path):
    """The kernel keeps no failed lookup: `c.bin` that an stat missed exists as soon as `cp c.npy`
    makes array c (a negative entry cached for a second had given ENOENT, not EEXIST, to a rename
    onto it and to an open of it)."""
    zarr.open_group(str(tmp_path / "s.zarr"), mode="w").create_array("a", shape=(2,), dtype="i2")
    np.save(tmp_path / "in.npy", np.arange(3, dtype="<i2"))
    with mounted(tmp_path / "s.zarr", tmp_path) as m:
        with pytest.raises(FileNotFoundError):
            os.stat(m / "c.bin")
        (m / "c.npy").write_bytes((tmp_path / "in.npy").read_bytes())
        assert (m / "c.bin").read_bytes() == np.arange(3, dtype="<i2").tobytes()
        with pytest.raises(FileExistsError):
            os.rename(m / "a.bin", m / "c.bin")
