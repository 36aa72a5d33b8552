"""NAME.tif, the TIFF view: opened through a real mount by tifffile, Pillow, GDAL (rasterio) and
imageio for every data type TIFF holds, 2-D to 5-D, v2 and v3, sharded, with fill-value holes,
and read as zarr-python reads the store; ImageJ hyperstack and OME-TIFF metadata; read-only,
and coherent with NAME.bin. The header's layout itself (strips, BigTIFF, a header made on
demand) is checked without a mount, with tifffile as the oracle, and so are the header read
alone, the view's refusals of writes, renames through the view and -o views (core.py)."""

import errno
import io
import json
import os
import stat
import sys
import warnings

import imageio.v3 as iio
import numpy as np
import pytest
import rasterio
import tifffile
import zarr
from PIL import Image

from core import core_of
from mounting import mounted
from tiff_data import IMAGEJ, NAMES, OME_AXES, SHAPES, values_of
from zarr_layouts import NUMERIC
from zarrfs.views import tiff
from zarrfs.views.info import ArrayInfo, type_name
from zarrfs.views.ome import Axis
from zarrfs.views.ome import Image as OmeImage

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

CHUNKS = {2: (2, 3), 3: (2, 2, 3), 4: (1, 2, 2, 3), 5: (1, 2, 1, 2, 3)}
PILLOW = {"bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float32"}  # the types Pillow opens



def ome_attributes(axes, scale, version="0.4", channels=None) -> dict:
    image = {"version": version, "name": "cells", "axes": axes,
             "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": scale}]}]}
    attributes = {"multiscales": [image]}
    if channels:
        attributes["omero"] = {"channels": [{"label": c} for c in channels]}
    return {"ome": {"version": version, **attributes}} if version == "0.5" else attributes


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """{path: expected values, as zarr-python reads them}."""
    root = tmp_path_factory.mktemp("tiff") / "data.zarr"
    rng = np.random.default_rng(24)
    group = zarr.open_group(str(root), mode="w")
    expected = {}

    def add(parent, name, values, prefix="", **kwargs):
        z = parent.create_array(name, shape=values.shape, dtype=values.dtype, **kwargs)
        z[...] = values
        expected[prefix + name] = np.asarray(z[...])

    for dtype in NUMERIC:
        for ndim, shape in SHAPES.items():
            add(group, f"{dtype}_{ndim}d", values_of(dtype, shape, rng), chunks=CHUNKS[ndim],
                dimension_names=NAMES[ndim])
    for dtype in ("uint16", "float32"):  # names ImageJ cannot order, and names that are no axis of its
        add(group, f"{dtype}_czyx", values_of(dtype, (2, 3, 5, 7), rng), chunks=(1, 2, 2, 3),
            dimension_names=("c", "z", "y", "x"))
        add(group, f"{dtype}_band", values_of(dtype, (3, 5, 7), rng), chunks=(1, 5, 7),
            dimension_names=("band", "y", "x"))
    add(group, "sharded", values_of("int16", (4, 12, 10), rng), chunks=(1, 2, 5), shards=(2, 6, 10))
    holes = group.create_array("holes", shape=(3, 8, 9), chunks=(1, 4, 3), dtype="float32", fill_value=-1.5)
    holes[1, 2:5, 1:4] = 9.25  # most chunks are never written: they read as the fill value
    expected["holes"] = np.asarray(holes[...])
    zeros = group.create_array("zero_holes", shape=(2, 8, 9), chunks=(1, 4, 3), dtype="uint8", fill_value=0)
    zeros[0, 0, 0] = 200
    expected["zero_holes"] = np.asarray(zeros[...])
    add(group, "line", values_of("float32", (9,), rng), chunks=(3,))
    legacy = zarr.open_group(str(root / "legacy"), mode="w", zarr_format=2)
    for dtype in (">u2", "<i4", ">f8", "|b1", ">c8"):
        add(legacy, f"v2_{np.dtype(dtype).name}", values_of(np.dtype(dtype).name, (3, 5, 7), rng).astype(dtype),
            "legacy/", chunks=(2, 2, 3))
    legacy["v2_uint16"].attrs["_ARRAY_DIMENSIONS"] = ["t", "y", "x"]  # xarray's names: an ImageJ time series
    expected["legacy/v2_uint16"] = np.asarray(legacy["v2_uint16"][...])
    image = zarr.open_group(str(root / "image"), mode="w", attributes=ome_attributes(
        OME_AXES, [2.0, 1.0, 0.5, 0.25, 0.125], channels=["DAPI", "GFP"]))
    add(image, "0", values_of("uint16", (3, 2, 4, 5, 7), rng), "image/", chunks=(1, 1, 2, 5, 7))
    axes = [OME_AXES[i] for i in (2, 1, 3, 4)]  # z before c: an order ImageJ has not, OME-XML has
    zc = zarr.open_group(str(root / "zc"), mode="w", attributes=ome_attributes(axes, [0.5, 1, 0.25, 0.25], "0.5"))
    add(zc, "0", values_of("int32", (4, 2, 5, 7), rng), "zc/", chunks=(2, 1, 5, 7))
    return root, expected


@pytest.fixture(scope="module")
def mnt(store, tmp_path_factory):
    with mounted(store[0], tmp_path_factory.mktemp("m"), "ro") as m:
        yield m


def as_stored(values: np.ndarray) -> np.ndarray:
    """The flat file's values: little-endian, bool as a byte 0 or 1."""
    return values.astype("u1") if values.dtype == bool else values.astype(values.dtype.newbyteorder("<"))


def all_arrays(store):
    return sorted(name for name, values in store[1].items() if values.ndim >= 2)


def test_every_array_of_two_or_more_dimensions_has_a_tif_that_tifffile_reads(mnt, store):
    for name in all_arrays(store):
        expected = as_stored(store[1][name])
        with tifffile.TiffFile(mnt / f"{name}.tif") as tif:
            assert len(tif.pages) == int(np.prod(expected.shape[:-2])), name
            series = tif.series[0]
            values = series.asarray()
            assert values.dtype == expected.dtype, name
            assert values.size == expected.size and np.array_equal(values.reshape(expected.shape), expected), name
            if not tif.is_ome and not tif.is_imagej:  # tifffile's shaped description: the array's own shape
                assert series.shape == expected.shape and tif.shaped_metadata[0]["shape"] == list(expected.shape)
        sidecar = json.loads((mnt / f"{name}.json").read_text())
        assert sidecar["views"]["tiff"] == f"{os.path.basename(name)}.tif"
    assert not (mnt / "line.tif").exists()  # one dimension: no TIFF page
    assert "tiff" not in json.loads((mnt / "line.json").read_text())["views"]


def test_the_file_is_a_header_then_the_bin_bytes(mnt, store):
    for name in ("uint16_3d", "complex128_5d", "holes", "legacy/v2_float64"):
        data, whole = (mnt / f"{name}.bin").read_bytes(), (mnt / f"{name}.tif").read_bytes()
        header = len(whole) - len(data)
        assert header % 4096 == 0 and whole[header:] == data and os.path.getsize(mnt / f"{name}.tif") == len(whole)
        assert whole[:4] == b"II*\0"  # little-endian classic TIFF: the whole file is under 4 GiB


@pytest.mark.parametrize("dtype", sorted(IMAGEJ))
def test_imagej_hyperstacks(mnt, store, dtype):
    for ndim, axes in ((3, "ZYX"), (4, "TCYX"), (5, "TZCYX")):
        name = f"{dtype}_{ndim}d"
        with tifffile.TiffFile(mnt / f"{name}.tif") as tif:
            assert tif.is_imagej, name
            series = tif.series[0]
            assert series.axes == axes and series.shape == SHAPES[ndim]
            meta = tif.imagej_metadata
            sizes = dict(zip(NAMES[ndim], SHAPES[ndim], strict=False))
            assert meta["images"] == np.prod(SHAPES[ndim][:-2]) and meta.get("hyperstack") is True
            assert (meta.get("frames", 1), meta.get("slices", 1), meta.get("channels", 1)) == \
                (sizes.get("t", 1), sizes.get("z", 1), sizes.get("c", 1))
            assert np.array_equal(series.asarray(), as_stored(store[1][name]))
    with tifffile.TiffFile(mnt / "legacy" / "v2_uint16.tif") as tif:  # xarray's _ARRAY_DIMENSIONS
        assert tif.is_imagej and tif.series[0].axes == "TYX" and tif.imagej_metadata["frames"] == 3


def test_names_imagej_cannot_hold_are_said_in_ome_xml(mnt, store):
    """Other types, or an order ImageJ has not: the names make OME-XML, which Bio-Formats reads
    (test_views_bioformats.py); names that say no axis (`band`), or a type OME has not, do not."""
    for name, axes in (("int16_5d", "TZCYX"), ("float64_3d", "ZYX"), ("uint16_czyx", "CZYX"), ("uint16_2d", "YX"),
                       ("int8_4d", "TCYX"), ("complex64_4d", "TCYX"), ("uint32_5d", "TZCYX")):
        with tifffile.TiffFile(mnt / f"{name}.tif") as tif:
            assert tif.is_ome and not tif.is_imagej, name
            assert tif.series[0].axes == axes and np.array_equal(tif.series[0].asarray(), as_stored(store[1][name]))
    for name in ("float32_band", "int64_4d", "uint64_5d", "float16_3d"):
        with tifffile.TiffFile(mnt / f"{name}.tif") as tif:
            assert not tif.is_imagej and not tif.is_ome and tif.is_shaped, name


def test_ome_zarr_images_are_ome_tiffs(mnt, store):
    with tifffile.TiffFile(mnt / "image" / "0.tif") as tif:
        assert tif.is_ome and not tif.is_imagej
        series = tif.series[0]
        assert series.axes == "TCZYX" and series.shape == (3, 2, 4, 5, 7)
        assert np.array_equal(series.asarray(), store[1]["image/0"])
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert pixels["DimensionOrder"] == "XYZCT" and pixels["Type"] == "uint16"
    assert (pixels["SizeX"], pixels["SizeY"], pixels["SizeZ"], pixels["SizeC"], pixels["SizeT"]) == (7, 5, 4, 2, 3)
    assert (pixels["PhysicalSizeX"], pixels["PhysicalSizeY"], pixels["PhysicalSizeZ"]) == (0.125, 0.25, 0.5)
    assert pixels["PhysicalSizeXUnit"] == pixels["PhysicalSizeZUnit"] == "µm"
    assert (pixels["TimeIncrement"], pixels["TimeIncrementUnit"]) == (2.0, "s")
    assert [c["Name"] for c in pixels["Channel"]] == ["DAPI", "GFP"]
    with tifffile.TiffFile(mnt / "zc" / "0.tif") as tif:  # OME-Zarr 0.5 (under "ome"), z slower than c
        assert tif.is_ome
        series = tif.series[0]
        assert series.axes == "ZCYX" and np.array_equal(series.asarray(), store[1]["zc/0"])
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
    assert pixels["DimensionOrder"] == "XYCZT" and pixels["Type"] == "int32" and pixels["PhysicalSizeZ"] == 0.5


@pytest.mark.parametrize("dtype", sorted(PILLOW))
def test_pillow_opens_2d(mnt, store, dtype):
    expected = as_stored(store[1][f"{dtype}_2d"])
    with Image.open(mnt / f"{dtype}_2d.tif") as image:
        assert image.size == expected.shape[::-1]
        assert np.array_equal(np.asarray(image).astype(expected.dtype), expected)  # Pillow widens some types


@pytest.mark.parametrize("dtype", NUMERIC)
def test_gdal_opens_2d_and_every_page_of_3d(mnt, store, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = as_stored(store[1][f"{dtype}_2d"])
        with rasterio.open(mnt / f"{dtype}_2d.tif") as src:
            assert (src.count, src.height, src.width) == (1, 5, 7)
            assert np.array_equal(src.read(1), expected.astype(src.dtypes[0]))  # float16 is read as float32
        expected = as_stored(store[1][f"{dtype}_3d"])
        path = mnt / f"{dtype}_3d.tif"
        with rasterio.open(path) as src:
            assert len(src.subdatasets) == 3  # one subdataset per page
        for page in range(3):
            with rasterio.open(f"GTIFF_DIR:{page + 1}:{path}") as src:
                assert np.array_equal(src.read(1), expected[page].astype(src.dtypes[0]))


def test_imageio_reads_every_type(mnt, store):
    for dtype in NUMERIC:
        for ndim in (2, 4):
            name = f"{dtype}_{ndim}d"
            values = iio.imread(mnt / f"{name}.tif")
            expected = as_stored(store[1][name])
            assert values.dtype == expected.dtype and np.array_equal(values.reshape(expected.shape), expected), name


def test_the_tif_is_read_only(store, tmp_path):
    with core_of(store[0], tmp_path) as c:
        path = "/uint16_3d.tif"
        assert stat.S_IMODE(c.stat(path)["st_mode"]) == 0o444 and not c.access(path, os.W_OK)
        assert stat.S_IMODE(c.stat("/uint16_3d.bin")["st_mode"]) & 0o200  # while NAME.bin is writable
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
            with pytest.raises(OSError) as info:
                c.open(path, flags)
            assert info.value.errno == errno.EPERM
        with pytest.raises(OSError) as info:
            c.truncate(path, c.stat(path)["st_size"])
        assert info.value.errno == errno.EPERM
        assert c.getxattr(path, "user.mime_type") == b"image/tiff"
        c.unlink(path)  # a view removed alone is hidden and deletes nothing
        assert "uint16_3d.tif" not in c.listdir("/")
        assert np.array_equal(zarr.open_array(str(store[0] / "uint16_3d"))[...], store[1]["uint16_3d"])
        assert "uint16_3d.tif: refused a write" in c.log()
    with core_of(store[0], tmp_path, "ro", name="ro") as c:
        with pytest.raises(OSError) as info:
            c.open("/uint16_3d.tif", os.O_RDWR)
        assert info.value.errno == errno.EROFS
    assert np.array_equal(zarr.open_array(str(store[0] / "uint16_3d"))[...], store[1]["uint16_3d"])


def test_reading_the_header_decodes_no_chunk(tmp_path):
    """Opening NAME.tif (tifffile, Bio-Formats, a thumbnailer) reads its header, which on an array
    of one big chunk cost the whole chunk's decode. Its one chunk here is not gzip at all: the
    header is read without touching it (no log line names it), and only the pixels meet it (EIO,
    the chunk named). The kernel retries a failed read-ahead page by page, so the error line,
    not the reader, shows that a read reached the chunk."""
    root = tmp_path / "data.zarr"
    z = zarr.open_group(str(root), mode="w").create_array(
        "big", shape=(1024, 1024), chunks=(1024, 1024), dtype="uint16", compressors=zarr.codecs.GzipCodec(),
        dimension_names=("y", "x"))
    z[...] = 7
    (root / "big" / "c" / "0" / "0").write_bytes(b"not gzip" * 1000)
    with core_of(root, tmp_path, "ro") as c:
        with c.file("/big.tif") as f, tifffile.TiffFile(f) as tif:
            page = tif.pages[0]
            assert tif.series[0].shape == (1024, 1024) and tif.is_ome
            assert "c/0/0" not in c.log()
            with pytest.raises(OSError) as info:
                page.asarray()
        assert info.value.errno == errno.EIO
        assert "c/0/0" in c.log()


def test_a_write_to_the_bin_drops_the_tif_pages(tmp_path):
    """A reader holding NAME.tif open, its pages in the kernel's cache, sees a write to NAME.bin."""
    root = tmp_path / "w.zarr"
    z = zarr.open_group(str(root), mode="w").create_array("a", shape=(4, 64, 256), chunks=(1, 16, 256), dtype="int32")
    z[...] = np.arange(4 * 64 * 256, dtype="int32").reshape(4, 64, 256)
    element = 2 * 64 * 256 + 10 * 256 + 5
    with mounted(root, tmp_path) as m:
        with tifffile.TiffFile(m / "a.tif") as tif:
            offset = tif.pages[2].dataoffsets[0] + 4 * (10 * 256 + 5)
        fd = os.open(m / "a.tif", os.O_RDONLY)
        try:
            whole = os.pread(fd, os.path.getsize(m / "a.tif"), 0)  # every page of it now cached
            assert np.frombuffer(whole, "<i4", 1, offset)[0] == element
            with open(m / "a.bin", "r+b") as f:
                f.seek(4 * element)
                f.write(np.int32(-7).tobytes())
            assert np.frombuffer(os.pread(fd, 4, offset), "<i4")[0] == -7
        finally:
            os.close(fd)
        with tifffile.TiffFile(m / "a.tif") as tif:
            assert tif.series[0].asarray()[2, 10, 5] == -7
    assert zarr.open_array(str(root / "a"))[2, 10, 5] == -7


def test_past_4_gib_the_tif_is_a_bigtiff_of_several_strips_a_page(tmp_path):
    """6.4 GB of fill value but one chunk: tifffile maps it and reads the written corner."""
    root = tmp_path / "big.zarr"
    z = zarr.open_group(str(root), mode="w").create_array("a", shape=(2, 40000, 40000), chunks=(1, 1000, 1000),
                                                          dtype="uint16", fill_value=3)
    corner = np.arange(1000 * 1000, dtype="uint16").reshape(1000, 1000)
    z[1, -1000:, -1000:] = corner
    with mounted(root, tmp_path, "ro") as m:
        with tifffile.TiffFile(m / "a.tif") as tif:
            assert tif.is_bigtiff and len(tif.pages) == 2 and tif.series[0].shape == (2, 40000, 40000)
            assert len(tif.pages[1].dataoffsets) == 2  # a page is 3.2 GB: strips under 2 GiB
            assert tif.pages[1].dataoffsets[0] == os.path.getsize(m / "a.tif") - 40000 * 40000 * 2
        values = tifffile.memmap(m / "a.tif", mode="r")
        assert values.shape == (2, 40000, 40000)
        assert np.array_equal(values[1, -1000:, -1000:], corner) and values[0, 123, 456] == 3
        del values


def test_mv_of_the_tif_renames_the_array(tmp_path):
    root = tmp_path / "r.zarr"
    zarr.open_group(str(root), mode="w").create_array("a", shape=(2, 3), chunks=(2, 3), dtype="uint8")[...] = 5
    with core_of(root, tmp_path) as c:
        c.rename("/a.tif", "/b.tif")
        assert {"b.bin", "b.tif", "b.npy"} <= set(c.listdir()) and not c.exists("/a.tif")
        assert np.array_equal(tifffile.imread(io.BytesIO(c.read_bytes("/b.tif"))), np.full((2, 3), 5, "u1"))
    assert zarr.open_array(str(root / "b"))[1, 2] == 5


def test_views_option_chooses_the_tif(store, tmp_path):
    with core_of(store[0], tmp_path, "ro,views=tiff") as c:
        assert sorted(c.listdir())[:4] == ["bool_2d.bin", "bool_2d.json", "bool_2d.tif", "bool_3d.bin"]
    with core_of(store[0], tmp_path, "ro,views=npy", name="npy") as c:
        assert not [n for n in c.listdir() if n.endswith(".tif")]


# the header without a mount: tifffile as the oracle


def info(shape, dtype="uint16", names=None, image=None) -> ArrayInfo:
    dt = np.dtype(dtype)
    return ArrayInfo("a", tuple(shape), dt, type_name(dt), names, {}, "a.bin", None, image)


def read_back(header, values: np.ndarray) -> tifffile.TiffFile:
    return tifffile.TiffFile(io.BytesIO(bytes(header) + as_stored(values).tobytes()))


def test_what_has_no_tif():
    assert tiff.header(info((7,))) is None  # one dimension
    assert tiff.header(info((0, 5))) is None and tiff.header(info((3, 0, 5))) is None  # no pixels
    assert tiff.header(info((3, 4), "V3")) is None and tiff.header(info((3, 4), "M8[s]")) is None
    assert tiff.header(info((3, 4), "uint8")) is not None


@pytest.fixture
def small_limits(monkeypatch):
    """Limits small enough to reach: strips of at most 40 bytes, classic TIFF under 2 KiB."""
    tiff.layout.cache_clear()
    monkeypatch.setattr(tiff, "STRIP_MAX", 40)
    yield monkeypatch
    tiff.layout.cache_clear()


def test_several_strips_a_page_and_bigtiff(small_limits):
    values = np.arange(3 * 4 * 11 * 7, dtype="<u2").reshape(3, 4, 11, 7)  # a page is 154 bytes: 4 strips
    header = tiff.header(info(values.shape))
    with read_back(header, values) as tif:
        assert not tif.is_bigtiff and len(tif.pages) == 12 and len(tif.pages[5].dataoffsets) == 6
        assert np.array_equal(tif.series[0].asarray(), values)
    small_limits.setattr(tiff, "CLASSIC_MAX", 2047)  # the file no longer fits: BigTIFF
    tiff.layout.cache_clear()
    header = tiff.header(info(values.shape))
    with read_back(header, values) as tif:
        assert tif.is_bigtiff and len(tif.pages[11].dataoffsets) == 6
        assert np.array_equal(tif.series[0].asarray(), values)


@pytest.mark.parametrize("big", [False, True])
def test_any_slice_of_the_header_is_the_slice_of_its_bytes(big):
    header = tiff.TiffHeader((50, 3, 4), 8, (3, 64), b'{"shape": [50, 3, 4]}', big)
    whole = bytes(header)
    assert len(whole) == len(header) == header.data
    for start in range(0, len(whole), 37):
        assert header[start:start + 101] == whole[start:start + 101]
    assert header[len(whole) - 3:] == whole[-3:] and header[10:5] == b""


def test_a_header_of_many_pages_is_made_on_demand():
    """A million pages: some 126 MB of IFDs, never held; the last one points at the last page."""
    shape = (1000, 1000, 2, 3)
    header = tiff.header(info(shape, "uint8"))
    assert len(header) > 120_000_000 and sys.getsizeof(header) < 65536
    last = header.records_end - header.record_bytes
    ifd = header[last:last + header.record_bytes]
    entries = {int.from_bytes(ifd[2 + 12 * k:4 + 12 * k], "little"): ifd[10 + 12 * k:14 + 12 * k] for k in range(11)}
    assert int.from_bytes(entries[273], "little") == len(header) + (10 ** 6 - 1) * 6  # StripOffsets
    assert ifd[2 + 12 * 11:6 + 12 * 11] == b"\0\0\0\0"  # no IFD after it


def test_data_of_a_mebibyte_or_more_start_a_mebibyte_past_the_header():
    """So that reading the header, and the kernel's read-ahead past it, never reach the data
    (test_reading_the_header_decodes_no_chunk), and the kernel's 1 MiB reads of NAME.tif fall on
    the chunks' boundaries as in NAME.bin."""
    assert len(tiff.header(info((64, 1024, 1024), "uint8"))) == 2 << 20
    assert len(tiff.header(info((1, 1024, 1024), "uint8"))) == 2 << 20
    assert len(tiff.header(info((1023, 1024), "uint8"))) == 4096  # less data: a 4 KiB page
    many = tiff.header(info((9000, 1024, 1024), "uint8"))  # 9000 BigTIFF IFDs: over 2 MiB of them
    assert many.records_end > 2 << 20 and len(many) % (1 << 20) == 0 and len(many) - many.records_end >= 1 << 20


def test_imagej_axis_names_and_order():
    def described(names, dtype="uint8", shape=(2, 3, 4, 5, 6)):
        return tiff.description(info(shape, dtype, names)).decode()
    text = described(("time", "Z", "channel", "y", "x"))
    assert text.startswith("ImageJ=") and "images=24\nchannels=4\nslices=3\nframes=2\nhyperstack=true" in text
    assert 'DimensionOrder="XYZCT"' in described(("t", "c", "z", "y", "x"))  # ImageJ's order is TZC: OME-XML's
    assert described(("t", "t", "z", "y", "x")).startswith('{"shape"')
    int16 = described(("t", "z", "c", "y", "x"), "int16")  # ImageJ reads no int16: OME-XML
    assert 'DimensionOrder="XYCZT" Type="int16" SizeX="6" SizeY="5" SizeZ="3" SizeC="4" SizeT="2"' in int16
    assert described(("t", "z", "c", "y", "x"), "int64").startswith('{"shape"')  # OME has no int64
    assert described(("t", "z", "band", "y", "x"), "int16").startswith('{"shape"')  # an axis neither knows
    assert described(("t", "z", "c", "row", "x"), "int16").startswith('{"shape"')  # the last two: y and x
    assert described(None).startswith('{"shape"')
    assert described(("y", "x"), shape=(5, 6)).startswith("<?xml")
    assert described(None, shape=(5, 6)) == '{"shape": [5, 6]}'


def test_ome_axes_that_cannot_be_an_ome_tiff_fall_back():
    def axis(name, kind=None, unit=None):
        return Axis(name, kind, unit)
    space = [axis("y", "space", "meter"), axis("x", "space", "meter")]
    image = OmeImage("i", (axis("t", "time"), axis("q", "time"), *space), (1.0,) * 4, ())
    assert tiff.description(info((2, 3, 4, 5), image=image)).startswith(b'{"shape"')  # two time axes
    image = OmeImage("i", (axis("c", "channel"), *space), (1.0, 2.0, None), ())
    assert tiff.description(info((3, 4, 5), "int64", image=image)).startswith(b'{"shape"')  # OME has no int64
    xml = tiff.description(info((3, 4, 5), image=image)).decode()
    assert 'DimensionOrder="XYCZT"' in xml and 'PhysicalSizeY="2.0" PhysicalSizeYUnit="m"' in xml
    assert "PhysicalSizeX" not in xml  # no scale given for x
    image = OmeImage("i", (axis("c", "channel"), axis("y", "space"), axis("x", "space", "furlong")), (1.0,) * 3, ())
    assert "PhysicalSize" not in tiff.description(info((3, 4, 5), image=image)).decode()  # no unit OME knows
    image = OmeImage("i", (axis("t", "time"), axis("c", "channel"), axis("y", "time"), axis("x", "space")),
                     (1.0,) * 4, ())  # an axis OME-XML cannot take as Y: ImageJ, by the axes' names
    assert tiff.description(info((2, 3, 4, 5), image=image)).startswith(b"ImageJ=1.11a\nimages=6\nchannels=3\n")


def test_malformed_ome_metadata_makes_no_image():
    """Whatever a group's attributes hold, finding the image never fails: it finds none, or
    leaves out what it cannot use."""
    from types import SimpleNamespace

    from zarrfs.views.ome import image_of

    def found(attributes, path="img/0"):
        return image_of(path, lambda _: SimpleNamespace(meta=SimpleNamespace(attributes=attributes)))
    axes = [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    good = {"axes": axes, "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale",
                                                                                     "scale": [2, 3]}]}]}
    assert found({"multiscales": [good]}).scale == (2.0, 3.0) == found({"multiscales": [good]}, "0").scale  # a root image
    for bad in [None, 3, "x", [None], [3], [{}], [{"datasets": 3}], [{"datasets": [{"path": "0"}]}],
                [{"datasets": [{"path": "0"}], "axes": [3]}], [{"datasets": [{"path": "1"}], "axes": axes}],
                [{"datasets": [None, {"path": "0"}], "axes": {"y": 1}}]]:
        assert found({"multiscales": bad}) is None, bad
    assert found({"ome": 3}) is None and found(None) is None and found({"multiscales": [good]}, "") is None
    for scale, expected in [([2, "3"], (2.0, None)), ([0, -1], (None, None)), ([True, float("nan")], (None, None)),
                            ([1], (None, None)), ("2", (None, None))]:
        level = {**good, "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": scale}]}]}
        assert found({"multiscales": [level]}).scale == expected, scale
    overall = {**good, "coordinateTransformations": [{"type": "scale", "scale": [10, 10]}]}
    assert found({"multiscales": [overall]}).scale == (20.0, 30.0)  # the image's scale applies after the level's
    labels = found({"multiscales": [good], "omero": {"channels": [{"label": "a"}, {}, 3]}}).channels
    assert labels == ("a", None, None)
