"""A level of IMAGE.ome.tif stored as TIFF tiles: where each tile lies in the file, and its bytes.

A tile is a box of one plane of an array (TileLength rows by TileWidth columns, padded with zeros
past the plane's edges), in C order and little-endian. Its bytes are no byte range of NAME.bin,
so they are made when read: the box is read from the array (Array.read of the box, decoding only
the chunks under it), nothing is stored. The tiles of a level lie one after another at a fixed
stride (a tile's bytes rounded up to whole pages), every plane's in turn, rows of tiles top to
bottom, tiles left to right: where tile i lies is arithmetic, and the layout holds one Tiles per
level, whatever the number of tiles.
"""

import math
from dataclasses import dataclass

import numpy as np

PAGE = 4096  # each tile starts a page: the kernel's page holding a tile's first bytes holds no other tile's
SMALLEST, LARGEST = 64, 1024  # a tile's edge: 64 x 64 bytes fill a page; a reader reads a tile whole
MULTIPLE = 16  # TIFF: TileWidth and TileLength are multiples of 16


def edge(chunk: int, size: int) -> int:
    """A tile's edge along an axis of `size` elements in chunks of `chunk`: the chunk's, so a tile
    meets as few chunks as it can; chunks under SMALLEST make a tile of several; never past
    LARGEST nor past the axis itself (rounded up); a multiple of 16 (rounded down: a tile then
    meets at most two chunks where the chunk's edge is not one)."""
    chosen = chunk * -(-SMALLEST // chunk) if 0 < chunk < SMALLEST else chunk
    chosen = min(chosen, LARGEST, _rounded(size, MULTIPLE))
    return max(MULTIPLE, chosen - chosen % MULTIPLE)


@dataclass(frozen=True, slots=True)
class Tiles:
    """The tiles of the array at store path `path`, from `offset` of the file on: the tile grid
    is worked out here alone (ome_pyramid.Level makes a level's Tiles; the header asks them)."""

    offset: int
    path: str
    shape: tuple[int, ...]  # the array's
    tile: tuple[int, int]  # (TileLength, TileWidth)
    itemsize: int

    @property
    def tile_bytes(self) -> int:
        return self.tile[0] * self.tile[1] * self.itemsize

    @property
    def stride(self) -> int:
        return _rounded(self.tile_bytes, PAGE)

    @property
    def across(self) -> int:
        return -(-self.shape[-1] // self.tile[1])

    @property
    def per_plane(self) -> int:
        return -(-self.shape[-2] // self.tile[0]) * self.across

    @property
    def count(self) -> int:
        """Tiles of every plane."""
        return math.prod(self.shape[:-2]) * self.per_plane

    @property
    def nbytes(self) -> int:
        """From the first tile's start to the last one's end."""
        return (self.count - 1) * self.stride + self.tile_bytes

    def offsets(self, plane: int) -> list[int]:
        """Where each tile of the plane lies in the file, in TIFF's order."""
        first = self.offset + plane * self.per_plane * self.stride
        return [first + k * self.stride for k in range(self.per_plane)]

    def read_into(self, raw, at: int, out: np.ndarray) -> None:
        """Fill the uint8 array `out` with the bytes from `at` (within these tiles) from `raw`, the
        array's RawFile: each tile met is read as its box, the gaps between tiles are zeros. The
        boxes are read together, as one read of the array (RawFile.read_boxes_into): the read
        budget's chunk count and deadline bound the whole read, not each tile of it."""
        end, position = at + len(out), at
        pieces, copies = [], []  # (box, where its elements go); (rows read, skip, bytes wanted of them)
        while position < end:
            k, within = divmod(position, self.stride)
            stop = min(end, (k + 1) * self.stride)
            target = out[position - at:stop - at]
            if within >= self.tile_bytes:
                target[:] = 0
            else:
                used = min(stop - k * self.stride, self.tile_bytes) - within
                self._plan_tile(raw.array.dtype, k, within, target[:used], pieces, copies)
                target[used:] = 0
            position = stop
        raw.read_boxes_into(pieces)
        for rows, skip, wanted in copies:
            wanted[:] = rows.view(np.uint8).reshape(-1)[skip:skip + len(wanted)]

    def _plan_tile(self, dtype: np.dtype, k: int, start: int, out: np.ndarray, pieces: list, copies: list) -> None:
        """Plan bytes [start, start + len(out)) of tile k: only the tile's rows they lie in are
        read (a box appended to `pieces`); rows of our own, copied after, where `out` does not
        hold whole rows (a copy appended to `copies`)."""
        plane, index = divmod(k, self.per_plane)
        row, column = divmod(index, self.across)
        row_bytes = self.tile[1] * self.itemsize
        first, last = start // row_bytes, -(-(start + len(out)) // row_bytes)  # the tile's rows wanted
        whole_rows = start % row_bytes == 0 and len(out) % row_bytes == 0
        # whole rows are decoded straight into `out`; else into rows of our own, then copied
        rows = out.view(dtype).reshape(last - first, self.tile[1]) if whole_rows else \
            np.empty((last - first, self.tile[1]), dtype)
        y, x = row * self.tile[0] + first, column * self.tile[1]
        height, width = max(0, min(last - first, self.shape[-2] - y)), min(self.tile[1], self.shape[-1] - x)
        rows[height:] = 0  # past the plane's bottom edge
        rows[:height, width:] = 0  # past its right edge
        if height:
            leading = np.unravel_index(plane, self.shape[:-2]) if len(self.shape) > 2 else ()
            box = (*(slice(int(i), int(i) + 1) for i in leading), slice(y, y + height), slice(x, x + width))
            pieces.append((box, rows[(None,) * len(leading) + (slice(0, height), slice(0, width))]))
        if not whole_rows:
            copies.append((rows, start - first * row_bytes, out))


def _rounded(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
