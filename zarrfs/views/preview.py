"""Previews (`-o previews`): NAME.png, a small grayscale image of an array's first 2-D plane,
so that a file manager shows thumbnails of the images and fields themselves.

- The plane is the last two axes at index 0 of every other axis. It is sampled with one stride
  on both axes, so that the image is at most MAX_SIDE pixels on a side, and scaled to the
  sample's robust range (the 1st to 99th percentile of its finite values); NaN and infinities
  are black.
- The sample is read chunk by chunk, each touched chunk once. Whether an array gets a preview
  is decided from its metadata alone: one whose sample would decode more than BUDGET bytes gets
  none. An array of an OME-Zarr multiscale image is previewed from the coarsest level.
- The PNG is written without compression (Pillow, an optional extra), so its size follows from
  its width and height alone and a listing can show it without decoding anything; it is made
  when opened, and kept per array version.
"""

import io
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MAX_SIDE = 512
BUDGET = 8 << 20  # decoded bytes one preview may cost
KINDS = "biuf"  # numeric data types; complex, raw, datetimes and text get no preview
SUFFIX = ".png"


def available() -> bool:
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Plan:
    """Which elements a preview samples: rows and columns range(0, n, step) of the first plane."""

    shape: tuple[int, ...]  # of the array sampled
    chunk_shape: tuple[int, ...]  # the chunks (inner chunks, if sharded) decoded to read it
    step: int

    @property
    def size(self) -> tuple[int, int]:
        """(height, width) of the image."""
        return -(-self.shape[-2] // self.step), -(-self.shape[-1] // self.step)


def plan(meta) -> Plan | None:
    """The preview of an array with this metadata, None if it gets none."""
    if len(meta.shape) < 2 or meta.data_type.numpy.kind not in KINDS or 0 in meta.shape:
        return None
    chunk_shape = _decoded_chunk_shape(meta)
    step = max(1, -(-max(meta.shape[-2:]) // MAX_SIDE))
    touched = 1
    for n, c in zip(meta.shape[-2:], chunk_shape[-2:], strict=False):
        touched *= len({i // c for i in range(0, n, step)})
    if touched * math.prod(chunk_shape) * meta.data_type.numpy.itemsize > BUDGET:
        return None
    return Plan(tuple(meta.shape), chunk_shape, step)


def _decoded_chunk_shape(meta) -> tuple[int, ...]:
    """The shape of the chunks a read decodes: the innermost chunks of a sharded array."""
    shape, codecs = tuple(meta.chunk_shape), list(meta.codecs)
    while len(codecs) == 1 and codecs[0].get("name") == "sharding_indexed":
        configuration = codecs[0].get("configuration", {})
        shape, codecs = tuple(configuration.get("chunk_shape", shape)), list(configuration.get("codecs", []))
    return shape


def coarsest_level(path: str, node_of) -> str:
    """The store path to preview for the array at `path`: the coarsest level of the OME-Zarr
    multiscale image it belongs to (`multiscales` in its group's attributes, v0.4 or under
    `ome` for v0.5), else itself. node_of(path) gives a node or None."""
    parent, _, name = path.rpartition("/")
    group = node_of(parent)
    attributes = getattr(getattr(group, "meta", None), "attributes", None) or {}
    multiscales = attributes.get("multiscales") or (attributes.get("ome") or {}).get("multiscales")
    if not isinstance(multiscales, list):
        return path
    for image in multiscales:
        paths = [d.get("path") for d in (image.get("datasets") or []) if isinstance(d, dict)] \
            if isinstance(image, dict) else []
        if name in paths and isinstance(paths[-1], str):
            return f"{parent}/{paths[-1]}" if parent else paths[-1]
    return path


def sample(array, the_plan: Plan) -> np.ndarray:
    """The strided sample of the first plane, read one chunk at a time (each touched once)."""
    step, lead = the_plan.step, tuple(slice(0, 1) for _ in the_plan.shape[:-2])
    out = np.empty(the_plan.size, array.dtype)
    cy, cx = the_plan.chunk_shape[-2:]
    ny, nx = the_plan.shape[-2:]
    for y0 in range(0, ny, cy):
        rows = range(-(-y0 // step) * step, min(y0 + cy, ny), step)
        if not rows:
            continue
        for x0 in range(0, nx, cx):
            cols = range(-(-x0 // step) * step, min(x0 + cx, nx), step)
            if not cols:
                continue
            box = (*lead, slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
            block = array.read(box).reshape(rows[-1] + 1 - rows[0], cols[-1] + 1 - cols[0])
            out[rows[0] // step:rows[-1] // step + 1, cols[0] // step:cols[-1] // step + 1] = block[::step, ::step]
    return out


def scale(values: np.ndarray) -> np.ndarray:
    """8-bit gray over the robust range of the finite values; NaN and infinities are black."""
    values = values.astype("f8")
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(values.shape, "u1")
    low, high = np.percentile(values[finite], [1, 99])
    if high <= low:
        high = low + 1
    gray = np.clip((values - low) / (high - low) * 255, 0, 255)
    return np.where(finite, np.rint(np.nan_to_num(gray)), 0).astype("u1")


def encode(gray: np.ndarray) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(gray), mode=None).save(out, format="PNG", compress_level=0)
    return out.getvalue()


@lru_cache(maxsize=1024)
def png_size(height: int, width: int) -> int:
    """The size of any preview of this size: stored (level 0) deflate depends on the length only."""
    return len(encode(np.zeros((height, width), "u1")))


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

    def __init__(self, node_of):
        self.node_of = node_of  # store path -> node or None
        self._plans: dict[str, tuple[object, tuple[str, Plan] | None]] = {}

    def of(self, node) -> tuple[str, Plan] | None:
        """(store path of the array sampled, plan), or None when the array gets no preview."""
        cached = self._plans.get(node.path)
        if cached is not None and cached[0] is node:
            return cached[1]
        found = None
        if node.meta is not None and hasattr(node.meta, "shape"):
            source_path = coarsest_level(node.path, self.node_of)
            source = node if source_path == node.path else self.node_of(source_path)
            the_plan = plan(source.meta) if source is not None and hasattr(source.meta, "shape") else None
            found = (source_path, the_plan) if the_plan is not None else None
        self._plans[node.path] = (node, found)
        return found
