"""IMAGE.ome.tif: an OME-Zarr multiscale image as one pyramidal OME-TIFF in its group.

The layout Bio-Formats (Fiji, QuPath, OMERO) and tifffile read as one image with several
resolutions: the main IFD chain holds the full-resolution planes (the leading indexes of level 0
in C order, as NAME.tif has them), and each of those IFDs lists in SubIFDs (tag 330) the same
plane of every lower level, marked NewSubfileType 1 (reduced resolution). The first IFD's
ImageDescription is level 0's OME-XML (ome.py: sizes, physical sizes from the scale, channel
names from omero). The file is a header holding every IFD, then each level's tiles in turn,
served as a group file (views/hdf5.py's Layout: header bytes, and each level's Tiles).

Tiles, not strips: a region reader (QuPath, Bio-Formats' openBytes of a box) reads the tiles
under the region, and each tile's bytes are made from its box of the level (views/tiles.py), so
only the chunks under the region are decoded. A strip is whole rows of the plane: a 512 x 512
region of a 16k-wide level decoded every chunk across the width. A tile follows the level's
chunks (tiles.edge), so a tile meets one chunk, or the few chunks that make it. Tiles cost a copy
(a tile is not a byte range of NAME.bin) and nothing stored: each is read when asked for.

Levels: level 0 must be an array NAME.tif can show with a type OME-XML has; a lower level is kept
when it has level 0's data type and leading shape (a level that also halves Z has other planes,
which OME-TIFF's SubIFDs cannot pair); the first that does not fit ends the pyramid.
"""

import math
import struct
from dataclasses import dataclass

from zarrfs.errors import ViewTooLargeError
from zarrfs.views import tiff, tiles
from zarrfs.views.hdf5 import Layout
from zarrfs.views.tiles import Tiles

SUFFIX = ".ome.tif"
SUBIFDS, NEW_SUBFILE_TYPE = 330, 254
TILE_WIDTH, TILE_LENGTH, TILE_OFFSETS, TILE_COUNTS = 322, 323, 324, 325
REDUCED = 1  # NewSubfileType: a reduced-resolution version of another image


@dataclass(frozen=True)
class Level:
    path: str  # the array's store path
    shape: tuple[int, ...]
    data_type: str  # ArrayInfo.data_type
    itemsize: int
    chunk: tuple[int, int]  # a chunk's edges along Y and X

    @property
    def tile(self) -> tuple[int, int]:
        """(TileLength, TileWidth): following the chunks (tiles.edge)."""
        return tiles.edge(self.chunk[0], self.shape[-2]), tiles.edge(self.chunk[1], self.shape[-1])

    def tiles(self, offset: int = 0) -> Tiles:
        """The level's tiles, placed from `offset` of the file on."""
        return Tiles(offset, self.path, self.shape, self.tile, self.itemsize)


MAX_IMAGES = 64  # images one group's multiscales may list: a document is untrusted, and each costs a header


def multiscales(attributes: dict) -> list:
    """The `multiscales` of a group's attributes (v0.4 at the top, v0.5 under `ome`), [] if none."""
    ome = attributes.get("ome") if isinstance(attributes.get("ome"), dict) else {}
    found = attributes.get("multiscales") or ome.get("multiscales")
    return found if isinstance(found, list) else []


def images(attributes: dict, group_name: str) -> dict[str, list[str]]:
    """File name -> the dataset paths (levels, finest first) of each multiscale image: named after
    the image's `name`, else the group's; a second image of the same name gets _2, _3, ..."""
    out: dict[str, list[str]] = {}
    seen: dict[str, int] = {}  # images named after each stem so far: the next one's suffix
    for image in multiscales(attributes)[:MAX_IMAGES]:
        datasets = image.get("datasets") if isinstance(image, dict) else None
        paths = [d.get("path") for d in datasets if isinstance(d, dict)] if isinstance(datasets, list) else []
        if not paths or not all(_relative(p) for p in paths):
            continue
        stem = _stem(image.get("name")) or _stem(group_name) or "image"
        k = seen[stem] = seen.get(stem, 0) + 1
        name = stem + SUFFIX if k == 1 else f"{stem}_{k}{SUFFIX}"
        while name in out:  # a stem that itself ends in _k: rare, and bounded by MAX_IMAGES
            k = seen[stem] = k + 1
            name = f"{stem}_{k}{SUFFIX}"
        out[name] = paths
    return out


def _relative(path) -> bool:
    """Whether a dataset's path names a node below the group (never the group, nor above it)."""
    return isinstance(path, str) and all(part not in ("", ".", "..") for part in path.split("/"))


def _stem(name) -> str | None:
    """A name usable as a file name's stem: one path component of printable text."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or not name.isprintable():
        return None
    return name


def pyramid(levels: list[Level]) -> list[Level]:
    """The levels one OME-TIFF pyramid can hold: level 0, then those like it (see the module)."""
    if not levels or tiff.TYPES.get(levels[0].data_type) is None or not _raster(levels[0]):
        return []
    first, kept = levels[0], [levels[0]]
    for level in levels[1:]:
        if level.data_type != first.data_type or level.shape[:-2] != first.shape[:-2] or not _raster(level):
            break
        kept.append(level)
    return kept


def _raster(level: Level) -> bool:
    """Whether TIFF can hold the level's planes: two axes or more, none empty, 32-bit sizes."""
    return len(level.shape) >= 2 and 0 not in level.shape and max(level.shape[-2:]) <= tiff.CLASSIC_MAX


def build(levels: list[Level], description: bytes, max_bytes: int) -> Layout:
    """The file's layout: classic TIFF while it fits in 4 GiB, else BigTIFF. Placing is
    arithmetic (tiles lie at a fixed stride), so trying classic first costs nothing per tile."""
    classic = _Writer(levels, description, big=False)
    placed = classic.place(max_bytes)
    last = placed[-1][-1]
    if last.offset + last.nbytes - 1 <= tiff.CLASSIC_MAX:
        return classic.layout(placed)
    big = _Writer(levels, description, big=True)
    return big.layout(big.place(max_bytes))


class _Writer:
    """Two passes over the IFDs: their sizes (so every offset is known), then their bytes. Each
    plane's IFDs lie together: level 0's (its SubIFDs point to the next ones), then the lower
    levels'; each IFD is followed by its values that do not fit in their entries."""

    def __init__(self, levels: list[Level], description: bytes, big: bool):
        self.levels, self.big = levels, big
        self.description = description + b"\0"
        self.word, self.pointer = (8, "<Q") if big else (4, "<I")
        self.offset_type = tiff.LONG8 if big else tiff.LONG
        self.planes = math.prod(levels[0].shape[:-2])

    def place(self, max_bytes: int) -> tuple:
        """Where everything goes: (the first IFD's offset, each level's IFD size, the first IFD's
        extra size, each level's Tiles). Raises ViewTooLargeError past max_bytes of header."""
        # bound the header before making any of it: the shapes come from metadata a server sent
        estimate = self.planes * sum(2 * self.word * level.tiles().per_plane + 400 for level in self.levels)
        if estimate > max_bytes:
            raise ViewTooLargeError(f"{self.planes} planes of {len(self.levels)} levels: a TIFF header of about "
                                    f"{estimate} bytes, more than header_cache_size ({max_bytes} bytes)")
        head = 16 if self.big else 8
        ifds_at = tiff._rounded(head + len(self.description), 8)
        sizes = [len(self._ifd(i, 0, None, False, 0)) for i in range(len(self.levels))]
        first = len(self._ifd(0, 0, None, True, 0)) - sizes[0]  # the first IFD has the description's entry too
        header_end = ifds_at + first + self.planes * sum(sizes)
        if header_end > max_bytes:
            raise ViewTooLargeError(f"{self.planes} planes of {len(self.levels)} levels: a TIFF header of "
                                    f"{header_end} bytes, more than header_cache_size ({max_bytes} bytes)")
        data_bytes = sum(grid.count * grid.tile_bytes for grid in (level.tiles() for level in self.levels))
        placed, at = [], tiff._data_start(header_end, data_bytes)
        for level in self.levels:
            placed.append(level.tiles(at))
            at = tiff._rounded(at + placed[-1].nbytes, tiles.PAGE)
        return ifds_at, sizes, first, placed

    def layout(self, placed: tuple) -> Layout:
        """The header's bytes, with every offset `place` gave."""
        ifds_at, sizes, first, levels = placed
        header = bytearray(self._file_header(ifds_at) + self.description)
        header += bytes(ifds_at - len(header))
        for plane in range(self.planes):
            described, base = plane == 0, len(header)
            lower = base + sizes[0] + (first if described else 0)  # where level 1's IFD begins
            starts = [base] + [lower + sum(sizes[1:i]) for i in range(1, len(sizes))]
            following = lower + sum(sizes[1:]) if plane + 1 < self.planes else 0
            for i in range(len(self.levels)):
                header += self._ifd(i, starts[i], levels[i].offsets(plane), described and i == 0,
                                    following if i == 0 else 0, starts[1:] if i == 0 else [])
        return Layout(levels[-1].offset + levels[-1].nbytes, [(0, bytes(header))], list(levels))

    def _file_header(self, first_ifd: int) -> bytes:
        if self.big:
            return b"II" + struct.pack("<HHHQ", 43, 8, 0, first_ifd)
        return b"II" + struct.pack("<HI", 42, first_ifd)

    def _entries(self, i: int, offsets: list[int], described: bool, subifds: list[int]) -> list:
        """(tag, type, values) in tag order; the description's values are its offset."""
        level = self.levels[i]
        sample_format, bits = tiff.TYPES[level.data_type]
        length, width = level.tile
        entries = [(NEW_SUBFILE_TYPE, tiff.LONG, [REDUCED if i else 0]),
                   (tiff.WIDTH, tiff.LONG, [level.shape[-1]]), (tiff.LENGTH, tiff.LONG, [level.shape[-2]]),
                   (tiff.BITS, tiff.SHORT, [bits]), (tiff.COMPRESSION, tiff.SHORT, [1]),
                   (tiff.PHOTOMETRIC, tiff.SHORT, [1])]
        if described:
            entries.append((tiff.DESCRIPTION, tiff.ASCII, None))
        entries += [(tiff.SAMPLES, tiff.SHORT, [1]), (tiff.PLANAR, tiff.SHORT, [1]),
                    (TILE_WIDTH, tiff.LONG, [width]), (TILE_LENGTH, tiff.LONG, [length]),
                    (TILE_OFFSETS, self.offset_type, offsets),
                    (TILE_COUNTS, self.offset_type, [length * width * level.itemsize] * len(offsets))]
        if i == 0 and len(self.levels) > 1:
            entries.append((SUBIFDS, self.offset_type, subifds or [0] * (len(self.levels) - 1)))
        entries.append((tiff.SAMPLE_FORMAT, tiff.SHORT, [sample_format]))
        return entries

    def _ifd(self, i: int, at: int, offsets: list[int] | None, described: bool, following: int,
             subifds=()) -> bytes:
        """The IFD of level i's plane whose tiles are at `offsets` (None: any, for its size), itself at `at`."""
        if offsets is None:
            offsets = [0] * self.levels[i].tiles().per_plane
        entries = self._entries(i, offsets, described, list(subifds))
        count_format, entry_size = ("<Q", 20) if self.big else ("<H", 12)
        fixed = struct.calcsize(count_format) + entry_size * len(entries) + self.word
        body, extra = bytearray(struct.pack(count_format, len(entries))), bytearray()
        for tag, kind, values in entries:
            if values is None:  # the description, written once at the file's start
                body += self._entry(tag, kind, len(self.description), struct.pack(self.pointer, 16 if self.big else 8))
                continue
            packed = b"".join(struct.pack(_FORMATS[kind], v) for v in values)
            if len(packed) <= self.word:
                body += self._entry(tag, kind, len(values), packed.ljust(self.word, b"\0"))
            else:
                body += self._entry(tag, kind, len(values), struct.pack(self.pointer, at + fixed + len(extra)))
                extra += packed + bytes(-len(packed) % 8)
        body += struct.pack(self.pointer, following)
        return bytes(body + extra)

    def _entry(self, tag: int, kind: int, count: int, value: bytes) -> bytes:
        return struct.pack("<HHQ" if self.big else "<HHI", tag, kind, count) + value


_FORMATS = {tiff.SHORT: "<H", tiff.LONG: "<I", tiff.LONG8: "<Q"}
