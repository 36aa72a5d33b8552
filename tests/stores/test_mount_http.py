"""http(s):// sources through real mounts, served by nginx, which honours Range: read-only, and
listed from consolidated metadata since HTTP cannot list."""

import re
import subprocess

import numpy as np
import pytest
import zarr

from mounting import ZARRFS, mounted, settled, unmount
from servers.nginx import Nginx


@pytest.fixture
def served(tmp_path):
    """(local hierarchy directory, its nginx) with the directory served at /."""
    root = tmp_path / "www"
    root.mkdir()
    server = Nginx(tmp_path / "nginx", root)
    server.start()
    try:
        yield root, server
    finally:
        server.stop()


def write_hierarchy(path, zarr_format=3):
    group = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    values = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    shards = {"shards": (32, 32)} if zarr_format == 3 else {}
    group.create_group("nested").create_array("a", shape=(64, 64), chunks=(8, 8), dtype="f4",
                                              **shards)[...] = values
    group.create_array("b", shape=(10,), chunks=(4,), dtype="i2")[...] = np.arange(10)
    zarr.consolidate_metadata(str(path))
    return values


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_reads_a_consolidated_hierarchy_over_http_with_ranges(served, tmp_path, zarr_format):
    root, server = served
    values = write_hierarchy(root / "data.zarr", zarr_format)
    with mounted(f"{server.url}/data.zarr", tmp_path, "ro") as m:
        assert sorted(p.name for p in m.path.iterdir() if p.suffix in ("", ".bin") and p.name[0] != ".") == ["b.bin", "nested"]
        assert np.array_equal(np.fromfile(m / "nested/a.bin", "<f4").reshape(64, 64), values)
        assert np.fromfile(m / "b.bin", "<i2").tolist() == list(range(10))
    lines = settled(server.directory / "access.log").splitlines()  # nginx logs after it answers
    if zarr_format == 3:  # the shards were read by range (206), never whole (200)
        shard_gets = [line for line in lines if "/nested/a/c/" in line]
        assert shard_gets and all('" 206 ' in line for line in shard_gets), shard_gets


def test_http_without_ro_is_refused_in_one_line(served, tmp_path):
    root, server = served
    write_hierarchy(root / "data.zarr")
    (tmp_path / "m").mkdir()
    result = subprocess.run([ZARRFS, f"{server.url}/data.zarr", str(tmp_path / "m")], capture_output=True,
                            text=True, timeout=60)
    unmount(tmp_path / "m")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"zarrfs: {server.url}/data.zarr: http(s) sources are read-only: "
                                                  "add -o ro"]


def test_http_without_consolidated_metadata_says_it_is_needed(served, tmp_path):
    root, server = served
    zarr.open_group(str(root / "plain.zarr"), mode="w").create_array("a", shape=(4,), dtype="u1")
    (tmp_path / "m").mkdir()
    result = subprocess.run([ZARRFS, f"{server.url}/plain.zarr", str(tmp_path / "m"), "-o", "ro"],
                            capture_output=True, text=True, timeout=60)
    unmount(tmp_path / "m")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search("consolidated metadata", lines[0]), result.stderr
