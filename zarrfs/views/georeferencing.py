"""Finds what georeferences an array for its header views: the CF grid mapping it names and the
1-D coordinate arrays beside it (xarray's layout: a sibling array named like each dimension).
Coordinate values are read once per coordinate node version, only for small arrays, through a
small cache of their own; everything else comes from metadata."""

import logging

import numpy as np

from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.errors import ZarrfsError
from zarrfs.format.v3 import ArrayMetadata
from zarrfs.views.geotransform import Georef, crs_of, from_attributes, from_coordinates
from zarrfs.views.info import dimension_names

log = logging.getLogger(__name__)

MAX_COORDINATES = 1 << 20  # values of one coordinate array that may be read
CACHE_BYTES = 8 << 20
EXPLICIT = {"proj:transform", "spatial:transform", "GeoTransform"}


class Georeferencer:
    def __init__(self, store, node_of):
        self.store, self.node_of = store, node_of  # node_of: store path -> Node or None
        self._cache = ChunkCache(CACHE_BYTES)
        self._values: dict[str, tuple[object, np.ndarray | None]] = {}  # path -> (node, values)

    def of(self, node) -> Georef | None:
        meta = node.meta
        names = dimension_names(meta)
        parent = node.path.rpartition("/")[0]
        grid_mapping = self._sibling_attributes(parent, meta.attributes.get("grid_mapping"))
        found = from_attributes(meta.attributes, names, grid_mapping)
        explicit = EXPLICIT & set(meta.attributes)  # one that cannot be used makes coordinates ambiguous too
        if found is not None or explicit or names is None or len(meta.shape) < 2 or None in names[-2:]:
            return found
        (y_name, y), (x_name, x) = [(name, self._coordinates(parent, name, size))
                                    for name, size in zip(names[-2:], meta.shape[-2:], strict=False)]
        if x is None or y is None:
            return None
        crs = crs_of(meta.attributes) or (crs_of(grid_mapping) if grid_mapping else None)
        return from_coordinates(x[1], y[1], x[0], y[0], x_name, y_name, crs)

    def _sibling_attributes(self, parent: str, name) -> dict | None:
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            return None
        node = self.node_of(f"{parent}/{name}" if parent else name)
        return node.meta.attributes if node is not None and node.meta is not None else None

    def _coordinates(self, parent: str, name: str, size: int):
        """(attributes, values) of the 1-D array `name` beside the array, if it has `size` values."""
        if not name or "/" in name or name in (".", ".."):
            return None
        path = f"{parent}/{name}" if parent else name
        node = self.node_of(path)
        meta = node.meta if node is not None else None
        if not isinstance(meta, ArrayMetadata) or meta.shape != (size,) or size > MAX_COORDINATES:
            return None
        cached = self._values.get(path)
        if cached is None or cached[0] is not node:
            cached = self._values[path] = (node, self._read(path, meta))
        return None if cached[1] is None else (meta.attributes, cached[1])

    def _read(self, path: str, meta: ArrayMetadata) -> np.ndarray | None:
        try:
            return open_array(self.store, path, meta, self._cache).read((slice(0, meta.shape[0]),))
        except ZarrfsError as e:  # the array itself still gets its views, without georeferencing
            log.warning("%s: coordinates not read for georeferencing: %s", path, e)
            return None
