"""-o previews: NAME.png of the first plane, at most 512 px, scaled to the robust range, NaN and
infinities in colours of their own, north up, read chunk by chunk within a decode budget (from
evenly spaced chunks when the plane is larger), from the coarsest OME-Zarr level that still has
the preview's size, kept per version.

Asked of the core without a mount (core.py), but for a write through a mount, whose new
preview the kernel must see."""

import io
import os
import re

import numpy as np
import pytest
import zarr
from PIL import Image

from core import core_of
from mounting import mounted

NAN = (255, 0, 255)


def expected_gray(values: np.ndarray) -> np.ndarray:
    """The oracle: percentiles 1..99 of the finite values to gray 0..255, NaN magenta."""
    finite = np.isfinite(values)
    low, high = np.percentile(values[finite], [1, 99])
    gray = np.clip((values.astype("f8") - low) / (high - low) * 255, 0, 255)
    gray = np.where(finite, np.rint(np.nan_to_num(gray)), 0).astype("u1")
    rgb = np.repeat(gray[..., None], 3, axis=-1)
    rgb[np.isnan(values)] = NAN
    return rgb


def png(path, core=None) -> np.ndarray:
    """The image of NAME.png at `path`: a path in a mount, or one of `core`."""
    data, size = (path.read_bytes(), os.stat(path).st_size) if core is None else \
        (core.read_bytes(path), core.stat(path)["st_size"])
    assert len(data) == size
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and image.mode == "RGB"
    return np.asarray(image)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("previews") / "store"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    y, x = np.mgrid[:1000, :700]
    field = (np.sin(x / 50.0) * np.cos(y / 80.0) * 100 + x / 7.0).astype("float32")
    field[10:20, 10:20] = np.nan
    group.create_array("field", shape=field.shape, chunks=(128, 128), dtype="float32")[...] = field
    stack = group.create_array("stack", shape=(100, 2048, 2048), chunks=(1, 512, 512), dtype="uint8")
    stack[0] = (np.arange(2048 * 2048) % 251).reshape(2048, 2048).astype("uint8")
    stack[1] = 7
    group.create_array("huge", shape=(4096, 4096), chunks=(256, 256), dtype="float32", fill_value=1.0)
    group.create_array("line", shape=(1000,), chunks=(100,), dtype="float32")
    image = group.create_group("image", attributes={"multiscales": [{"version": "0.4", "datasets": [
        {"path": str(k)} for k in range(5)]}]})
    levels = [(np.add.outer(np.arange(4096 // 2 ** k), np.arange(4096 // 2 ** k)) % 256).astype("uint8")
              for k in range(5)]
    for k, level in enumerate(levels):
        image.create_array(str(k), shape=level.shape, chunks=(256, 256), dtype="uint8")[...] = level
    return root, field, levels


def test_a_preview_is_the_first_plane_strided_and_scaled(store, tmp_path):
    root, field, _ = store
    with core_of(root, tmp_path, "ro,previews") as c:
        gray = png("/field.png", c)
        assert gray.shape == (500, 350, 3)  # stride 2: at most 512 px
        assert np.array_equal(gray, expected_gray(field[::2, ::2]))
        missing = np.isnan(field[::2, ::2])
        assert (gray[missing] == NAN).all() and not (gray[~missing] == NAN).all(axis=-1).any()
        assert c.getxattr("/field.png", "user.mime_type") == b"image/png"
        assert not c.exists("/line.png")  # one dimension: nothing to show
        assert oct(c.stat("/field.png")["st_mode"] & 0o777) == "0o444"


def test_a_preview_decodes_only_the_chunks_of_its_sample(store, tmp_path):
    root, _, _ = store
    with core_of(root, tmp_path, "ro,previews,debug") as c:
        gray = png("/stack.png", c)
        assert gray.shape == (512, 512, 3)
        sample = (np.arange(2048 * 2048) % 251).reshape(2048, 2048)[::4, ::4]
        assert np.array_equal(gray, expected_gray(sample))
    decoded = re.findall(r"decoded stack chunk (\S+)", c.log())
    assert sorted(decoded) == sorted(f"stack/c/0/{i}/{j}" for i in range(4) for j in range(4))


def test_each_multiscale_level_is_previewed_at_its_own_size(store, tmp_path):
    """From the coarsest level that still has the preview's 512 px (levels 4096 to 256 px): the
    full levels from level 3, the 256 px level from itself. Every level was drawn from the
    coarsest, a speck, before."""
    root, _, levels = store
    with core_of(root, tmp_path, "ro,previews,debug") as c:
        full = png("/image/0.png", c)
        assert np.array_equal(full, expected_gray(levels[3]))
        assert c.read_bytes("/image/0.png") == c.read_bytes("/image/1.png")
        assert np.array_equal(png("/image/4.png", c), expected_gray(levels[4]))
    assert not re.search(r"decoded image/[012] ", c.log())


def test_no_previews_unless_asked(store, tmp_path):
    root, _, _ = store
    with core_of(root, tmp_path, "ro") as c:
        assert not c.exists("/field.png")


def test_a_write_through_the_mount_makes_a_new_preview(tmp_path):
    root = tmp_path / "store"
    zarr.create_array(str(root), shape=(64, 64), chunks=(32, 32), dtype="uint8")[...] = \
        np.arange(4096).reshape(64, 64) % 200
    with mounted(root, tmp_path, "previews") as m:
        before = png(m / "store.png")
        with open(m / "store.bin", "r+b") as f:
            f.write(bytes(range(200, 0, -1)) * 20)
        after = png(m / "store.png")
        values = np.fromfile(m / "store.bin", "u1").reshape(64, 64)
        assert not np.array_equal(before, after)
        assert np.array_equal(after, expected_gray(values))


def test_what_the_readme_says_of_previews():
    """Real numeric arrays only (bool, integers, floats; not complex)."""
    from zarrfs.format.data_types import parse_data_type
    from zarrfs.format.v3 import ArrayMetadata, ChunkKeyEncoding
    from zarrfs.views.preview import plan

    def meta(data_type):
        dt = parse_data_type(data_type)
        return ArrayMetadata((8, 8), dt, (8, 8), ChunkKeyEncoding("default", "/"), np.zeros((), dt.numpy),
                             ({"name": "bytes", "configuration": {}},), {}, None, {})

    assert [plan(meta(t)) is not None for t in ("bool", "int8", "uint64", "float16", "complex64")] == [
        True, True, True, True, False]


def test_an_array_over_the_budget_is_previewed_from_evenly_spaced_chunks(tmp_path):
    """16 MiB of float32 in 64 chunks of 256 KiB, twice the budget: a preview from at most 32
    chunks spread over the plane, each drawn from its own values."""
    from zarrfs.fs.hierarchy import Hierarchy
    from zarrfs.stores.local import LocalStore
    from zarrfs.views import preview
    values = np.random.default_rng(1).normal(0, 1, (2048, 2048)).astype("float32")
    root = tmp_path / "store"
    zarr.create_array(str(root), shape=values.shape, chunks=(256, 256), dtype="float32")[...] = values
    with core_of(root, tmp_path, "ro,previews,debug") as c:
        gray = png("/store.png", c)
    the_plan = preview.plan(Hierarchy(LocalStore(str(root)), ()).node("").meta)
    decoded = set(re.findall(r"decoded / chunk (\S+)", c.log()))  # a root array
    assert 0 < len(decoded) <= preview.BUDGET // (256 * 256 * 4)
    rows = {int(k.split("/")[-2]) for k in decoded}
    assert min(rows) == 0 and max(rows) == 7  # the whole plane is spanned
    assert gray.shape[:2] == the_plan.size
    assert np.array_equal(gray, expected_gray(values[np.ix_(the_plan.ys, the_plan.xs)]))


def test_north_is_up_where_the_georeference_says_latitude_ascends(tmp_path):
    """A grid stored south first (latitude ascending, as many xarray datasets are) is drawn
    upside down unless flipped; one stored north first is drawn as stored."""
    field = np.add.outer(np.arange(90.0), np.zeros(180)).astype("float32")  # grows with the row
    for order, lat in (("ascending", np.arange(-89.0, 90.0, 2.0)), ("descending", np.arange(89.0, -90.0, -2.0))):
        root = tmp_path / order
        group = zarr.open_group(str(root), mode="w", zarr_format=3)
        group.create_array("sst", shape=field.shape, chunks=field.shape, dtype="float32",
                           dimension_names=["lat", "lon"])[...] = field
        group.create_array("lat", shape=lat.shape, chunks=lat.shape, dtype="float64", dimension_names=["lat"],
                           attributes={"units": "degrees_north"})[...] = lat
        group.create_array("lon", shape=(180,), chunks=(180,), dtype="float64", dimension_names=["lon"],
                           attributes={"units": "degrees_east"})[...] = np.arange(-179.0, 180.0, 2.0)
        with core_of(root, tmp_path, "ro,previews", name=f"core-{order}") as c:
            gray = png("/sst.png", c)[..., 0].astype(int)
            assert "<GeoTransform>" in c.read_text("/sst.vrt")
        first_row_is_north = gray[0].mean() > gray[-1].mean() if order == "ascending" else \
            gray[0].mean() < gray[-1].mean()
        assert first_row_is_north, order
