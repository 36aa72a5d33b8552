"""Georeferencing for the VRT and ENVI views, only where the metadata says it unambiguously.

Sources, in order: an affine transform in the array's attributes (`proj:transform` or
`spatial:transform`, GeoZarr/STAC order a, b, c, d, e, f; or a GDAL `GeoTransform`), the
`GeoTransform` of the CF grid mapping the array names (as rioxarray writes it), or regularly
spaced 1-D coordinate arrays of the last two dimensions that CF marks as spatial (read by
zarrfs.georeference). The CRS: `proj:wkt2`, `crs_wkt` or `spatial_ref` (WKT), or `proj:code` /
`proj:epsg`, on the array or its grid mapping. Anything else: no georeferencing.
"""

import math
import re
from dataclasses import dataclass

import numpy as np

X_NAMES, Y_NAMES = {"x", "lon", "longitude"}, {"y", "lat", "latitude"}
X_STANDARD = {"projection_x_coordinate", "longitude", "grid_longitude"}
Y_STANDARD = {"projection_y_coordinate", "latitude", "grid_latitude"}
REGULAR = 1e-6  # relative tolerance on the spacing of coordinate values


@dataclass(frozen=True)
class Georef:
    transform: tuple[float, float, float, float, float, float]  # GDAL order: x0, dx, rx, y0, ry, dy
    crs: str | None = None  # WKT, or "EPSG:n"


def geotransform(info) -> tuple[float, ...] | None:
    return info.georef.transform if info.georef else None


def srs(info) -> str | None:
    return info.georef.crs if info.georef else None


def map_info(info) -> str | None:
    """ENVI `map info` (and the WKT as `coordinate system string`) for a north-up grid without
    rotation, the only kind ENVI's map info holds without a rotation key GDAL would ignore."""
    if not info.georef:
        return None
    x0, dx, rx, y0, ry, dy = info.georef.transform
    if rx or ry or dx <= 0 or dy >= 0:
        return None
    text = f"map info = {{Arbitrary, 1, 1, {x0!r}, {y0!r}, {dx!r}, {-dy!r}}}"
    crs = info.georef.crs
    if crs and not crs.startswith("EPSG:"):
        text += f"\ncoordinate system string = {{{crs.replace('{', '[').replace('}', ']')}}}"
    return text


def from_attributes(attributes: dict, dimension_names, grid_mapping: dict | None) -> Georef | None:
    """From an explicit transform in the array's attributes or its grid mapping's."""
    spatial = attributes.get("spatial:dimensions")
    if spatial is not None and (not dimension_names or list(spatial) != list(dimension_names[-2:])):
        return None  # the transform is about other axes than the raster's
    transform = _affine(attributes) or _gdal(attributes.get("GeoTransform"))
    if transform is None and grid_mapping is not None:
        transform = _gdal(grid_mapping.get("GeoTransform"))
    if transform is None:
        return None
    return Georef(transform, crs_of(attributes) or (crs_of(grid_mapping) if grid_mapping else None))


def from_coordinates(x: np.ndarray, y: np.ndarray, x_attrs: dict, y_attrs: dict, x_name: str, y_name: str,
                     crs: str | None) -> Georef | None:
    """From cell-centre coordinates of the last two axes, when both are evenly spaced and marked
    as X and Y (CF `axis`, `standard_name`, degree units, or the usual names)."""
    if not (_is_axis(x_attrs, x_name, "X", X_NAMES, X_STANDARD, "degrees_east")
            and _is_axis(y_attrs, y_name, "Y", Y_NAMES, Y_STANDARD, "degrees_north")):
        return None
    dx, dy = _spacing(x), _spacing(y)
    if dx is None or dy is None:
        return None
    return Georef((float(x[0]) - dx / 2, dx, 0.0, float(y[0]) - dy / 2, 0.0, dy), crs)


def crs_of(attributes: dict) -> str | None:
    for key in ("proj:wkt2", "crs_wkt", "spatial_ref"):
        value = attributes.get(key)
        if isinstance(value, str) and re.match(r"\s*[A-Z]+CRS\[|\s*(GEOG|PROJ|GEOC)CS\[", value):
            return value
    code = attributes.get("proj:code")
    if isinstance(code, str) and re.fullmatch(r"EPSG:\d+", code):
        return code
    epsg = attributes.get("proj:epsg")
    if isinstance(epsg, int) and not isinstance(epsg, bool) and epsg > 0:
        return f"EPSG:{epsg}"
    return None


def _affine(attributes: dict):
    for key in ("proj:transform", "spatial:transform"):
        values = _numbers(attributes.get(key))
        if values is None or len(values) not in (6, 9) or (len(values) == 9 and values[6:] != [0, 0, 1]):
            continue
        a, b, c, d, e, f = values[:6]
        return _valid((c, a, b, f, d, e))
    return None


def _gdal(value):
    if isinstance(value, str):
        value = [v for v in re.split(r"[\s,]+", value.strip()) if v]
        try:
            value = [float(v) for v in value]
        except ValueError:
            return None
    values = _numbers(value)
    return _valid(tuple(values)) if values is not None and len(values) == 6 else None


def _numbers(value) -> list[float] | None:
    if not isinstance(value, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    return [float(v) for v in value]


def _valid(transform):
    """Finite, and invertible: a transform that maps the grid onto a line or a point says nothing."""
    x0, dx, rx, y0, ry, dy = transform
    if not all(math.isfinite(v) for v in transform) or dx * dy - rx * ry == 0:
        return None
    return tuple(float(v) for v in transform)


def _is_axis(attrs: dict, name: str, axis: str, names: set, standard: set, units: str) -> bool:
    return (attrs.get("axis") == axis or attrs.get("standard_name") in standard or attrs.get("units") == units
            or name.lower() in names)


def _spacing(values: np.ndarray) -> float | None:
    if values.ndim != 1 or len(values) < 2 or values.dtype.kind not in "iuf":
        return None
    values = values.astype("f8")
    steps = np.diff(values)
    step = float(steps[0])
    if not np.all(np.isfinite(values)) or step == 0 or not np.allclose(steps, step, rtol=REGULAR, atol=0):
        return None
    return step
