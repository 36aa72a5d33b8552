"""The header views without a mount: what each format refuses, the names an array takes (the
collision rule with views), headers made from metadata alone, the npy view's byte arithmetic,
and the views option."""

import json

import numpy as np
import pytest

from helpers import CountingStore, array_doc, group_doc, open_raw_file, write_doc
from zarrfs.cli.command import UsageError, parse_options
from zarrfs.errors import HeaderWriteError
from zarrfs.format.v3 import parse_document
from zarrfs.fs.hierarchy import DATA, HEADER, Hierarchy
from zarrfs.views import DEFAULT_VIEWS, VIEWS, info_of
from zarrfs.views.prefixed_file import PrefixedFile

ALL_VIEWS = tuple(VIEWS)


def info(shape, data_type="float32", name="a", **extra):
    meta = parse_document(json.dumps(array_doc(shape, data_type, [max(1, s) for s in shape] or [], **extra)).encode(),
                          "zarr.json")
    return info_of(meta, name, f"{name}.bin")


def made(shape, data_type="float32", name="a", **extra) -> set[str]:
    return {view for view, v in VIEWS.items() if v.header(info(shape, data_type, name, **extra)) is not None}


def test_what_each_format_refuses():
    assert made((4, 5), "float16") == {"npy", "tiff"}
    assert made((4, 5), "r24") == {"npy", "nrrd"}
    assert made((4, 5), "int8") == set(ALL_VIEWS) - {"envi"}
    assert made((4, 5), "complex128") == set(ALL_VIEWS)
    assert made(()) == {"npy"}  # a 0-d array is no raster
    assert made((0, 5)) == {"npy"}  # nor is an empty one
    assert made((2,) * 8) == set(ALL_VIEWS) - {"nifti"}  # NIfTI-1 has at most 7 dimensions
    assert made((40000, 2)) == set(ALL_VIEWS) - {"nifti"}  # of at most 32767 each
    assert made((4097, 1, 1)) == set(ALL_VIEWS) - {"vrt"}  # a VRT of more planes would be megabytes
    assert made((4096, 1, 1)) == set(ALL_VIEWS)
    assert made((3, 4), name="with space") == set(ALL_VIEWS) - {"mhd", "nrrd"}  # would read as a file pattern
    assert made((5,)) == set(ALL_VIEWS) - {"tiff"}  # a TIFF page has two dimensions


def test_header_text():
    a = info((2, 3, 4), "uint16", dimension_names=["t", "y", "x"])
    envi = VIEWS["envi"].header(a).decode()
    assert "samples = 4\nlines = 3\nbands = 2\n" in envi and "data type = 12\n" in envi and "byte order = 0" in envi
    mhd = VIEWS["mhd"].header(a).decode()
    assert "NDims = 3\nDimSize = 4 3 2\nElementType = MET_USHORT\n" in mhd
    assert mhd.endswith("ElementDataFile = a.bin\n")
    nrrd = VIEWS["nrrd"].header(a).decode()
    assert 'sizes: 4 3 2\n' in nrrd and 'labels: "x" "y" "t"\n' in nrrd and nrrd.endswith("data file: a.bin\n")
    vrt = VIEWS["vrt"].header(a).decode()
    assert vrt.count("<VRTRasterBand") == 2 and "<ImageOffset>24</ImageOffset>" in vrt
    assert "<Description>t=1</Description>" in vrt
    npy = VIEWS["npy"].header(a)
    assert len(npy) == 128 and b"'descr': '<u2'" in npy and b"'shape': (2, 3, 4)" in npy
    nifti = VIEWS["nifti"].header(a)
    assert len(nifti) == 348 and nifti[344:] == b"ni1\0"
    assert np.frombuffer(nifti[40:56], "<i2").tolist() == [3, 4, 3, 2, 1, 1, 1, 1]


def test_listing_and_headers_read_no_chunk(tmp_path):
    root = tmp_path / "data.zarr"
    write_doc(root, "", group_doc())
    for i in range(5):
        write_doc(root, f"a{i}", array_doc([100, 100], "float64", [10, 10]))
    raw = open_raw_file(CountingStore(root), "a0")
    raw.write(0, np.ones(100 * 100).tobytes())
    raw.flush()
    store = CountingStore(root)
    hierarchy = Hierarchy(store, ALL_VIEWS)
    for entry in hierarchy.listing("").values():
        if entry.kind == HEADER:
            assert hierarchy.content(entry)
        if entry.kind == DATA:
            hierarchy.prefix(entry)
    assert store.gets and all(key.endswith("zarr.json") for key, _, _ in store.gets)


def test_collision_rule_covers_the_view_suffixes(tmp_path):
    root = tmp_path / "data.zarr"
    write_doc(root, "", group_doc())
    write_doc(root, "x", array_doc([3], "uint8", [3]))
    write_doc(root, "x.bin", array_doc([3], "uint8", [3]))  # its NIfTI header would be x's ENVI header
    write_doc(root, "y.npy", group_doc())  # a group named like y's npy view
    write_doc(root, "y", array_doc([3], "uint8", [3]))
    names = set(Hierarchy(CountingStore(root), ALL_VIEWS).listing(""))
    assert {"x.bin", "x.bin.hdr", "x.hdr", "x.img", "x.npy"} <= names  # the first in name order keeps its name
    assert {"x.bin.array.bin", "x.bin.array.hdr", "x.bin.array.bin.hdr", "x.bin.array.json"} <= names
    assert {"y.npy", "y.array.bin", "y.array.npy", "y.array.json"} <= names and "y.bin" not in names
    default = set(Hierarchy(CountingStore(root), DEFAULT_VIEWS).listing(""))
    assert {"x.bin.bin", "x.bin.bin.hdr", "y.array.bin"} <= default  # without NIfTI, x.bin collides with nothing


def test_sidecar_names_the_views(tmp_path):
    root = tmp_path / "data.zarr"
    write_doc(root, "", array_doc([3, 4], "int8", [3, 4]))
    hierarchy = Hierarchy(CountingStore(root), ALL_VIEWS)
    entries = hierarchy.entries_of(hierarchy.lookup("/"))
    sidecar = json.loads(hierarchy.content(entries["data.zarr.json"]))
    assert sidecar["views"] == {"npy": "data.zarr.npy", "mhd": "data.zarr.mhd", "nrrd": "data.zarr.bin.nhdr",
                                "vrt": "data.zarr.vrt", "nifti": "data.zarr.hdr", "tiff": "data.zarr.tif"}  # no int8 ENVI


@pytest.fixture
def npy_file(tmp_path):
    root = tmp_path / "data.zarr"
    write_doc(root, "", array_doc([4, 4], "int16", [2, 2]))
    raw = open_raw_file(CountingStore(root))
    header = VIEWS["npy"].header(info((4, 4), "int16"))
    return PrefixedFile(raw, header, "/a.npy"), header


def test_npy_view_reads_header_then_data(npy_file):
    view, header = npy_file
    view.raw.write(0, np.arange(16, dtype="<i2").tobytes())
    whole = view.read(0, 1 << 20)
    assert len(whole) == view.size == 128 + 32
    assert whole == header + np.arange(16, dtype="<i2").tobytes()
    assert view.read(120, 12) == header[120:] + np.arange(2, dtype="<i2").tobytes()
    assert view.read(view.size, 10) == b""


def test_npy_view_writes_past_the_header_only(npy_file):
    view, header = npy_file
    with pytest.raises(HeaderWriteError) as info_:
        view.write(127, b"\0\1\0")
    assert info_.value.errno == 1 and "128-byte header" in str(info_.value)
    assert view.raw.read(0, 2) == b"\0\0"  # nothing written
    assert view.write(126, header[126:] + b"\7\0") == 4  # the same header bytes, then data
    assert view.write(130, b"\x08\0") == 2
    assert np.frombuffer(view.raw.read(0, 4), "<i2").tolist() == [7, 8]


def test_views_option():
    assert parse_options([])[0].views == DEFAULT_VIEWS == ("npy", "envi", "mhd", "nrrd", "vrt", "tiff", "hdf5")
    assert parse_options(["views=tiff,ro"])[0].views == ("tiff",)
    assert parse_options(["views=none"])[0].views == ()
    options = parse_options(["ro,views=nifti,npy,cache_size=1M", "views=vrt"])[0]
    assert options.views == ("vrt",) and options.read_only and options.cache_bytes == 1 << 20
    assert parse_options(["views=mhd,envi,ro"])[0].views == ("mhd", "envi")
    assert parse_options(["views=hdf5,npy,ro"])[0].views == ("hdf5", "npy")  # a group view is a view too
    for bad in ["views=tif", "views=", "views=none,npy"]:
        with pytest.raises(UsageError):
            parse_options([bad])
