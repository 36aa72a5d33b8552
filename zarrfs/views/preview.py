"""Previews (`-o previews`): NAME.png, a small image of an array's first 2-D plane, so that a
file manager shows thumbnails of the images and fields themselves.

- The plane is the last two axes at index 0 of every other axis. It is sampled with one stride
  on both axes, so that the image is at most MAX_SIDE pixels on a side, and drawn in gray over
  the plane's robust range (the 1st to 99th percentile of its finite values). NaN is magenta,
  +inf orange and -inf blue: colours no value gets, so missing data (a land mask) is never
  taken for the lowest values.
- North is up: where the georeference (the VRT's geotransform) says the rows go north (latitude
  or northing ascending, as many xarray datasets are stored), the image is flipped.
- The sample is read chunk by chunk, each touched chunk once, and decodes at most BUDGET
  bytes: decided from the metadata alone. A plane whose sample would decode more is sampled
  from evenly spaced chunks (as many as the budget allows), each shown whole in the image:
  a mosaic that spans the whole plane at the cost of the chunks between.
- An array of an OME-Zarr multiscale image is previewed from the coarsest level that still has
  at least the preview's size (itself when none is coarser): the same picture, decoded cheaply.
- The PNG (RGB) is written without compression (Pillow, an optional extra), so its size follows
  from its width and height alone and a listing can show it without decoding anything; it is
  made when opened, and kept per array version.
"""

import io
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from zarrfs.geometry import largest_chunk

MAX_SIDE = 512
BUDGET = 8 << 20  # decoded bytes one preview may cost
KINDS = "biuf"  # numeric data types; complex, raw, datetimes and text get no preview
SUFFIX = ".png"
NAN, POS_INF, NEG_INF = (255, 0, 255), (255, 140, 0), (0, 90, 255)  # not gray: no value is drawn so


def available() -> bool:
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Plan:
    """Which elements a preview samples: rows `ys` and columns `xs` of the first plane."""

    shape: tuple[int, ...]  # of the array sampled
    chunk_shape: tuple[int, ...]  # the chunks (inner chunks, if sharded) decoded to read it
    ys: tuple[int, ...]
    xs: tuple[int, ...]
    flip: bool = False  # the rows go north: drawn bottom up

    @property
    def size(self) -> tuple[int, int]:
        """(height, width) of the image."""
        return len(self.ys), len(self.xs)


def plan(meta, flip: bool = False) -> Plan | None:
    """The preview of an array with this metadata, None if it gets none."""
    if len(meta.shape) < 2 or meta.data_type.numpy.kind not in KINDS or 0 in meta.shape:
        return None
    chunk_shape = decoded_chunk_shape(meta)
    chunk_nbytes = math.prod(chunk_shape) * meta.data_type.numpy.itemsize
    allowed = BUDGET // chunk_nbytes  # chunks the sample may decode
    if not allowed:
        return None
    (ny, nx), (cy, cx) = meta.shape[-2:], chunk_shape[-2:]
    grid = (-(-ny // cy), -(-nx // cx))
    for picked in _chunk_choices(grid, allowed):
        ys, xs = _axis(picked[0], cy, ny), _axis(picked[1], cx, nx)
        step = max(1, -(-max(len(ys), len(xs)) // MAX_SIDE))
        ys, xs = ys[::step], xs[::step]
        if len({y // cy for y in ys}) * len({x // cx for x in xs}) <= allowed:
            return Plan(tuple(meta.shape), chunk_shape, tuple(ys), tuple(xs), flip)
    return None


def _chunk_choices(grid: tuple[int, int], allowed: int):
    """The chunk rows and columns to sample: all of them, then evenly spaced fewer, keeping the
    grid's proportions, until the budget allows them."""
    gy, gx = grid
    yield range(gy), range(gx)
    scale = math.sqrt(allowed / (gy * gx))
    while True:
        ky, kx = max(1, min(gy, int(gy * scale))), max(1, min(gx, int(gx * scale)))
        yield _spread(gy, ky), _spread(gx, kx)
        if ky == kx == 1:
            return
        scale *= 0.8


def _spread(n: int, k: int) -> list[int]:
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0]


def _axis(chunks, c: int, n: int):
    """The element indices along one axis of the chosen chunks, in order (a range for all)."""
    if chunks == range(-(-n // c)):
        return range(n)
    return [i for chunk in chunks for i in range(chunk * c, min(chunk * c + c, n))]


def decoded_chunk_shape(meta) -> tuple[int, ...]:
    """The shape of the chunks a read decodes: the innermost chunks of a sharded array whose
    chain is sharding alone (the engine reads such shards in part: CodecChain.sharding), else
    the chunk (for the previews, and IMAGE.ome.tif's tiles)."""
    shape, codecs = largest_chunk(meta.chunk_shape), list(meta.codecs)  # a rectilinear grid's largest
    while len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed":
        configuration = codecs[0].get("configuration", {})
        shape, codecs = tuple(configuration.get("chunk_shape", shape)), list(configuration.get("codecs", []))
    return shape


def source_level(path: str, node_of, covers) -> str:
    """The store path to preview for the array at `path`: in an OME-Zarr multiscale image
    (`multiscales` in its group's attributes, v0.4 or under `ome` for v0.5), the coarsest of
    its own and the coarser levels for which covers(node) holds; else itself. node_of(path)
    gives a node or None."""
    parent, _, name = path.rpartition("/")
    group = node_of(parent)
    attributes = getattr(getattr(group, "meta", None), "attributes", None) or {}
    multiscales = attributes.get("multiscales") or (attributes.get("ome") or {}).get("multiscales")
    if not isinstance(multiscales, list):
        return path
    for image in multiscales:
        paths = [d.get("path") for d in (image.get("datasets") or []) if isinstance(d, dict)] \
            if isinstance(image, dict) else []
        if name not in paths:
            continue
        found = path
        for level in paths[paths.index(name) + 1:]:
            level_path = f"{parent}/{level}" if parent else str(level)
            node = node_of(level_path) if isinstance(level, str) else None
            if node is None or not covers(node):
                break
            found = level_path
        return found
    return path


def preview_side(meta) -> int:
    """The longer side of a preview of the whole plane."""
    return min(MAX_SIDE, max(meta.shape[-2:]))


def sample(array, the_plan: Plan) -> np.ndarray:
    """The plan's rows and columns of the first plane, read one chunk at a time (each touched once)."""
    lead = tuple(slice(0, 1) for _ in the_plan.shape[:-2])
    out = np.empty(the_plan.size, array.dtype)
    cy, cx = the_plan.chunk_shape[-2:]
    for (oy, ys), (ox, xs) in ((r, c) for r in _by_chunk(the_plan.ys, cy) for c in _by_chunk(the_plan.xs, cx)):
        box = (*lead, slice(ys[0], ys[-1] + 1), slice(xs[0], xs[-1] + 1))
        block = array.read(box).reshape(ys[-1] + 1 - ys[0], xs[-1] + 1 - xs[0])
        out[oy:oy + len(ys), ox:ox + len(xs)] = block[np.ix_(np.subtract(ys, ys[0]), np.subtract(xs, xs[0]))]
    return out


def _by_chunk(indices: tuple[int, ...], c: int):
    """(position in the image, the indices) of each chunk's run of `indices`."""
    start = 0
    for i in range(1, len(indices) + 1):
        if i == len(indices) or indices[i] // c != indices[start] // c:
            yield start, indices[start:i]
            start = i


def scale(values: np.ndarray) -> np.ndarray:
    """RGB: gray over the robust range of the finite values; NaN and infinities in colours of their own."""
    values = values.astype("f8")
    finite = np.isfinite(values)
    gray = np.zeros(values.shape, "u1")
    if finite.any():
        low, high = np.percentile(values[finite], [1, 99])
        if high <= low:
            high = low + 1
        levels = np.clip((np.where(finite, values, low) - low) / (high - low) * 255, 0, 255)
        gray = np.rint(levels).astype("u1")
    rgb = np.repeat(gray[..., None], 3, axis=-1)
    rgb[np.isnan(values)] = NAN
    rgb[values == np.inf] = POS_INF
    rgb[values == -np.inf] = NEG_INF
    return rgb


def image(values: np.ndarray, the_plan: Plan) -> bytes:
    """The PNG of a sample: scaled, north up."""
    rgb = scale(values)
    return encode(rgb[::-1] if the_plan.flip else rgb)


def encode(gray: np.ndarray) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(gray), mode=None).save(out, format="PNG", compress_level=0)
    return out.getvalue()


@lru_cache(maxsize=1024)
def png_size(height: int, width: int) -> int:
    """The size of any preview of this size: stored (level 0) deflate depends on the length only."""
    return len(encode(np.zeros((height, width, 3), "u1")))


class Previews:
    """Rendered previews of the arrays opened lately, bounded in bytes, each kept while its
    array's version (metadata, stored values, writes through the mount) is the same."""

    def __init__(self, limit: int = 32 << 20):
        self.limit = limit
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, version, make) -> bytes:
        with self._lock:
            item = self._items.get(key)
            if item is not None and item[0] == version:
                self._items.move_to_end(key)
                return item[1]
        png = make()
        with self._lock:
            self._items[key] = (version, png)
            self._items.move_to_end(key)
            while sum(len(p) for _, p in self._items.values()) > self.limit and len(self._items) > 1:
                self._items.popitem(last=False)
        return png


class Plans:
    """Which arrays have a preview, and what it samples: from metadata alone, once per node."""

    def __init__(self, node_of, north_up=None):
        self.node_of = node_of  # store path -> node or None
        self.north_up = north_up  # node -> True when its rows go north (from its georeference)
        self._plans: dict[str, tuple[object, tuple[str, Plan] | None]] = {}

    def of(self, node) -> tuple[str, Plan] | None:
        """(store path of the array sampled, plan), or None when the array gets no preview."""
        cached = self._plans.get(node.path)
        if cached is not None and cached[0] is node:
            return cached[1]
        found = None
        if node.meta is not None and hasattr(node.meta, "shape") and len(node.meta.shape) >= 2:
            side = preview_side(node.meta)
            source_path = source_level(node.path, self.node_of, lambda level: _covers(level, side))
            source = node if source_path == node.path else self.node_of(source_path)
            flip = bool(self.north_up and self.north_up(node))
            the_plan = plan(source.meta, flip) if source is not None and hasattr(source.meta, "shape") else None
            found = (source_path, the_plan) if the_plan is not None else None
        self._plans[node.path] = (node, found)
        return found


def _covers(node, side: int) -> bool:
    """A level that can stand for an array whose preview's longer side is `side`."""
    meta = node.meta
    return hasattr(meta, "shape") and len(meta.shape) >= 2 and max(meta.shape[-2:]) >= side \
        and plan(meta) is not None
