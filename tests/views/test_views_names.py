"""Header views that are safe for every name. MetaImage (MetaIO: ITK, SimpleITK, VTK) and NRRD
(teem) readers interpret their data-file field: a `%` starts a printf pattern of numbered files
(SimpleITK fails, or crashes, on one), a leading LIST a list of files (SimpleITK reads other bytes
without an error). So a name with `%` gets no NAME.mhd or NAME.bin.nhdr, and a LIST name's data file
is written ./NAME.bin, which every reader takes as the file beside the header. ENVI, VRT and NIfTI
hold no name a reader interprets: their views stay, and read the right values. Which views each
name gets, and what its headers say, are asked of the core without a mount (core.py); the
readers read through one."""

import json
import subprocess
import warnings

import nibabel
import nrrd
import numpy as np
import pytest
import rasterio
import SimpleITK as sitk
import zarr

from core import core_of
from mounting import mounted

NAMES = ["LIST_ids", "LIST", "rate_50%", "a%s_b", "x%d", "list_low", "a{b}c", "x&y<z", "plain"]
VALUES = np.arange(12, dtype="<u2").reshape(3, 4) + 1


VIEWS = ("ro", "views=npy,envi,mhd,nrrd,vrt,nifti")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("names") / "n.zarr"
    group = zarr.open_group(str(root), mode="w")
    for name in NAMES:
        group.create_array(name, shape=VALUES.shape, chunks=VALUES.shape, dtype=VALUES.dtype)[...] = VALUES
    return root


@pytest.fixture(scope="module")
def mnt(store, tmp_path_factory):
    with mounted(store, tmp_path_factory.mktemp("m"), *VIEWS) as m:
        yield m


def test_names_with_a_percent_get_no_metaimage_or_nrrd_header(store, tmp_path):
    with core_of(store, tmp_path, *VIEWS) as c:
        listed = set(c.listdir("/"))
        for name in NAMES:
            pattern = "%" in name
            assert (f"{name}.mhd" in listed) != pattern and (f"{name}.bin.nhdr" in listed) != pattern, name
            assert {f"{name}.bin.hdr", f"{name}.vrt", f"{name}.hdr", f"{name}.img", f"{name}.npy"} <= listed, name
            views = json.loads(c.read_text(f"/{name}.json"))["views"]
            assert ("mhd" in views) != pattern and ("nrrd" in views) != pattern and "envi" in views, name


@pytest.mark.parametrize("name", [n for n in NAMES if "%" not in n])
def test_metaimage_and_nrrd_read_the_array_itself(mnt, name):
    for suffix in (".mhd", ".bin.nhdr"):
        assert np.array_equal(sitk.GetArrayFromImage(sitk.ReadImage(str(mnt / f"{name}{suffix}"))), VALUES), suffix
    data, _ = nrrd.read(str(mnt / f"{name}.bin.nhdr"), index_order="C")
    assert np.array_equal(data, VALUES)
    text = subprocess.run(["teem-unu", "save", "-f", "text", "-i", str(mnt / f"{name}.bin.nhdr")],
                          capture_output=True, text=True, check=True, cwd="/").stdout
    assert np.array_equal(np.array(text.split(), dtype="u2"), VALUES.reshape(-1))


def test_a_list_name_is_given_as_the_file_beside_the_header(store, tmp_path):
    with core_of(store, tmp_path, *VIEWS) as c:
        assert "ElementDataFile = ./LIST_ids.bin\n" in c.read_text("/LIST_ids.mhd")
        assert "data file: ./LIST_ids.bin\n" in c.read_text("/LIST_ids.bin.nhdr")
        assert "ElementDataFile = list_low.bin\n" in c.read_text("/list_low.mhd")  # MetaIO's test is LIST only


@pytest.mark.parametrize("name", NAMES)
def test_envi_vrt_and_nifti_read_the_array_for_every_name(mnt, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        for path in (mnt / f"{name}.bin", mnt / f"{name}.vrt"):  # GDAL finds NAME.bin.hdr beside NAME.bin
            with rasterio.open(path) as r:
                assert np.array_equal(r.read(1), VALUES), path.name
    assert np.array_equal(np.asarray(nibabel.load(mnt / f"{name}.hdr").dataobj).T, VALUES)
    assert np.array_equal(sitk.GetArrayFromImage(sitk.ReadImage(str(mnt / f"{name}.hdr"))), VALUES)
