"""The mounted hierarchy, read by the tools our users have: find, ls, cmp, dd, od, NumPy, C mmap.
What the file system answers (random reads, sidecars, missing names, a read-only mount's
refusals) is asked of the core without a mount (core.py), over the same hierarchy."""

import errno
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from core import core_of
from mount_data import build, flat
from mounting import mounted

HERE = Path(__file__).parents[1]  # tests/, where the shared fixtures and C programs are


@pytest.fixture(scope="module")
def hierarchy(tmp_path_factory):
    root = tmp_path_factory.mktemp("h") / "data.zarr"
    return root, build(root)


@pytest.fixture(scope="module")
def mnt(hierarchy, tmp_path_factory):
    with mounted(hierarchy[0], tmp_path_factory.mktemp("m"), "ro") as m:
        yield m


@pytest.fixture(scope="module")
def core(hierarchy, tmp_path_factory):
    with core_of(hierarchy[0], tmp_path_factory.mktemp("c"), "ro") as c:
        yield c


@pytest.fixture(scope="module")
def expected_files(hierarchy, tmp_path_factory):
    """Each expected flat file written to a plain file, for cmp."""
    out = tmp_path_factory.mktemp("expected")
    files = {}
    for name, values in hierarchy[1].items():
        files[name] = out / name.replace("/", "_")
        files[name].write_bytes(flat(values))
    return files


@pytest.fixture(scope="module")
def c_reader(tmp_path_factory):
    exe = tmp_path_factory.mktemp("c") / "mmap_checksum"
    subprocess.run(["gcc", "-O2", "-Wall", "-o", str(exe), str(HERE / "c" / "mmap_checksum.c")], check=True)
    return exe


def fnv1a(data: bytes) -> int:
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def test_find_lists_every_group_array_and_sidecar(mnt, hierarchy):
    out = subprocess.run(["find", str(mnt.path), "-type", "f"], capture_output=True, text=True, check=True).stdout
    found = {os.path.relpath(p, mnt.path) for p in out.split()}
    arrays = set(hierarchy[1])
    views = {os.path.join(os.path.dirname(a), name) for a in arrays
             for name in json.loads((mnt / (a[:-4] + ".json")).read_text())["views"].values()}
    assert {"types/float32.npy", "types/float32.bin.hdr", "types/float32.vrt", "types/float16.npy"} <= views
    expected = (arrays | {a[:-4] + ".json" for a in arrays} | views
                | {f"{group}{name}" for group in ("", "layouts/", "types/") for name in ("zarr.json", "zarr.h5", "zarr.nc")})
    assert found == expected
    dirs = subprocess.run(["find", str(mnt.path), "-type", "d"], capture_output=True, text=True).stdout.split()
    assert {os.path.relpath(p, mnt.path) for p in dirs} == {".", "layouts", "types"}


def test_ls_shows_sizes(mnt, hierarchy):
    out = subprocess.run(["ls", "-lR", str(mnt.path)], capture_output=True, text=True, check=True).stdout
    assert "float64.bin" in out and "nested-sharding.json" in out
    for name, values in hierarchy[1].items():
        st = os.stat(mnt / name)
        assert st.st_size == values.nbytes
        assert st.st_blocks == -(-stored_cost(mnt.source / name.removesuffix(".bin"), values.nbytes) // 512)
        assert st.st_blksize >= 1 << 20


def stored_cost(array_dir: Path, nbytes: int) -> int:
    """What st_blocks counts: the stored chunks' encoded bytes when the fill value is zero bytes
    (the rest are holes), else the whole size."""
    fill = np.asarray(zarr.open_array(str(array_dir), mode="r").fill_value)
    if any(fill.tobytes()):
        return nbytes
    return sum(p.stat().st_size for p in array_dir.rglob("*") if p.is_file() and p.name != "zarr.json")


def test_cmp_dd_od_see_the_flat_bytes(mnt, expected_files):
    for name, path in expected_files.items():
        subprocess.run(["cmp", str(path), str(mnt / name)], check=True)
        data = path.read_bytes()
        dd = subprocess.run(["dd", f"if={mnt / name}", "bs=7", "skip=3", "count=5", "status=none"],
                            capture_output=True, check=True).stdout
        assert dd == data[21:56]
        od = subprocess.run(["od", "-A", "n", "-t", "x1", "-N", "16", str(mnt / name)],
                            capture_output=True, text=True, check=True).stdout
        assert od.split() == [f"{b:02x}" for b in data[:16]]


def test_random_preads(core, expected_files):
    rng = np.random.default_rng(0)
    for name, path in expected_files.items():
        data = path.read_bytes()
        fh = core.open(f"/{name}", os.O_RDONLY)
        try:
            for _ in range(25):
                offset = int(rng.integers(0, len(data) + 8))
                size = int(rng.integers(0, 300))
                assert core.pread(fh, size, offset) == data[offset:offset + size]
        finally:
            core.close(fh)


def test_numpy_memmap_with_the_sidecar(mnt, hierarchy):
    for name, values in hierarchy[1].items():
        side = json.loads((mnt / (name[:-4] + ".json")).read_text())
        assert side["data_file"] == os.path.basename(name)
        if values.nbytes == 0:
            continue
        mapped = np.memmap(mnt / name, dtype=side["dtype"], shape=tuple(side["shape"]), mode="r")
        assert mapped.tobytes() == flat(values)
        del mapped


def test_c_program_mmaps_and_checksums(mnt, expected_files, c_reader):
    for name in ["layouts/zstd.bin", "layouts/nested-sharding.bin", "types/complex128.bin", "scalar.bin"]:
        data = expected_files[name].read_bytes()
        out = subprocess.run([str(c_reader), str(mnt / name)], capture_output=True, text=True, check=True).stdout
        assert out.split() == [str(len(data)), f"{fnv1a(data):016x}"]


def test_sidecar_contents(core):
    side = json.loads(core.read_text("/layouts/sharded-end.json"))
    assert side["shape"] == [13, 11] and side["dtype"] == "<f4" and side["data_type"] == "float32"
    assert side["itemsize"] == 4 and side["nbytes"] == 13 * 11 * 4
    assert side["order"] == "C" and side["byte_order"] == "little" and side["fill_value"] == "NaN"
    assert side["chunk_shape"] == [6, 4] and side["inner_chunk_shape"] == [3, 2]
    assert side["codecs"][0]["name"] == "sharding_indexed" and side["attributes"] == {}
    assert side["dimension_names"] is None
    assert json.loads(core.read_text("/xr.json"))["dimension_names"] == ["time"]
    plain = json.loads(core.read_text("/types/bool.json"))
    assert plain["dtype"] == "|b1" and plain["inner_chunk_shape"] == [4, 4]
    assert json.loads(core.read_text("/zarr.json"))["attributes"] == {"title": "test"}
    assert json.loads(core.read_text("/scalar.json"))["shape"] == []


@pytest.mark.parametrize("probe", [".hidden", ".Trash-0/files", "layouts/.Trash-0", ".Trash", "autorun.inf", "desktop.ini",
                                   ".xdg-volume-info", "layouts/.directory", "layouts/zstd.bin/x", "folder.jpg"])
def test_probes_for_missing_names_answer_enoent(core, probe):
    with pytest.raises(OSError) as info:
        core.stat(f"/{probe}")
    assert info.value.errno in (errno.ENOENT, errno.ENOTDIR)


def test_read_only_mount_refuses_changes(core):
    for action in [lambda: core.open("/layouts/zstd.bin", os.O_RDWR), lambda: core.mkdir("/new"),
                   lambda: core.open("/new.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                   lambda: core.truncate("/scalar.bin", 8), lambda: core.unlink("/scalar.bin"),
                   lambda: core.rename("/scalar.bin", "/s.bin")]:
        with pytest.raises(OSError) as info:
            action()
        assert info.value.errno == errno.EROFS
    with pytest.raises(IsADirectoryError):
        core.file("/layouts")


def test_statfs_and_mount_table(mnt, hierarchy):
    assert os.statvfs(mnt.path).f_bsize > 0
    line = next(line for line in Path("/proc/mounts").read_text().splitlines() if f" {mnt.path} " in line)
    assert line.split()[0] == str(hierarchy[0]) and line.split()[2] == "fuse.zarrfs"
    assert "ro" in line.split()[3].split(",")
