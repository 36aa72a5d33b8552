"""Georeferencing in the VRT and ENVI views, read back by GDAL (rasterio's wheel): from an explicit
affine attribute, from a CF grid mapping's GeoTransform (rioxarray's layout), and from evenly
spaced coordinate arrays; and left out wherever the metadata is ambiguous."""

import numpy as np
import pytest
import rasterio
import zarr

from mounting import mounted
from zarrfs.views.geotransform import from_attributes, from_coordinates

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

UTM33 = ('PROJCS["WGS 84 / UTM zone 33N",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],'
         'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],'
         'PARAMETER["latitude_of_origin",0],PARAMETER["central_meridian",15],PARAMETER["scale_factor",0.9996],'
         'PARAMETER["false_easting",500000],PARAMETER["false_northing",0],UNIT["metre",1],'
         'AUTHORITY["EPSG","32633"]]')
CENTRES_X = 500000 + 30 * np.arange(7) + 15
CENTRES_Y = 4000000 - 30 * np.arange(5) - 15


@pytest.fixture(scope="module")
def mnt(tmp_path_factory):
    root = tmp_path_factory.mktemp("geo") / "data.zarr"
    g = zarr.open_group(str(root), mode="w")
    g.create_array("x", shape=(7,), chunks=(4,), dtype="f8", dimension_names=["x"],
                   attributes={"standard_name": "projection_x_coordinate"})[...] = CENTRES_X
    g.create_array("y", shape=(5,), chunks=(5,), dtype="f8", dimension_names=["y"])[...] = CENTRES_Y
    g.create_array("spatial_ref", shape=(), dtype="i4",
                   attributes={"crs_wkt": UTM33, "GeoTransform": "500000.0 30.0 0.0 4000000.0 0.0 -30.0"})
    g.create_array("time", shape=(2,), chunks=(2,), dtype="f8", dimension_names=["time"])[...] = [0, 1]
    g.create_array("depth", shape=(5,), chunks=(5,), dtype="f8", dimension_names=["depth"])[...] = np.arange(5)
    g.create_array("ragged", shape=(7,), chunks=(7,), dtype="f8", dimension_names=["ragged"])[...] = np.arange(7) ** 2
    arrays = {
        "mapped": ((2, 5, 7), ["time", "y", "x"], {"grid_mapping": "spatial_ref"}),
        "coords": ((5, 7), ["y", "x"], {}),
        "affine": ((5, 7), None, {"proj:transform": [10, 0, 100, 0, -10, 200], "proj:code": "EPSG:4326"}),
        "rotated": ((5, 7), None, {"proj:transform": [10, 2, 100, 1, -10, 200]}),
        "not_space": ((2, 5), ["time", "depth"], {}),
        "irregular": ((5, 7), ["y", "ragged"], {}),
        "other_axes": ((5, 7), ["y", "x"], {"spatial:transform": [1, 0, 0, 0, -1, 0], "spatial:dimensions": ["a", "b"]}),
    }
    for name, (shape, names, attributes) in arrays.items():
        g.create_array(name, shape=shape, chunks=shape, dtype="f4", dimension_names=names,
                       attributes=attributes)[...] = 1
    with mounted(root, tmp_path_factory.mktemp("m"), "ro") as m:
        yield m


def gdal(path):
    with rasterio.open(path) as r:
        return tuple(r.transform)[:6], (r.crs.to_epsg() if r.crs else None)


@pytest.mark.parametrize("suffix", [".vrt", ".bin"])  # GDAL opens NAME.bin through NAME.bin.hdr (ENVI)
def test_georeferenced_views(mnt, suffix):
    utm = (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0)
    assert gdal(mnt / f"mapped{suffix}") == (utm, 32633)  # the grid mapping's GeoTransform and WKT
    assert gdal(mnt / f"coords{suffix}") == (utm, None)  # cell centres 15 m in from the corners
    assert gdal(mnt / f"affine{suffix}") == ((10.0, 0.0, 100.0, 0.0, -10.0, 200.0), 4326 if suffix == ".vrt" else None)


@pytest.mark.parametrize("name", ["not_space", "irregular", "other_axes"])
def test_ambiguous_metadata_gives_no_georeferencing(mnt, name):
    for suffix in (".vrt", ".bin"):
        assert gdal(mnt / f"{name}{suffix}")[0] == (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    assert "GeoTransform" not in (mnt / f"{name}.vrt").read_text()
    assert "map info" not in (mnt / f"{name}.bin.hdr").read_text()


def test_a_rotated_transform_is_in_the_vrt_only(mnt):
    """ENVI's map info holds no rotation that GDAL reads back: the ENVI header leaves it out."""
    assert gdal(mnt / "rotated.vrt")[0] == (10.0, 2.0, 100.0, 1.0, -10.0, 200.0)
    assert "map info" not in (mnt / "rotated.bin.hdr").read_text()


def test_explicit_transforms_parse_strictly():
    assert from_attributes({"GeoTransform": [0, 1, 0, 0, 0, -1]}, None, None).transform == (0, 1, 0, 0, 0, -1)
    assert from_attributes({"GeoTransform": "0 1 0 0 0"}, None, None) is None  # five numbers
    assert from_attributes({"GeoTransform": [0, 0, 0, 0, 0, 0]}, None, None) is None  # maps the grid to a point
    assert from_attributes({"proj:transform": [1, 0, 0, 0, -1, 0, 0, 0, 2]}, None, None) is None  # not affine
    assert from_attributes({"proj:transform": [1, 0, 0, 0, -1, 0], "proj:epsg": True}, None, None).crs is None
    assert from_attributes({"proj:transform": [1, 0, 0, 0, -1, 0], "crs_wkt": "WGS 84"}, None, None).crs is None
    assert from_coordinates(np.array([0.0, 1.0, 2.0]), np.array([5.0]), {}, {}, "x", "y", None) is None  # 1 value
    assert from_coordinates(np.array([0.0, 1.0, np.nan]), np.array([1.0, 0.0]), {}, {}, "x", "y", None) is None
    assert from_coordinates(np.array([0, 2, 4]), np.array([1.0, 0.0]), {"axis": "X"}, {"axis": "Y"}, "i", "j",
                            "EPSG:3857").transform == (-1.0, 2.0, 0.0, 1.5, 0.0, -1.0)


def test_coordinates_are_read_once_for_a_whole_group(tmp_path):
    """A listing of many arrays on the same grid reads each coordinate array's chunks once, and no
    chunk of the arrays themselves."""
    from helpers import CountingStore
    from zarrfs.fs.hierarchy import HEADER, Hierarchy
    root = tmp_path / "data.zarr"
    g = zarr.open_group(str(root), mode="w")
    g.create_array("x", shape=(7,), chunks=(4,), dtype="f8", dimension_names=["x"])[...] = CENTRES_X
    g.create_array("y", shape=(5,), chunks=(5,), dtype="f8", dimension_names=["y"])[...] = CENTRES_Y
    for i in range(20):
        g.create_array(f"a{i}", shape=(5, 7), chunks=(5, 7), dtype="f4", dimension_names=["y", "x"])[...] = i
    store = CountingStore(root)
    hierarchy = Hierarchy(store)
    vrts = {name: hierarchy.content(e) for name, e in hierarchy.listing("").items()
            if e.kind == HEADER and e.view == "vrt"}
    assert len(vrts) == 22 and all(b"<GeoTransform>500000.0, 30.0" in vrts[f"a{i}.vrt"] for i in range(20))
    assert b"GeoTransform" not in vrts["x.vrt"]
    chunks = sorted(key for key, _, _ in store.gets if not key.endswith("zarr.json"))
    assert chunks == ["x/c/0", "x/c/1", "y/c/0"]
