"""Issue #38's checks of an Icechunk mount against the libraries that write and read the data:
icechunk-python's own read of every array at every snapshot of a long history (both repository
formats), netCDF4's read of the files virtual chunks point into, and zarr-python 3.4 both ways
(it writes, the mount reads; the mount writes and commits, it reads)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mounting import mounted

pytestmark = pytest.mark.needs_python312  # skipped on 3.11, saying so (tests/conftest.py)

if sys.version_info >= (3, 12):
    import icechunk
    import zarr

ARRAYS = {  # name: (shape, chunks, dtype, compressors): small, so that 100 snapshots compare in seconds
    "ints": ((6, 5), (3, 3), "<i2", None),
    "floats": ((10,), (4,), "<f4", "zstd"),
    "bytes": ((3, 4, 5), (2, 2, 5), "|u1", "gzip"),
}


def create(group, name: str):
    shape, chunks, dtype, compressor = ARRAYS[name]
    compressors = {None: None, "zstd": [zarr.codecs.ZstdCodec()], "gzip": [zarr.codecs.GzipCodec()]}[compressor]
    return group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=0, compressors=compressors)


def change(repo, branch: str, step: int, rng) -> str:
    """One commit on `branch`: a few elements of one array written; every 17th step deletes
    `bytes` where it is, every 11th makes it again (so that versions differ in their arrays)."""
    session = repo.writable_session(branch)
    group = zarr.open_group(session.store, mode="a")
    if step % 17 == 0 and "bytes" in group:
        del group["bytes"]
        return session.commit(f"{branch} {step}: bytes deleted")
    if step % 11 == 0 and "bytes" not in group:
        create(group, "bytes")[...] = rng.integers(0, 255, ARRAYS["bytes"][0])
        return session.commit(f"{branch} {step}: bytes made")
    name = sorted(group.array_keys())[step % len(list(group.array_keys()))]
    array = group[name]
    at = tuple(rng.integers(0, n) for n in array.shape)
    array[at] = rng.integers(-100, 100)
    return session.commit(f"{branch} {step}: {name}{list(map(int, at))}")


@pytest.fixture(scope="module", params=[1, 2], ids=["format1", "format2"])
def history(request, tmp_path_factory):
    """100 commits: 60 on main, 40 on dev (made from main's 20th); tags on three of them.
    Returns (path, repo, every snapshot id)."""
    path = tmp_path_factory.mktemp(f"history{request.param}") / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)), spec_version=request.param)
    rng = np.random.default_rng(38)
    session = repo.writable_session("main")
    group = zarr.group(session.store)
    for name in ("ints", "floats"):
        create(group, name)[...] = rng.integers(-100, 100, ARRAYS[name][0])
    snapshots = [session.commit("main 0: ints, floats")]
    for step in range(1, 60):
        snapshots.append(change(repo, "main", step, rng))
        if step == 20:
            repo.create_branch("dev", snapshots[-1])
    for step in range(60, 100):
        snapshots.append(change(repo, "dev", step, rng))
    for tag, snapshot in (("first", snapshots[0]), ("middle", snapshots[30]), ("dev-last", snapshots[-1])):
        repo.create_tag(tag, snapshot)
    return path, repo, snapshots


def icechunk_arrays(repo, snapshot: str) -> dict[str, bytes]:
    """Every array of the snapshot as icechunk-python reads it: its flat C-order bytes."""
    group = zarr.open_group(repo.readonly_session(snapshot_id=snapshot).store, mode="r")
    return {name: np.ascontiguousarray(array[...]).tobytes() for name, array in group.arrays()}


def test_every_array_at_every_snapshot_of_a_long_history_is_icechunks_read(history, tmp_path):
    path, repo, snapshots = history
    assert len(snapshots) == 100 and repo.list_tags() == {"first", "middle", "dev-last"}
    expected_files = tmp_path / "icechunk"
    expected_files.mkdir()
    with mounted(path, tmp_path, "ro") as m:
        listed = (m.path / "@versions").read_text().split()
        assert {f"@{s}" for s in snapshots} <= set(listed)
        assert {"@branch.main", "@branch.dev", "@tag.first", "@tag.middle", "@tag.dev-last"} <= set(listed)
        compared = 0
        for snapshot in snapshots:
            arrays = icechunk_arrays(repo, snapshot)
            version = m.path / f"@{snapshot}"
            assert sorted(n for n in os.listdir(version) if n.endswith(".bin")) == sorted(f"{a}.bin" for a in arrays)
            for name, data in arrays.items():
                expected = expected_files / f"{snapshot}-{name}"
                expected.write_bytes(data)
                same = subprocess.run(["cmp", version / f"{name}.bin", expected], capture_output=True, text=True)
                assert same.returncode == 0, (snapshot, name, same.stdout, same.stderr)
                compared += 1
        for tag in ("first", "middle", "dev-last"):
            assert os.getxattr(m.path / f"@tag.{tag}", "user.icechunk.snapshot").decode() == repo.lookup_tag(tag)
        assert compared > 250


def test_virtual_chunks_into_netcdf_files_read_as_netcdf4_reads_them(tmp_path):
    """Chunks that are byte ranges of contiguous, uncompressed variables of netCDF-4 files that
    netCDF4 wrote (where, h5py says): the mount's bytes are netCDF4's values."""
    import h5py
    import netCDF4
    from icechunk.credentials import LocalFileSystemAccess

    path = tmp_path / "repo"
    container = f"file://{path}/netcdf/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(
        container, icechunk.local_filesystem_store(container[len("file://"):])))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)), config=config,
                                      authorize_virtual_chunk_access={container: LocalFileSystemAccess})
    (path / "netcdf").mkdir()
    rng = np.random.default_rng(7)
    variables = {"temperature": ("<f4", rng.normal(280, 10, (12, 20)).astype("<f4")),
                 "counts": ("<i2", rng.integers(-3000, 3000, (12, 20)).astype("<i2"))}
    for day in (1, 2):
        with netCDF4.Dataset(path / "netcdf" / f"day{day}.nc", "w", format="NETCDF4") as nc:
            nc.createDimension("y", 12)
            nc.createDimension("x", 20)
            for name, (dtype, values) in variables.items():
                nc.createVariable(name, dtype, ("y", "x"), contiguous=True)[:] = values + day
    session = repo.writable_session("main")
    root = zarr.group(session.store)
    rows = 4  # a chunk of 4 whole rows is one contiguous byte range of the variable
    for day in (1, 2):
        group = root.create_group(f"day{day}")
        with h5py.File(path / "netcdf" / f"day{day}.nc", "r") as h5:
            for name, (dtype, _) in variables.items():
                dataset = h5[name]
                assert dataset.chunks is None and dataset.compression is None
                start, itemsize = dataset.id.get_offset(), np.dtype(dtype).itemsize
                group.create_array(name, shape=(12, 20), chunks=(rows, 20), dtype=dtype, fill_value=0,
                                   compressors=None)
                for chunk in range(3):
                    session.store.set_virtual_ref(f"day{day}/{name}/c/{chunk}/0", f"{container}day{day}.nc",
                                                  offset=start + chunk * rows * 20 * itemsize,
                                                  length=rows * 20 * itemsize)
    session.commit("two days of netCDF, virtual")
    with mounted(path, tmp_path, "ro") as m:
        for day in (1, 2):
            with netCDF4.Dataset(path / "netcdf" / f"day{day}.nc") as nc:
                for name, (dtype, _) in variables.items():
                    expected = np.ascontiguousarray(nc[name][:].filled(), dtype=dtype)
                    assert (m.path / f"day{day}" / f"{name}.bin").read_bytes() == expected.tobytes(), (day, name)


needs_zarr_34 = pytest.mark.skipif(sys.version_info < (3, 12) or tuple(map(int, zarr.__version__.split(".")[:2])) < (3, 4),
                                   reason="needs zarr-python >= 3.4 (pip install 'zarr==3.4.*')")


def oracle_arrays() -> dict[str, dict]:
    """name: create_array's arguments, for zarr 3.4 to write (several codecs and data types)."""
    return {"sharded": dict(shape=(16, 12), chunks=(4, 4), shards=(8, 12), dtype="<i2", fill_value=-1),
            "zstd": dict(shape=(30,), chunks=(7,), dtype="<f8", fill_value=0.5,
                         compressors=[zarr.codecs.ZstdCodec()]),
            "flags": dict(shape=(5, 5), chunks=(2, 3), dtype="bool", fill_value=False),
            "complex": dict(shape=(9,), chunks=(4,), dtype="<c8", fill_value=0),
            "big_endian": dict(shape=(6, 4), chunks=(3, 4), dtype=">u4", fill_value=0,
                               serializer=zarr.codecs.BytesCodec(endian="big"))}


def random_values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if dtype.kind == "f":
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -30000), min(info.max, 30000), shape).astype(dtype)


@needs_zarr_34
def test_zarr_34_writes_the_mount_reads_the_mount_writes_and_commits_zarr_34_reads(tmp_path):
    path = tmp_path / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    rng = np.random.default_rng(34)
    session = repo.writable_session("main")
    group = zarr.group(session.store)
    models = {}
    for name, arguments in oracle_arrays().items():
        array = group.create_array(name, **arguments)
        models[name] = random_values(rng, array.shape, array.dtype)
        array[...] = models[name]
        models[name][tuple(slice(0, 1) for _ in array.shape)] = array.fill_value  # a chunk left at the fill value
        array[tuple(slice(0, 1) for _ in array.shape)] = array.fill_value
    first = session.commit("zarr 3.4 wrote these")
    with mounted(path, tmp_path) as m:
        for name, model in models.items():  # the mount's flat bytes are little-endian C order
            little = model.astype(model.dtype.newbyteorder("<"))
            assert (m.path / f"{name}.bin").read_bytes() == little.tobytes(), name
        for name, model in models.items():
            itemsize = model.dtype.itemsize
            fd = os.open(m.path / f"{name}.bin", os.O_RDWR)
            try:
                for _ in range(6):
                    at = tuple(int(rng.integers(0, n)) for n in model.shape)
                    model[at] = random_values(rng, (), model.dtype)
                    offset = int(np.ravel_multi_index(at, model.shape)) * itemsize
                    os.pwrite(fd, np.asarray(model[at]).astype(model.dtype.newbyteorder("<")).tobytes(), offset)
                os.fsync(fd)
            finally:
                os.close(fd)
        os.setxattr(m.path, "user.icechunk.commit", b"the mount wrote these")
    head = repo.lookup_snapshot(repo.lookup_branch("main"))
    assert head.message == "the mount wrote these" and head.parent_id == first
    group = zarr.open_group(repo.readonly_session("main").store, mode="r")
    for name, model in models.items():
        read = group[name][...]
        assert read.dtype.newbyteorder("<") == model.dtype.newbyteorder("<"), name  # zarr gives native order
        np.testing.assert_array_equal(read, model, err_msg=name)
