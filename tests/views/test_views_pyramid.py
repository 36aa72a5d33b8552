"""IMAGE.ome.tif: each OME-Zarr multiscale image (0.4 in Zarr v2, 0.5 in Zarr v3) as one pyramidal
OME-TIFF in its group, read through a real mount by tifffile (every level equal to zarr-python's)
and by Bio-Formats (one image, one resolution per level; the lowest level's pixels)."""

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from core import core_of
from mounting import mounted
from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.fs.filesystem import FileSystem, Options
from zarrfs.views import ome_pyramid
from zarrfs.views.ome_pyramid import Level

CHECKOUT = Path(__file__).resolve().parents[2]
JAR = CHECKOUT / ".test-servers" / "bioformats_package.jar"
HELPER = Path(__file__).with_name("BioFormatsInfo.java")

AXES = [{"name": "c", "type": "channel"}, {"name": "z", "type": "space", "unit": "micrometer"},
        {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}]
SHAPE = (2, 5, 256, 300)
LEVELS = 3
SCALE = (1.0, 2.5, 0.5, 0.25)  # level 0's physical sizes: z, y, x in micrometres
CHUNKS = (1, 1, 64, 128)


def image(parent, name: str, version: str, zarr_format: int, rng) -> dict[str, np.ndarray]:
    """An image of LEVELS levels, each half the last in y and x, with channel labels; its levels'
    values by path."""
    datasets, levels = [], {}
    for k in range(LEVELS):
        scale = [SCALE[0], SCALE[1], SCALE[2] * 2 ** k, SCALE[3] * 2 ** k]
        datasets.append({"path": str(k), "coordinateTransformations": [{"type": "scale", "scale": scale}]})
    multiscale = {"name": name, "axes": AXES, "datasets": datasets}
    omero = {"channels": [{"label": "DAPI"}, {"label": "GFP"}]}
    if version == "0.5":
        attributes = {"ome": {"version": version, "multiscales": [multiscale], "omero": omero}}
    else:
        attributes = {"multiscales": [{**multiscale, "version": version}], "omero": omero}
    group = parent.create_group(name, attributes=attributes)
    shape = SHAPE
    for k in range(LEVELS):
        values = rng.integers(0, 65535, shape, dtype="uint16")
        kwargs = {"dimension_names": [a["name"] for a in AXES]} if zarr_format == 3 else {}
        level = group.create_array(str(k), shape=shape, dtype="uint16", chunks=CHUNKS, **kwargs)
        level[...] = values
        levels[f"{name}/{k}"] = values
        shape = (*shape[:2], -(-shape[2] // 2), -(-shape[3] // 2))
    return levels


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """{zarr format: (root, values by path)}, an image each: OME-Zarr 0.4 in v2, 0.5 in v3."""
    rng, out = np.random.default_rng(37), {}
    for zarr_format, version in ((2, "0.4"), (3, "0.5")):
        root = tmp_path_factory.mktemp(f"v{zarr_format}") / "data.zarr"
        group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
        out[zarr_format] = root, image(group, "cells", version, zarr_format, rng)
    return out


@pytest.fixture(scope="module")
def mounts(stores, tmp_path_factory):
    with mounted(stores[2][0], tmp_path_factory.mktemp("m2"), "ro") as v2, \
            mounted(stores[3][0], tmp_path_factory.mktemp("m3"), "ro") as v3:
        yield {2: v2, 3: v3}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_tifffile_reads_every_level_as_zarr_python_does(mounts, stores, zarr_format):
    path = mounts[zarr_format] / "cells" / "cells.ome.tif"
    assert "cells.ome.tif" in {p.name for p in path.parent.iterdir()}
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome and len(tif.series) == 1
        series = tif.series[0]
        assert series.axes == "CZYX" and len(series.levels) == LEVELS
        for k, level in enumerate(series.levels):
            assert np.array_equal(level.asarray(), stores[zarr_format][1][f"cells/{k}"]), k
        assert tif.pages[0].subifds is not None and len(tif.pages[0].subifds) == LEVELS - 1
        pixels = tif.ome_metadata
    assert 'PhysicalSizeX="0.25"' in pixels and 'PhysicalSizeY="0.5"' in pixels and 'PhysicalSizeZ="2.5"' in pixels
    assert 'Name="DAPI"' in pixels and 'Name="GFP"' in pixels
    assert path.stat().st_size == len(path.read_bytes())
    assert os.getxattr(path, "user.mime_type") == b"image/tiff"


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_each_strip_is_one_chunk_row_and_no_two_are_adjacent(mounts, zarr_format):
    """Bio-Formats reads adjacent strips as one strip from the plane's first byte (every chunk
    above a region decoded); strips apart are read one by one, only those under the region."""
    with tifffile.TiffFile(mounts[zarr_format] / "cells" / "cells.ome.tif") as tif:
        assert len(tif.pages[0].dataoffsets) == 4
        for page in [tif.pages[0], *tif.pages[0].pages]:
            assert page.tags["RowsPerStrip"].value == CHUNKS[2]
            offsets, counts = page.dataoffsets, page.databytecounts
            assert len(offsets) == -(-page.shape[0] // CHUNKS[2])
            assert all(offsets[k] > offsets[k - 1] + counts[k - 1] for k in range(1, len(offsets)))


def test_reading_a_strip_reads_only_the_chunks_under_it(stores, tmp_path, caplog):
    """Through the core (no kernel reading ahead): a strip of level 0's plane (c=1, z=3) reads the
    chunks of its rows, and no other."""
    root, values = stores[3]
    fs = FileSystem(str(root), Options(read_only=True, recovery_dir=str(tmp_path / "recovery")), HierarchyEdits)
    try:
        fh, size = fs.open("/cells/cells.ome.tif", os.O_RDONLY), fs.getattr("/cells/cells.ome.tif")["st_size"]
        header = fs.read(fh, 0, 1 << 16)  # the IFDs, and no pixel: tifffile reads no data to list strips
        with tifffile.TiffFile(io.BytesIO(header + bytes(size - len(header)))) as tif:
            page = tif.pages[1 * SHAPE[1] + 3]
            assert min(page.dataoffsets) >= len(header)
            k = 2  # rows 128..191
            with caplog.at_level(logging.DEBUG, logger="zarrfs.engine.chunk_sources"):
                data = fs.read(fh, page.dataoffsets[k], page.databytecounts[k])
            read = {m.group(1) for m in re.finditer(r"store read (\S+)", caplog.text)}
        columns = -(-SHAPE[3] // CHUNKS[3])
        assert read == {f"cells/0/c/1/3/{k}/{j}" for j in range(columns)}
        rows = values["cells/0"][1, 3, k * CHUNKS[2]:(k + 1) * CHUNKS[2]]
        assert np.array_equal(np.frombuffer(data, "<u2").reshape(rows.shape), rows)
    finally:
        fs.stop()


def test_bioformats_sees_one_image_of_every_resolution(mounts, stores, tmp_path):
    """Bio-Formats, as QuPath opens it: one series whose resolutions are the levels, each of its
    level's size, and the lowest resolution's planes are that level's values."""
    if not JAR.exists():
        pytest.fail(f"{JAR} is missing: scripts/setup --test puts Bio-Formats' jar there")
    files = [mounts[f] / "cells" / "cells.ome.tif" for f in (2, 3)]
    args = ["java", "-cp", str(JAR), str(HELPER), "--pixels", str(tmp_path), "--resolutions", *map(str, files)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    found = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(found) == 2, result.stdout + result.stderr
    for k, (zarr_format, info) in enumerate(zip((2, 3), found, strict=True)):
        levels = [stores[zarr_format][1][f"cells/{n}"] for n in range(LEVELS)]
        assert "error" not in info and info["format"] == "OME-TIFF" and info["series"] == 1, info
        assert info["resolutions"] == [[v.shape[-1], v.shape[-2]] for v in levels], info
        assert (info["C"], info["Z"], info["T"]) == (2, 5, 1), info
        planes = np.fromfile(tmp_path / f"{k}.raw", "<u2")  # read at the last resolution
        assert np.array_equal(planes, levels[-1].reshape(-1)), zarr_format


def test_a_write_to_a_level_shows_in_the_open_pyramid(stores, tmp_path):
    """The kernel's pages of IMAGE.ome.tif, held open, are dropped when a level is written."""
    root = tmp_path / "w.zarr"
    image(zarr.open_group(str(root), mode="w"), "cells", "0.5", 3, np.random.default_rng(5))
    with mounted(root, tmp_path) as m, open(m / "cells" / "cells.ome.tif", "rb") as held:
        with tifffile.TiffFile(held) as tif:
            before = tif.series[0].levels[1].asarray()
        with open(m / "cells" / "1.bin", "r+b") as out:
            out.write(np.full(SHAPE[3] // 2, 7, "<u2").tobytes())  # the first row of plane (0, 0)
        held.seek(0)  # tifffile takes the position it is given as the file's start
        with tifffile.TiffFile(held) as tif:
            after = tif.series[0].levels[1].asarray()
        assert (after[0, 0, 0] == 7).all() and not (before[0, 0, 0] == 7).all()
        assert np.array_equal(after[0, 0, 1:], before[0, 0, 1:])


def test_an_image_beyond_the_header_bound_is_left_out_with_one_line(stores, tmp_path):
    with core_of(stores[3][0], tmp_path, "ro", "header_cache_size=4K") as c:
        names = c.listdir("/cells")
        assert "cells.ome.tif" not in names and "0.tif" in names
        [line] = [line for line in c.log().splitlines() if "cells/cells.ome.tif" in line]
        assert re.search(r"cells/cells.ome.tif: no OME-TIFF pyramid: .*header_cache_size", line)


def test_past_4_gib_the_pyramid_is_a_bigtiff(tmp_path):
    """The layout of a 4.8 GB level 0: BigTIFF, its strips past 4 GiB where tifffile finds them
    (the header written into a sparse file of the layout's size: no pixel is needed)."""
    shapes = [(2, 30000, 40000), (2, 15000, 20000), (2, 7500, 10000)]
    levels = [Level(f"l{k}", shape, "uint16", 2, 1024) for k, shape in enumerate(shapes)]
    layout = ome_pyramid.build(levels, b"<OME/>", 32 << 20)
    path = tmp_path / "sparse.tif"
    with open(path, "wb") as f:
        for offset, header in layout.metadata:
            f.seek(offset)
            f.write(header)
        f.truncate(layout.size)
    with tifffile.TiffFile(path) as tif:
        assert tif.is_bigtiff and len(tif.pages) == 2
        for page in tif.pages:
            assert [page.shape, *(sub.shape for sub in page.pages)] == [s[1:] for s in shapes]
        last = tif.pages[1].pages[1]
        assert last.dataoffsets[-1] + last.databytecounts[-1] <= layout.size
        assert tif.pages[0].pages[0].dataoffsets[0] > 1 << 32  # level 1 follows level 0's 4.8 GB
    assert ome_pyramid.build(levels[2:], b"<OME/>", 32 << 20).size < 1 << 32  # smaller: classic
    assert path.read_bytes()[:4] == b"II+\0"


def test_the_pyramid_ends_at_a_level_unlike_the_first():
    """A level that also halves z, or has another type, cannot pair its planes with level 0's."""
    first, second = Level("0", (5, 256, 300), "uint16", 2, 64), Level("1", (5, 128, 150), "uint16", 2, 64)
    assert ome_pyramid.pyramid([first, second, Level("2", (2, 64, 75), "uint16", 2, 64), second]) == [first, second]
    assert ome_pyramid.pyramid([first, Level("1", (5, 128, 150), "int16", 2, 64)]) == [first]
    assert ome_pyramid.pyramid([Level("0", (5, 0, 300), "uint16", 2, 64), second]) == []


def test_only_datasets_below_the_group_make_an_image():
    datasets = [{"path": "0"}, {"path": "1"}]
    attributes = {"multiscales": [{"name": "a", "datasets": datasets}, {"name": "a", "datasets": datasets},
                                  {"name": "up", "datasets": [{"path": "../x"}]}, {"datasets": [{"path": "s/0"}]}]}
    assert ome_pyramid.images(attributes, "g") == {"a.ome.tif": ["0", "1"], "a_2.ome.tif": ["0", "1"],
                                                   "g.ome.tif": ["s/0"]}


def test_a_document_listing_many_images_costs_a_bounded_listing():
    """multiscales is untrusted: at most MAX_IMAGES images are made of it, named in one pass
    (a second image of a name, and an image whose own name ends like a second one's, still apart)."""
    datasets = [{"path": "0"}]
    many = [{"name": "a", "datasets": datasets}] * 100_000
    found = ome_pyramid.images({"multiscales": [{"name": "a_2", "datasets": datasets}, *many]}, "g")
    assert len(found) == ome_pyramid.MAX_IMAGES
    assert list(found)[:4] == ["a_2.ome.tif", "a.ome.tif", "a_3.ome.tif", "a_4.ome.tif"]


def test_the_header_cache_counts_what_a_layout_holds():
    """A pyramid's layout holds an extent per strip: the cache's bound counts them, not the 56
    bytes of the object that lists them."""
    levels = [Level("0", (2, 4096, 4096), "uint16", 2, 16)]
    layout = ome_pyramid.build(levels, b"<OME/>", 1 << 30)
    assert len(layout.data) >= 512
    assert sys.getsizeof(layout) >= len(layout.metadata[0][1]) + 100 * len(layout.data)
