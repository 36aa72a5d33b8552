"""The header views, opened by the tools that read each format, for every data type the format can
express in 1-D to 4-D: the values match zarr-python's reading and the axes come out as each
format promises. One mount for the module, with every view on; which views each array has is
asked of the core without a mount (core.py)."""

import json
import os
import subprocess

import nibabel
import nrrd
import numpy as np
import pytest
import rasterio
import SimpleITK as sitk

from core import core_of
from mounting import mounted
from views_data import EXPRESSIBLE, NUMERIC, SHAPES, SUFFIX, build, little

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

ARRAYS = sorted(NUMERIC) + ["r24"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("views") / "data.zarr"
    return root, build(root)


@pytest.fixture(scope="module")
def mnt(store, tmp_path_factory):
    with mounted(store[0], tmp_path_factory.mktemp("m"), "ro", "views=npy,envi,mhd,nrrd,vrt,nifti") as m:
        yield m


def as_read(expected: np.ndarray) -> np.ndarray:
    """What a reader without bool returns: the flat file's byte, 0 or 1."""
    return expected.astype("u1") if expected.dtype == bool else expected


def test_each_view_exists_exactly_for_the_types_its_format_expresses(store, tmp_path):
    with core_of(store[0], tmp_path, "ro", "views=npy,envi,mhd,nrrd,vrt,nifti") as c:
        names = set(c.listdir("/"))
        for name in store[1]:
            dtype = name.rsplit("_", 1)[0]
            sidecar = json.loads(c.read_text(f"/{name}.json"))
            for view, suffix in SUFFIX.items():
                assert (name + suffix in names) == (dtype in EXPRESSIBLE[view]), (name, view)
                assert sidecar["views"].get(view) == (name + suffix if dtype in EXPRESSIBLE[view] else None)
            assert (f"{name}.img" in names) == (dtype in EXPRESSIBLE["nifti"])


@pytest.mark.parametrize("dtype", ARRAYS)
def test_npy(mnt, store, dtype):
    for ndim in SHAPES if dtype != "r24" else (1, 3):
        name = f"{dtype}_{ndim}d"
        expected = store[1][name]
        values = np.load(mnt / f"{name}.npy", mmap_mode="r")
        assert values.shape == expected.shape and values.dtype == little(expected).dtype
        assert values.tobytes() == little(expected).tobytes()
        assert os.path.getsize(mnt / f"{name}.npy") % 64 == os.path.getsize(mnt / f"{name}.bin") % 64


GDAL_VIEWS = {"envi": (".bin", "ENVI"), "vrt": (".vrt", "VRT")}  # GDAL finds NAME.bin.hdr given NAME.bin


@pytest.mark.parametrize("view, dtype", [(v, t) for v in GDAL_VIEWS for t in sorted(EXPRESSIBLE[v])])
def test_through_gdal(mnt, store, view, dtype):
    """Samples are the last axis, lines the one before, the leading axes fold into bands (VRT:
    one band per 2-D plane, in C order, described by its index along the leading axes)."""
    suffix, driver = GDAL_VIEWS[view]
    for ndim, shape in SHAPES.items():
        expected = as_read(store[1][f"{dtype}_{ndim}d"])
        with rasterio.open(mnt / f"{dtype}_{ndim}d{suffix}") as r:
            assert r.driver == driver
            lines = shape[-2] if ndim > 1 else 1
            assert (r.count, r.height, r.width) == (int(np.prod(shape[:-2])), lines, shape[-1])
            assert r.dtypes[0] == expected.dtype.name
            np.testing.assert_array_equal(r.read().reshape(shape), expected)
            if view == "vrt" and ndim == 4:
                assert r.descriptions[:4] == ("t=0,z=0", "t=0,z=1", "t=0,z=2", "t=1,z=0")


@pytest.mark.parametrize("dtype", sorted(EXPRESSIBLE["mhd"]))
def test_metaimage_through_simpleitk(mnt, store, dtype):
    """Sizes fastest axis first; a 1-D array is an N x 1 image; complex is two channels."""
    for ndim, shape in SHAPES.items():
        expected = as_read(store[1][f"{dtype}_{ndim}d"])
        image = sitk.ReadImage(str(mnt / f"{dtype}_{ndim}d.mhd"))
        size = tuple(reversed(shape)) + ((1,) if ndim == 1 else ())
        assert image.GetSize() == size
        values = sitk.GetArrayFromImage(image)
        if expected.dtype.kind == "c":
            assert image.GetNumberOfComponentsPerPixel() == 2
            values = values.view(expected.dtype)[..., 0]
        np.testing.assert_array_equal(values.reshape(shape), expected)
        assert values.dtype == expected.dtype


@pytest.mark.parametrize("dtype", sorted(EXPRESSIBLE["nrrd"] - {"r24"}))
def test_nrrd_through_pynrrd(mnt, store, dtype):
    """Sizes fastest first, labelled with the dimension names; complex is an extra fastest axis of 2."""
    for ndim, shape in SHAPES.items():
        expected = as_read(store[1][f"{dtype}_{ndim}d"])
        values, header = nrrd.read(str(mnt / f"{dtype}_{ndim}d.bin.nhdr"), index_order="C")
        labels = list(reversed(("t", "z", "y", "x")[-ndim:]))
        if expected.dtype.kind == "c":
            assert list(header["sizes"]) == [2, *reversed(shape)] and header["labels"] == ["complex", *labels]
            values = np.ascontiguousarray(values).view(expected.dtype)[..., 0]
        else:
            assert list(header["sizes"]) == list(reversed(shape)) and header["labels"] == labels
        np.testing.assert_array_equal(values, expected)
        assert values.dtype == expected.dtype


def test_nrrd_block_through_teem(mnt, store, tmp_path):
    """A raw type is NRRD's `block` (pynrrd reads no blocks): teem's unu slices the 3-D one."""
    header = nrrd.read_header(str(mnt / "r24_3d.bin.nhdr"))
    assert (header["type"], int(header["block size"]), list(header["sizes"])) == ("block", 3, [7, 5, 3])
    out = tmp_path / "slice.nhdr"
    subprocess.run(["teem-unu", "slice", "-a", "2", "-p", "1", "-i", str(mnt / "r24_3d.bin.nhdr"), "-o", str(out)],
                   check=True, capture_output=True)
    assert (tmp_path / "slice.raw").read_bytes() == store[1]["r24_3d"][1].tobytes()


@pytest.mark.parametrize("dtype", sorted(EXPRESSIBLE["nifti"]))
def test_nifti_pair_through_nibabel(mnt, store, dtype):
    """dim[1] is the fastest axis: nibabel's array is the C-order array transposed."""
    for ndim, shape in SHAPES.items():
        expected = as_read(store[1][f"{dtype}_{ndim}d"])
        image = nibabel.load(str(mnt / f"{dtype}_{ndim}d.hdr"))
        assert image.shape == tuple(reversed(shape))
        values = np.asanyarray(image.dataobj)
        assert values.dtype == expected.dtype
        np.testing.assert_array_equal(values, expected.T)


@pytest.mark.parametrize("dtype", sorted(EXPRESSIBLE["nifti"]))
def test_nifti_pair_through_simpleitk(mnt, store, dtype):
    """ITK reads the same pair (2-D to 4-D: it has no 1-D images) with sizes fastest axis first."""
    for ndim, shape in SHAPES.items():
        if ndim == 1:
            continue
        expected = as_read(store[1][f"{dtype}_{ndim}d"])
        image = sitk.ReadImage(str(mnt / f"{dtype}_{ndim}d.hdr"))
        assert image.GetSize() == tuple(reversed(shape))
        values = sitk.GetArrayFromImage(image)
        assert values.dtype == expected.dtype
        np.testing.assert_array_equal(values, expected)
