"""Listings with the header views: what `ls -l` shows matches what reading gives, and listings
running at once in several processes each see the whole directory."""

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import array_doc, group_doc, write_doc
from mounting import mounted

ARRAYS = 300


@pytest.fixture(scope="module")
def mnt(tmp_path_factory):
    root = tmp_path_factory.mktemp("many") / "data.zarr"
    write_doc(root, "", group_doc())
    for i in range(ARRAYS):
        shape = [(i % 5) + 1, 3, (i % 7) + 2][: 1 + i % 3]
        write_doc(root, f"a{i:03d}", array_doc(shape, ["int8", "float32", "complex64", "float16"][i % 4],
                                                [1] * len(shape), dimension_names=["t", "y", "x"][-len(shape):]))
    with mounted(root, tmp_path_factory.mktemp("m"), "ro", "views=npy,envi,mhd,nrrd,vrt,nifti") as m:
        yield m


def ls(path) -> dict[str, int]:
    out = subprocess.run(["ls", "-l", "--time-style=+%s", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1]: int(line.split()[4]) for line in out.splitlines()[1:]}


def test_listed_sizes_are_the_bytes_read(mnt):
    sizes = ls(mnt.path)
    assert len(sizes) > ARRAYS * 5
    for name, size in sizes.items():
        if not name.endswith((".bin", ".img", ".npy")):  # the data files: checked by the readers' tests
            assert len((mnt / name).read_bytes()) == size, name


def test_listings_at_once_each_see_everything(mnt):
    expected = sorted(os.listdir(mnt.path))
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: ls(mnt.path), range(12)))
    assert all(sorted(r) == expected for r in results)
