"""What backups and copies see: mtimes that follow every stored change (rsync -a), and fill
regions that are holes (st_blocks, SEEK_DATA/SEEK_HOLE) for cp, tar -S, bsdtar and rsync -S."""

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from mounting import mounted

OLD = time.time() - 100_000  # store files are made to look old, so that any change is newer


def age_store(root, when: float = OLD) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), (when, when))
        os.utime(directory, (when, when))


def make_arrays(root, names=("a", "b", "c")):
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for i, name in enumerate(names):
        array = group.create_array(name, shape=(64, 64), chunks=(16, 16), dtype="int32", fill_value=0)
        array[...] = np.arange(64 * 64, dtype="int32").reshape(64, 64) + i
    age_store(root)


def rsync(source, destination) -> set[str]:
    """Names of the files an incremental `rsync -a` transferred."""
    out = subprocess.run(["rsync", "-a", "--out-format=%n", f"{source}/", f"{destination}/"],
                         check=True, capture_output=True, text=True).stdout
    return {line for line in out.splitlines() if line and not line.endswith("/")}


DATA_VIEWS = (".bin", ".npy", ".tif")  # the files that show an array's data, and change with it
GROUP_FILES = ("zarr.h5", "zarr.nc")  # the root group's HDF5 view: it holds every array


def data_files(names: set[str]) -> set[str]:
    return {n for n in names if n.endswith(DATA_VIEWS)}


def files_of(name: str) -> set[str]:
    return {name + suffix for suffix in DATA_VIEWS}


def test_rsync_copies_exactly_the_arrays_zarr_python_changed(tmp_path):
    store, copy = tmp_path / "store", tmp_path / "copy"
    make_arrays(store)
    with mounted(store, tmp_path, "ro") as m:
        assert data_files(rsync(m.path, copy)) == files_of("a") | files_of("b") | files_of("c")
    zarr.open_array(str(store / "b"), mode="r+")[0, 0] = -1  # one chunk of b is rewritten
    with mounted(store, tmp_path, "ro") as m:
        assert os.stat(m / "b.bin").st_mtime > OLD + 1
        assert os.stat(m / "a.bin").st_mtime == pytest.approx(OLD, abs=1)
        assert rsync(m.path, copy) == files_of("b") | set(GROUP_FILES)
        assert (copy / "b.bin").read_bytes() == (m / "b.bin").read_bytes()
        assert rsync(m.path, copy) == set()  # and nothing more the next time


def test_rsync_copies_exactly_the_arrays_written_through_the_mount(tmp_path):
    store, copy = tmp_path / "store", tmp_path / "copy"
    make_arrays(store)
    with mounted(store, tmp_path) as m:
        rsync(m.path, copy)
        before = os.stat(m / "c.bin").st_mtime_ns
        with open(m / "c.bin", "r+b") as f:
            f.seek(4 * 64 * 40)
            f.write(np.full(10, 7, "int32").tobytes())
        assert os.stat(m / "c.bin").st_mtime_ns > before  # at once, not after the attribute lifetime
        assert rsync(m.path, copy) == files_of("c") | set(GROUP_FILES)
        assert (copy / "c.bin").read_bytes() == (m / "c.bin").read_bytes()
        assert rsync(m.path, copy) == set()


def make_sparse(root):
    """A 16 MiB array of which two chunks (1 MiB) are stored, and the same with a NaN fill. A
    chunk's rows are 4 KiB, so that a copy's holes can be whole pages."""
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    rng = np.random.default_rng(1)
    for name, fill in (("zeros", 0.0), ("nans", np.nan)):
        array = group.create_array(name, shape=(2048, 2048), chunks=(128, 1024), dtype="float32",
                                   fill_value=fill, compressors=None)
        array[0:128, 0:1024] = rng.random((128, 1024), "float32") + 1
        array[1024:1152, 1024:2048] = rng.random((128, 1024), "float32") + 1
    return np.asarray(zarr.open_array(str(root / "zeros"))[...])


def allocated(path) -> int:
    return os.stat(path).st_blocks * 512


STORED = 2 * 128 * 1024 * 4


def du_recipe() -> list[str]:
    """The `du -s --exclude=...` command docs/semantics.md gives for what the store holds."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "semantics.md").read_text()
    return shlex.split(re.search(r"`(du -s (?:--exclude='[^']+' ?)+)`", text).group(1))


def test_the_docs_du_recipe_counts_each_array_once(tmp_path):
    """du with the excludes the docs give says what the store holds, whatever views are on."""
    store = tmp_path / "store"
    group = zarr.open_group(str(store), mode="w", zarr_format=3)
    group.create_array("a", shape=(512, 512), chunks=(128, 128), dtype="int32", compressors=None)[...] = 7
    group.create_group("g").create_array("b", shape=(256, 256), chunks=(64, 64), dtype="int32",
                                        compressors=None)[...] = 3
    stored = sum(os.stat(os.path.join(d, f)).st_size for d, _, fs in os.walk(store) for f in fs if f != "zarr.json")
    with mounted(store, tmp_path, "ro", "views=npy,envi,mhd,nrrd,vrt,nifti,tiff,hdf5") as m:
        du = subprocess.run([*du_recipe(), "-B1", str(m.path)], capture_output=True, text=True, check=True)
        counted = int(du.stdout.split()[0])
        listed = {p.suffix for p in m.path.rglob("*")}
    assert {".npy", ".tif", ".img", ".h5"} <= listed  # every data view the recipe must leave out is there
    assert stored <= counted < stored * 1.25  # each array's chunks once, plus small headers and documents


def test_fill_chunks_are_holes_for_du_and_lseek(tmp_path):
    store = tmp_path / "store"
    make_sparse(store)
    with mounted(store, tmp_path, "ro") as m:
        assert os.stat(m / "zeros.bin").st_size == 16 << 20
        assert allocated(m / "zeros.bin") == STORED
        du = subprocess.run(["du", "-k", str(m / "zeros.bin")], capture_output=True, text=True, check=True)
        assert int(du.stdout.split()[0]) == STORED // 1024
        assert allocated(m / "nans.bin") == 16 << 20  # a NaN fill region is no hole: it must be copied
        fd = os.open(m / "zeros.bin", os.O_RDONLY)
        try:
            row = 2048 * 4
            assert os.lseek(fd, 0, os.SEEK_HOLE) == 1024 * 4  # the first row leaves chunk (0, 0)
            assert os.lseek(fd, 1024 * 4, os.SEEK_DATA) == row  # the next row of chunk (0, 0)
            assert os.lseek(fd, 128 * row, os.SEEK_DATA) == 1024 * row + 1024 * 4
            with pytest.raises(OSError) as e:
                os.lseek(fd, 1152 * row, os.SEEK_DATA)
            assert e.value.errno == 6  # ENXIO: only holes after it
        finally:
            os.close(fd)
        fd = os.open(m / "nans.bin", os.O_RDONLY)
        try:
            assert os.lseek(fd, 0, os.SEEK_HOLE) == 16 << 20
        finally:
            os.close(fd)


@pytest.mark.parametrize("tool", ["cp", "tar", "bsdtar", "rsync"])
def test_copying_a_mostly_fill_array_writes_about_its_stored_size(tmp_path, tool):
    store, out = tmp_path / "store", tmp_path / "out"
    expected = make_sparse(store)
    out.mkdir()
    with mounted(store, tmp_path, "ro") as m:
        for name in ("zeros.bin", "nans.bin"):
            if tool == "cp":
                subprocess.run(["cp", str(m / name), str(out / name)], check=True)
            elif tool == "rsync":
                subprocess.run(["rsync", "-S", str(m / name), str(out / name)], check=True)
            else:
                archive = tmp_path / f"{name}.tar"
                create = ["tar", "-cSf"] if tool == "tar" else ["bsdtar", "-cf"]
                subprocess.run([*create, str(archive), "-C", str(m.path), name], check=True)
                if name == "zeros.bin":
                    assert os.path.getsize(archive) < 2 * STORED
                subprocess.run(["tar" if tool == "tar" else "bsdtar", "-xSf" if tool == "tar" else "-xf",
                                str(archive), "-C", str(out)], check=True)
        assert np.array_equal(np.fromfile(out / "zeros.bin", "<f4").reshape(2048, 2048), expected)
        assert (out / "nans.bin").read_bytes() == (m / "nans.bin").read_bytes()
    assert allocated(out / "zeros.bin") < 2 * STORED  # 1 MiB stored, 16 MiB long
    assert allocated(out / "nans.bin") >= 16 << 20


def test_inner_chunks_missing_from_a_stored_shard_are_holes(tmp_path):
    store, out = tmp_path / "store", tmp_path / "out"
    array = zarr.create_array(str(store), shape=(256, 1024), shards=(128, 1024), chunks=(32, 1024),
                              dtype="float32", fill_value=0.0, compressors=None)
    array[32:64] = np.random.default_rng(2).random((32, 1024), "float32") + 1  # one inner chunk of shard 0
    row = 1024 * 4
    with mounted(store, tmp_path, "ro") as m:
        fd = os.open(m / "store.bin", os.O_RDONLY)
        try:
            assert os.lseek(fd, 0, os.SEEK_DATA) == 32 * row
            assert os.lseek(fd, 32 * row, os.SEEK_HOLE) == 64 * row
            with pytest.raises(OSError):
                os.lseek(fd, 64 * row, os.SEEK_DATA)
        finally:
            os.close(fd)
        out.mkdir()
        subprocess.run(["cp", str(m / "store.bin"), str(out / "store.bin")], check=True)
        assert (out / "store.bin").read_bytes() == (m / "store.bin").read_bytes()
    assert allocated(out / "store.bin") <= 2 * 32 * row


def test_rsync_copies_an_array_whose_chunk_zarr_python_deleted(tmp_path):
    """Writing fill values deletes the chunk (zarr-python's default): no stored file is newer,
    but the directory that held it is."""
    store, copy = tmp_path / "store", tmp_path / "copy"
    make_arrays(store)
    with mounted(store, tmp_path, "ro") as m:
        rsync(m.path, copy)
    zarr.open_array(str(store / "a"), mode="r+")[0:16, 0:16] = 0
    assert not (store / "a" / "c" / "0" / "0").exists()
    with mounted(store, tmp_path, "ro") as m:
        assert rsync(m.path, copy) == files_of("a") | set(GROUP_FILES)
        assert (copy / "a.bin").read_bytes() == (m / "a.bin").read_bytes()


def test_tar_incremental_archives_exactly_the_arrays_zarr_python_changed(tmp_path):
    store, snapshot = tmp_path / "store", tmp_path / "snapshot"
    make_arrays(store)

    def archive(level: int) -> set[str]:
        path = tmp_path / f"level{level}.tar"
        with mounted(store, tmp_path, "ro") as m:  # a new mount, so a new device number: tar is told
            subprocess.run(["tar", "--no-check-device", "-g", str(snapshot), "-cf", str(path), "-C", str(m.path), "."],
                           check=True, capture_output=True)
        names = subprocess.run(["tar", "-tf", str(path)], check=True, capture_output=True, text=True).stdout
        return {n.removeprefix("./") for n in names.split() if not n.endswith("/")}

    assert {"a.bin", "b.bin", "c.bin", "b.json"} <= archive(0)
    time.sleep(1.1)  # tar compares whole seconds with the time of the last archive
    zarr.open_array(str(store / "b"), mode="r+")[0, 0] = -1
    assert archive(1) == files_of("b") | set(GROUP_FILES)  # the root's zarr.h5 holds b's bytes too


def itemized(source, destination) -> set[str]:
    """Names of the files `rsync -a --itemize-changes` sent (lines '>f...')."""
    out = subprocess.run(["rsync", "-a", "--itemize-changes", f"{source}/", f"{destination}/"],
                         check=True, capture_output=True, text=True).stdout
    return {line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(">f")}


def test_rsync_copies_a_group_file_again_exactly_when_something_below_its_group_changed(tmp_path):
    store, copy = tmp_path / "store", tmp_path / "copy"
    root = zarr.open_group(str(store), mode="w", zarr_format=3)
    for name in ("a", "b", "g/x", "g/y"):
        root.create_array(name, shape=(64,), chunks=(16,), dtype="int32", fill_value=0)[...] = np.arange(64)
    age_store(store)
    group_files = {f"g/{name}" for name in GROUP_FILES}
    with mounted(store, tmp_path, "ro") as m:
        assert group_files | set(GROUP_FILES) <= itemized(m.path, copy)
        assert itemized(m.path, copy) == set()  # what was listed is what was copied
    # each change a second of its own: rsync compares whole seconds, and two changes within one
    # second leave a file that shows both with one mtime
    zarr.open_array(str(store / "b"), mode="r+")[0] = -1  # at the root, not under g
    age_store(store / "b" / "c", OLD + 100)  # its chunks
    with mounted(store, tmp_path, "ro") as m:
        assert itemized(m.path, copy) == {"b.bin", "b.npy"} | set(GROUP_FILES)
    zarr.open_array(str(store / "g" / "x"), mode="r+")[0] = -1  # under g: both group files show it
    age_store(store / "g" / "x" / "c", OLD + 200)
    with mounted(store, tmp_path, "ro") as m:
        assert itemized(m.path, copy) == {"g/x.bin", "g/x.npy"} | group_files | set(GROUP_FILES)
        assert (copy / "g" / "zarr.h5").read_bytes() == (m / "g" / "zarr.h5").read_bytes()
