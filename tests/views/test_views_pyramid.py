"""IMAGE.ome.tif: each OME-Zarr multiscale image (0.4 in Zarr v2, 0.5 in Zarr v3) as one pyramidal
OME-TIFF in its group, read through a real mount by tifffile (every level equal to zarr-python's)
and by Bio-Formats (one image, one resolution per level; the lowest level's pixels)."""

import gc
import io
import json
import logging
import os
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from core import core_of
from helpers import CountingStore
from mounting import mounted
from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.fs.filesystem import FileSystem, NoKernel, Options
from zarrfs.views import ome_pyramid
from zarrfs.views.hdf5 import Extent, Layout
from zarrfs.views.ome_pyramid import Level

CHECKOUT = Path(__file__).resolve().parents[2]
JAR = CHECKOUT / ".test-servers" / "bioformats_package.jar"
HELPER = Path(__file__).with_name("BioFormatsInfo.java")
# BioFormatsInfo run on a JVM without its perf data: else each JVM leaves /tmp/hsperfdata_root behind
BIOFORMATS_INFO = ["java", "-XX:-UsePerfData", "-cp", str(JAR), str(HELPER)]

AXES = [{"name": "c", "type": "channel"}, {"name": "z", "type": "space", "unit": "micrometer"},
        {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}]
SHAPE = (2, 5, 256, 300)
LEVELS = 3
SCALE = (1.0, 2.5, 0.5, 0.25)  # level 0's physical sizes: z, y, x in micrometres
CHUNKS = (1, 1, 64, 128)


def image(parent, name: str, version: str, zarr_format: int, rng, nest: str = "") -> dict[str, np.ndarray]:
    """An image of LEVELS levels, each half the last in y and x, with channel labels; its levels'
    values by path. nest: a subgroup of the image's group holding the levels (datasets NEST/k)."""
    datasets, levels = [], {}
    for k in range(LEVELS):
        scale = [SCALE[0], SCALE[1], SCALE[2] * 2 ** k, SCALE[3] * 2 ** k]
        datasets.append({"path": f"{nest}/{k}" if nest else str(k),
                         "coordinateTransformations": [{"type": "scale", "scale": scale}]})
    multiscale = {"name": name, "axes": AXES, "datasets": datasets}
    omero = {"channels": [{"label": "DAPI"}, {"label": "GFP"}]}
    if version == "0.5":
        attributes = {"ome": {"version": version, "multiscales": [multiscale], "omero": omero}}
    else:
        attributes = {"multiscales": [{**multiscale, "version": version}], "omero": omero}
    group = parent.create_group(name, attributes=attributes)
    holder = group.create_group(nest) if nest else group
    shape = SHAPE
    for k in range(LEVELS):
        values = rng.integers(0, 65535, shape, dtype="uint16")
        kwargs = {"dimension_names": [a["name"] for a in AXES]} if zarr_format == 3 else {}
        level = holder.create_array(str(k), shape=shape, dtype="uint16", chunks=CHUNKS, **kwargs)
        level[...] = values
        levels[f"{name}/{nest}/{k}" if nest else f"{name}/{k}"] = values
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
def test_each_tile_is_one_chunk_and_starts_a_page(mounts, zarr_format):
    """Tiles follow the chunks (64 x 128: one chunk each; no wider than a level narrower than a
    chunk, rounded up to 16), so a region's tiles meet only the chunks under it; each starts a
    page, so the kernel's page of one holds no other's bytes."""
    with tifffile.TiffFile(mounts[zarr_format] / "cells" / "cells.ome.tif") as tif:
        for page in [tif.pages[0], *tif.pages[0].pages]:
            tile = tuple(min(c, -(-n // 16) * 16) for c, n in zip(CHUNKS[2:], page.shape, strict=True))
            assert page.is_tiled and (page.tilelength, page.tilewidth) == tile
            assert len(page.dataoffsets) == -(-page.shape[0] // tile[0]) * -(-page.shape[1] // tile[1])
            assert all(offset % 4096 == 0 for offset in page.dataoffsets)


def test_reading_a_tile_reads_only_the_chunks_under_it(stores, tmp_path, caplog):
    """Through the core (no kernel reading ahead): a tile of level 0's plane (c=1, z=3) reads its
    one chunk and no other; the last tile of a row, past the plane's right edge, is padded with
    zeros; and a read from one tile's last bytes into the next reads only the chunks of those rows."""
    root, values = stores[3]
    fs = FileSystem(str(root), Options(read_only=True, recovery_dir=str(tmp_path / "recovery")), HierarchyEdits)
    try:
        fh, size = fs.open("/cells/cells.ome.tif", os.O_RDONLY), fs.getattr("/cells/cells.ome.tif")["st_size"]
        header = fs.read(fh, 0, 1 << 16)  # the IFDs, and no pixel: tifffile reads no data to list tiles
        with tifffile.TiffFile(io.BytesIO(header + bytes(size - len(header)))) as tif:
            page = tif.pages[1 * SHAPE[1] + 3]
        offsets, counts = page.dataoffsets, page.databytecounts
        assert min(offsets) >= len(header)
        plane, (rows, columns) = values["cells/0"][1, 3], CHUNKS[2:]
        across = -(-SHAPE[3] // columns)

        def read(offset, n):
            caplog.clear()
            with caplog.at_level(logging.DEBUG, logger="zarrfs.engine.chunk_sources"):
                data = fs.read(fh, offset, n)
            return data, {m.group(1) for m in re.finditer(r"store read (\S+)", caplog.text)}

        data, read_keys = read(offsets[across + 1], counts[across + 1])  # tile row 1, column 1
        assert read_keys == {"cells/0/c/1/3/1/1"}
        tile = np.frombuffer(data, "<u2").reshape(rows, columns)
        assert np.array_equal(tile, plane[rows:2 * rows, columns:2 * columns])
        data, read_keys = read(offsets[across - 1], counts[across - 1])  # the last of tile row 0
        assert read_keys == {f"cells/0/c/1/3/0/{across - 1}"}
        tile, inside = np.frombuffer(data, "<u2").reshape(rows, columns), SHAPE[3] - (across - 1) * columns
        assert np.array_equal(tile[:, :inside], plane[:rows, (across - 1) * columns:]) and not tile[:, inside:].any()
        last_row, start = columns * 2, offsets[0] + counts[0] - columns * 2  # the tile's last row
        data, read_keys = read(start, offsets[1] + last_row - start)
        assert read_keys == {"cells/0/c/1/3/0/0", "cells/0/c/1/3/0/1"}
        assert data[:last_row] == plane[rows - 1, :columns].astype("<u2").tobytes()
        assert data[-last_row:] == plane[0, columns:2 * columns].astype("<u2").tobytes()
        assert not any(data[last_row:offsets[1] - start])  # between the tiles, if apart: zeros
    finally:
        fs.stop()


@pytest.mark.bioformats
def test_bioformats_sees_one_image_of_every_resolution(mounts, stores, tmp_path):
    """Bio-Formats, as QuPath opens it: one series whose resolutions are the levels, each of its
    level's size, and the lowest resolution's planes are that level's values."""
    if not JAR.exists():
        pytest.fail(f"{JAR} is missing: scripts/setup --test puts Bio-Formats' jar there")
    files = [mounts[f] / "cells" / "cells.ome.tif" for f in (2, 3)]
    args = [*BIOFORMATS_INFO, "--pixels", str(tmp_path), "--resolutions", *map(str, files)]
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


@pytest.mark.bioformats
@pytest.mark.parametrize("resolution, region", [(0, (100, 50, 150, 100)), (LEVELS - 1, (0, 0, 75, 64))])
def test_bioformats_reads_a_region_of_a_resolution(mounts, stores, tmp_path, resolution, region):
    """A region across tiles (x, y, width, height), read as QuPath reads one: the plane (c=0,
    z=0) of that level's values."""
    if not JAR.exists():
        pytest.fail(f"{JAR} is missing: scripts/setup --test puts Bio-Formats' jar there")
    files = [mounts[f] / "cells" / "cells.ome.tif" for f in (2, 3)]
    crop = ",".join(map(str, (resolution, *region)))
    args = [*BIOFORMATS_INFO, "--pixels", str(tmp_path), "--resolutions", "--crop", crop,
            *map(str, files)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count('"ms"') == 2 and '"error"' not in result.stdout, result.stdout + result.stderr
    x, y, width, height = region
    for k, zarr_format in enumerate((2, 3)):
        plane = stores[zarr_format][1][f"cells/{resolution}"][0, 0]
        found = np.fromfile(tmp_path / f"{k}.raw", "<u2").reshape(height, width)
        assert np.array_equal(found, plane[y:y + height, x:x + width]), zarr_format


@pytest.mark.bioformats
def test_a_bioformats_region_read_decodes_only_the_chunks_under_it(stores, tmp_path):
    """Through a mount, as QuPath reads a region: the level-0 chunks the daemon decodes are the
    six under the region (y 50-149 in chunk rows 0-2, x 100-249 in chunk columns 0-1 of plane
    (0, 0)), each once, and none the kernel would read ahead in the tiles that follow."""
    if not JAR.exists():
        pytest.fail(f"{JAR} is missing: scripts/setup --test puts Bio-Formats' jar there")
    with mounted(stores[3][0], tmp_path, "ro", "debug") as m:
        args = [*BIOFORMATS_INFO, "--pixels", str(tmp_path), "--resolutions", "--crop",
                "0,100,50,150,100", str(m / "cells" / "cells.ome.tif")]
        result = subprocess.run(args, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0 and '"ms"' in result.stdout, result.stdout + result.stderr
        decoded = re.findall(r"decoded cells/0 chunk (\S+)", m.settled_log())
    # each once: Bio-Formats reads a tile's first 16 bytes, then the tile, which finds its chunk decoded
    assert sorted(decoded) == [f"cells/0/c/0/0/{row}/{column}" for row in range(3) for column in range(2)]


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


@pytest.mark.parametrize("zarr_format, version", [(2, "0.4"), (3, "0.5")])
def test_nested_dataset_paths_make_a_pyramid_that_a_write_shows_in(tmp_path, zarr_format, version):
    """Datasets s/0, s/1, s/2 (levels in a subgroup of the image's group): the image's group
    shows the pyramid, each level as zarr-python reads it, with the image's OME-XML; a write to a
    level in the subgroup drops the kernel's pages of the pyramid held open."""
    root = tmp_path / "nested.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
    values = image(group, "cells", version, zarr_format, np.random.default_rng(9), nest="s")
    with mounted(root, tmp_path) as m, open(m / "cells" / "cells.ome.tif", "rb") as held:
        with tifffile.TiffFile(held) as tif:
            assert tif.is_ome and tif.series[0].axes == "CZYX" and 'PhysicalSizeZ="2.5"' in tif.ome_metadata
            levels = [level.asarray() for level in tif.series[0].levels]
        assert len(levels) == LEVELS
        for k, level in enumerate(levels):
            assert np.array_equal(level, values[f"cells/s/{k}"]), k
        with open(m / "cells" / "s" / "1.bin", "r+b") as out:
            out.write(np.full(SHAPE[3] // 2, 7, "<u2").tobytes())  # the first row of plane (0, 0)
        held.seek(0)
        with tifffile.TiffFile(held) as tif:
            after = tif.series[0].levels[1].asarray()
        assert (after[0, 0, 0] == 7).all() and np.array_equal(after[0, 0, 1:], levels[1][0, 0, 1:])


def test_a_pyramid_of_nested_levels_is_described_by_its_own_group(tmp_path):
    """cells lists s/0, s/1, s/2; its subgroup s is an image of its own too (another name, other
    sizes) listing 0: cells.ome.tif is cells' image, described by cells' multiscales, not by the
    group nearest its first level."""
    root = tmp_path / "both.zarr"
    image(zarr.open_group(str(root), mode="w", zarr_format=3), "cells", "0.5", 3, np.random.default_rng(6), nest="s")
    other = {"name": "other", "axes": AXES, "datasets": [{"path": "0", "coordinateTransformations": [
        {"type": "scale", "scale": [1.0, 9.0, 9.0, 9.0]}]}]}
    zarr.open_group(str(root / "cells" / "s"), mode="r+").attrs.update({"ome": {"version": "0.5", "multiscales": [other]}})
    fs = FileSystem(str(root), Options(read_only=True, recovery_dir=str(tmp_path / "recovery")), HierarchyEdits)
    try:
        fh, size = fs.open("/cells/cells.ome.tif", os.O_RDONLY), fs.getattr("/cells/cells.ome.tif")["st_size"]
        header = fs.read(fh, 0, 1 << 16)
    finally:
        fs.stop()
    with tifffile.TiffFile(io.BytesIO(header + bytes(size - len(header)))) as tif:
        described = tif.ome_metadata
    assert 'Name="cells"' in described and 'PhysicalSizeX="0.25"' in described and 'PhysicalSizeZ="2.5"' in described


def test_opening_a_nested_level_reads_no_group_above_it_again(tmp_path):
    """Opening a level's file finds the pyramids it is a level of (whose pages a write drops)
    in the groups above it as the lookup of its directory read them: a second open of a level
    two groups down (Zarr v2: four stats a group) reads none of them again."""
    root = tmp_path / "deep.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("plate", "A", "1"):
        group = group.create_group(name)
    image(group, "cells", "0.4", 2, np.random.default_rng(4), nest="s")
    fs = FileSystem(str(root), Options(read_only=True, recovery_dir=str(tmp_path / "recovery")), HierarchyEdits)
    try:
        path = "/plate/A/1/cells/s/1.bin"
        fs.release(fs.open(path, os.O_RDONLY))
        stats, stat = [], fs.store.stat
        fs.store.stat = lambda key: stats.append(key) or stat(key)
        fs.release(fs.open(path, os.O_RDONLY))
        above = [key for key in stats if not key.startswith("plate/A/1/cells/s")]
        assert above == []
        assert "/plate/A/1/cells/cells.ome.tif" in fs.group_files.above(path, fs.hierarchy.node("plate/A/1/cells/s/1"))
    finally:
        fs.stop()


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
    levels = [Level(f"l{k}", shape, "uint16", 2, (1024, 1024)) for k, shape in enumerate(shapes)]
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
    with open(path, "rb") as f:
        assert f.read(4) == b"II+\0"  # the magic alone: read_bytes() read 4.8 GB of holes


def test_the_pyramid_ends_at_a_level_unlike_the_first():
    """A level that also halves z, or has another type, cannot pair its planes with level 0's."""
    first, second = Level("0", (5, 256, 300), "uint16", 2, (64, 64)), Level("1", (5, 128, 150), "uint16", 2, (64, 64))
    assert ome_pyramid.pyramid([first, second, Level("2", (2, 64, 75), "uint16", 2, (64, 64)), second]) == [first, second]
    assert ome_pyramid.pyramid([first, Level("1", (5, 128, 150), "int16", 2, (64, 64))]) == [first]
    assert ome_pyramid.pyramid([Level("0", (5, 0, 300), "uint16", 2, (64, 64)), second]) == []


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


def test_a_layout_holds_one_entry_a_level_however_many_tiles():
    """Tiles lie at a fixed stride, so the layout (which the header cache counts) holds one Tiles
    per level, not an extent per tile: 100 planes of 64 x 64 tiles of a 4096 x 4096 level."""
    levels = [Level("0", (100, 4096, 4096), "uint8", 1, (16, 16)), Level("1", (100, 2048, 2048), "uint8", 1, (16, 16))]
    held, layout = traced(lambda: ome_pyramid.build(levels, b"<OME/>", 1 << 30))
    assert [tiles.path for tiles in layout.data] == ["0", "1"]
    assert [tiles.tile for tiles in layout.data] == [(64, 64), (64, 64)]
    assert held < len(layout.metadata[0][1]) + 2000  # the header's bytes, and little else
    assert held <= sys.getsizeof(layout)  # what the header cache counts
    assert layout.data[1].offsets(99)[-1] + 64 * 64 == layout.size


def test_the_header_cache_counts_at_least_what_a_layout_of_many_pieces_holds():
    """zarr.h5's layout holds many metadata pieces and an Extent per dataset, each path its own."""
    held, layout = traced(lambda: Layout(1 << 30, [(4096 * i, bytes(100)) for i in range(2000)],
                                         [Extent((1 << 20) + 4096 * i, 4096 + i, f"group/array_{i:06d}") for i in range(2000)]))
    assert held <= sys.getsizeof(layout) < 2 * held


def traced(make):
    """(bytes still allocated after make() returned, what it made), measured with tracemalloc;
    made once before, so that what a first call leaves (struct's formats) is not counted."""
    make()
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        made = make()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, made
    finally:
        tracemalloc.stop()


def test_a_warm_stat_of_a_pyramid_reads_none_of_its_levels_again(stores, tmp_path):
    """A stat of IMAGE.ome.tif after the first asks the store only whether its directory's
    listing holds: its size and mtime come from the levels its layout was made of (each level
    looked up again, three times over, cost 37 stats a stat)."""
    store = CountingStore(str(stores[3][0]), read_only=True)
    with core_of(stores[3][0], tmp_path, "ro", store=store) as c:
        first = c.stat("/cells/cells.ome.tif")
        store.reset()
        assert c.fs.getattr("/cells/cells.ome.tif") == first  # as the kernel asks it: the walk to it is cached
        assert store.stats == ["cells"] and store.gets == [] and store.listed == []


class Dropped(NoKernel):
    """The kernel's caches, as a mount's core drops them: the paths dropped, in turn."""

    def __init__(self):
        self.paths: list[str] = []

    def drop(self, paths):
        self.paths += paths


@pytest.mark.parametrize("nest", ["", "s"])
def test_a_level_moved_drops_the_kernels_copy_of_its_pyramid(tmp_path, nest):
    """A level renamed ends the pyramid there, so IMAGE.ome.tif's size changes: the kernel's
    size of it is dropped with those of zarr.h5 above (it kept the size of three levels)."""
    root = tmp_path / "s.zarr"
    image(zarr.open_group(str(root), mode="w", zarr_format=3), "cells", "0.5", 3, np.random.default_rng(2), nest)
    kernel = Dropped()
    fs = FileSystem(str(root), Options(recovery_dir=str(tmp_path / "recovery")), HierarchyEdits, kernel)
    try:
        directory = f"/cells/{nest}" if nest else "/cells"
        before = fs.getattr("/cells/cells.ome.tif")["st_size"]
        fs.edits.rename(f"{directory}/1.bin", f"{directory}/moved.bin", 0)
        assert "/cells/cells.ome.tif" in kernel.paths and "/zarr.h5" in kernel.paths
        assert fs.getattr("/cells/cells.ome.tif")["st_size"] < before
    finally:
        fs.stop()
