"""Pure box arithmetic: boxes are tuples of unit-step slices with explicit bounds."""

import bisect
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, Self

Box = tuple[slice, ...]


class Edges(tuple[int, ...]):
    """The chunk edge lengths along one dimension of a rectilinear chunk grid. A chunk shape
    (a grid) is a tuple whose entries are an int (regular along that dimension) or Edges; the
    functions below take either. A chunk past the array's end keeps its declared length."""

    starts: tuple[int, ...]  # starts[g]: the first element of chunk g; starts[-1]: their sum

    def __new__(cls, lengths: Iterable[int]) -> Self:
        edges = super().__new__(cls, lengths)
        edges.starts = tuple(itertools.accumulate(edges, initial=0))
        return edges


ChunkEdge = int | Edges  # one dimension of a chunk grid: a regular chunk length, or the edges
ChunkShape = Sequence[ChunkEdge]  # a chunk grid, one entry per dimension


def index_of(c: ChunkEdge, i: int) -> int:
    """The chunk along a dimension of chunk size (or Edges) `c` that holds element `i`."""
    return i // c if isinstance(c, int) else bisect.bisect_right(c.starts, i) - 1


def start_of(c: ChunkEdge, g: int) -> int:
    return g * c if isinstance(c, int) else c.starts[g]


def size_of(c: ChunkEdge, g: int) -> int:
    """Chunk g's declared length along the dimension (whatever part overhangs the array)."""
    return c if isinstance(c, int) else c[g]


def chunk_extent(chunk_shape: ChunkShape, coords: Sequence[int]) -> tuple[int, ...]:
    """The declared shape of chunk `coords`: what it decodes to."""
    return tuple(size_of(c, g) for c, g in zip(chunk_shape, coords, strict=False))


def chunk_origin(chunk_shape: ChunkShape, coords: Sequence[int]) -> tuple[int, ...]:
    return tuple(start_of(c, g) for c, g in zip(chunk_shape, coords, strict=False))


def regular(chunk_shape: ChunkShape) -> bool:
    return all(isinstance(c, int) for c in chunk_shape)


def largest_chunk(chunk_shape: ChunkShape) -> tuple[int, ...]:
    """The largest chunk's shape (a bound for budgets and limits)."""
    return tuple(c if isinstance(c, int) else max(c, default=1) for c in chunk_shape)


class ChunkPart(NamedTuple):
    """The part of one chunk that a box touches.

    coords: the chunk's grid coordinates; chunk_box: the part in chunk-local coordinates;
    out_box: the same part in the box's local coordinates; complete: the part is the whole chunk.
    """

    coords: tuple[int, ...]
    chunk_box: Box
    out_box: Box
    complete: bool


def chunks_spanned(boxes: list[Box], chunk_shape: ChunkShape) -> int:
    """How many chunks the bounding box of `boxes` (non-empty) meets."""
    count = 1
    for d, c in enumerate(chunk_shape):
        low, high = min(b[d].start for b in boxes), max(b[d].stop for b in boxes)
        count *= (index_of(c, high - 1) - index_of(c, low) + 1) if high > low else 0
    return count


def box_shape(box: Box) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in box)


def full_box(shape: tuple[int, ...]) -> Box:
    return tuple(slice(0, n) for n in shape)


def whole_chunks(shape: tuple[int, ...], chunk_shape: tuple[int, ...]) -> tuple[Box, list[Box]]:
    """An array of `shape` in a regular grid of `chunk_shape` as the box of its whole chunks (from
    the origin to the last chunk boundary inside it along each dimension) and the boxes, apart,
    that cover the rest: the edge chunks' parts inside the array. Empty boxes are left out."""
    ends = tuple(n // c * c for n, c in zip(shape, chunk_shape, strict=True))
    inside = tuple(slice(0, e) for e in ends)
    edges = [(*inside[:k], slice(ends[k], shape[k]), *full_box(shape[k + 1:])) for k in range(len(shape))]
    return inside, [box for box in edges if all(s.start < s.stop for s in box)]


def grid_shape(shape: tuple[int, ...], chunk_shape: ChunkShape) -> tuple[int, ...]:
    """Chunks per dimension: those that hold any element (a rectilinear grid may declare more)."""
    return tuple(-(-n // c) if isinstance(c, int) else min(len(c), bisect.bisect_left(c.starts, n))
                 for n, c in zip(shape, chunk_shape, strict=False))


def chunk_parts(box: Box, chunk_shape: ChunkShape, shape: tuple[int, ...]) -> Iterator[ChunkPart]:
    """Split a box of an array of `shape` into the parts each chunk holds, in C order.

    A chunk counts as complete when the box covers all of it that lies inside the array,
    so an overhanging edge chunk can be overwritten without reading it first.
    """
    if any(s.start >= s.stop for s in box):
        return
    per_dim = []
    for s, c, n in zip(box, chunk_shape, shape, strict=False):
        dim = []
        for index in range(index_of(c, s.start), index_of(c, s.stop - 1) + 1):
            lo = start_of(c, index)
            hi = min(lo + size_of(c, index), n)
            start, stop = max(s.start, lo), min(s.stop, hi)
            dim.append((index, slice(start - lo, stop - lo), slice(start - s.start, stop - s.start),
                        start == lo and stop == hi))
        per_dim.append(dim)
    for combo in itertools.product(*per_dim):
        yield ChunkPart(tuple(d[0] for d in combo), tuple(d[1] for d in combo),
                        tuple(d[2] for d in combo), all(d[3] for d in combo))


def flat_index(index: Sequence[int], shape: Sequence[int]) -> int:
    """The C-order position of `index` in an array of `shape` (np.ravel_multi_index without
    its microseconds: small reads and shard lookups ask on every request)."""
    flat = 0
    for i, n in zip(index, shape, strict=False):
        flat = flat * n + i
    return flat


def c_order_boxes(shape: tuple[int, ...], start: int, stop: int) -> list[Box]:
    """The flat C-order element span [start, stop) of an array as at most 2*ndim-1 boxes."""
    if start >= stop:
        return []
    if not shape:
        return [()]
    size = math.prod(shape)
    if start == 0 and stop == size:
        return [full_box(shape)]
    rest = shape[1:]
    row = math.prod(rest)
    if row == 0:
        return []
    first, last = start // row, (stop - 1) // row
    if first == last:
        return [(slice(first, first + 1), *b) for b in c_order_boxes(rest, start - first * row, stop - first * row)]
    boxes = []
    if start % row:
        boxes += [(slice(first, first + 1), *b) for b in c_order_boxes(rest, start % row, row)]
        first += 1
    whole_end = last if stop % row else last + 1
    if whole_end > first:
        boxes.append((slice(first, whole_end), *full_box(rest)))
    if stop % row:
        boxes += [(slice(last, last + 1), *b) for b in c_order_boxes(rest, 0, stop % row)]
    return boxes
