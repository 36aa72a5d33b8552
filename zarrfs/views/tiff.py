"""NAME.tif: an uncompressed, little-endian TIFF whose pixels are NAME.bin's bytes, for imaging
tools (Fiji/ImageJ, napari, QuPath, GDAL, image viewers).

The file is a header, then NAME.bin's bytes, like NAME.npy. The header holds every IFD: the last
two axes are Y and X, each leading index in C order is one page (a grayscale image of one strip,
or of strips under 2 GiB where a page is larger), and the strips point into the data that
follows. Classic TIFF while the whole file stays under 4 GiB, BigTIFF past that. Types: bool (as
uint8, 0 or 1), int8..int64, uint8..uint64, float16..float64, complex64/128; arrays of fewer than
two dimensions or of other types get no TIFF. The first page's ImageDescription says how the
pages make the array:

- an OME-Zarr image (a level of a `multiscales` image in its group): OME-XML (ome.py);
- else, for the types ImageJ reads (uint8, uint16, float32, bool), leading axes named as time,
  z and channel (`t`, `z`, `c`; also `time`, `channel`, ...) in ImageJ's order (time slowest,
  channel fastest, each at most once): an ImageJ hyperstack description;
- else, dimension names that say time, z and channel (in any order, each at most once) then y
  and x, for the types OME-XML has (all but int64, uint64 and float16): OME-XML, so that
  Bio-Formats (Fiji, QuPath, OMERO) sees the axes, not a stack of planes;
- else tifffile's shaped description, `{"shape": [...]}`.

An IFD is ~130 bytes (~240 in BigTIFF), so a stack of a million pages has a header of over
100 MB: the header is a TiffHeader, whose bytes are made on demand from a few numbers (every
page's IFD differs from the next only in its offsets), not held in memory.
"""

import functools
import json
import math
from dataclasses import dataclass

import numpy as np

from zarrfs.views import ome
from zarrfs.views.info import ArrayInfo

# data type -> (SampleFormat, BitsPerSample): 1 unsigned, 2 signed, 3 float, 6 complex float
TYPES = {"bool": (1, 8), "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
         "int8": (2, 8), "int16": (2, 16), "int32": (2, 32), "int64": (2, 64), "float16": (3, 16),
         "float32": (3, 32), "float64": (3, 64), "complex64": (6, 64), "complex128": (6, 128)}
IMAGEJ_TYPES = {"bool", "uint8", "uint16", "float32"}
IMAGEJ_AXES = {name: letter.lower() for name, letter in ome.NAMED.items()}
STRIP_MAX = (1 << 31) - 1  # readers keep strip sizes in signed 32-bit integers
CLASSIC_MAX = (1 << 32) - 1  # classic TIFF's offsets are 32-bit
PAGE = 4096
BLOCK = 1 << 20  # data of BLOCK bytes or more starts at a multiple of BLOCK (see _data_start)

SHORT, LONG, ASCII, LONG8 = 3, 4, 2, 16
SIZES = {SHORT: 2, LONG: 4, LONG8: 8}
WIDTH, LENGTH, BITS, COMPRESSION, PHOTOMETRIC, DESCRIPTION = 256, 257, 258, 259, 262, 270
STRIP_OFFSETS, SAMPLES, ROWS_PER_STRIP, STRIP_COUNTS, PLANAR, SAMPLE_FORMAT = 273, 277, 278, 279, 284, 339


def header(info: ArrayInfo) -> "TiffHeader | None":
    kind = TYPES.get(info.data_type)
    if kind is None or len(info.shape) < 2 or info.size == 0 or max(info.shape[-2:]) > CLASSIC_MAX:
        return None
    return layout(info.shape, info.dtype.itemsize, kind, description(info))


def description(info: ArrayInfo) -> bytes:
    """The first page's ImageDescription: OME-XML, ImageJ's, or tifffile's shape."""
    image = info.ome
    if image is not None:
        xml = ome.xml(info, image)
        if xml is not None:
            return xml
    if info.data_type in IMAGEJ_TYPES:
        text = imagej(info)
        if text is not None:
            return text
    image = ome.named(info)
    if image is not None:
        xml = ome.xml(info, image)
        if xml is not None:
            return xml
    return json.dumps({"shape": list(info.shape)}).encode()


def imagej(info: ArrayInfo) -> bytes | None:
    """An ImageJ hyperstack description (as tifffile writes it), when the leading axes are named
    as time, z and channel in ImageJ's order (TZCYX): by the dimension names, else by the axes
    of the OME-Zarr image the array belongs to (one OME-XML cannot describe); None otherwise."""
    names = info.dimension_names
    if not names and info.ome is not None and len(info.ome.axes) == len(info.shape):
        names = tuple(axis.name for axis in info.ome.axes)
    if not names or len(info.shape) < 3:
        return None
    letters = "".join(IMAGEJ_AXES.get((name or "").lower(), "?") for name in names[:-2])
    if "?" in letters or letters not in _ORDERED:
        return None
    sizes = dict(zip(letters, info.shape[:-2], strict=False))
    lines = ["ImageJ=1.11a", f"images={math.prod(info.shape[:-2])}"]
    lines += [f"{key}={sizes[axis]}" for axis, key in (("c", "channels"), ("z", "slices"), ("t", "frames"))
              if sizes.get(axis, 1) > 1]
    lines += ["hyperstack=true", "mode=grayscale"] + (["loop=false"] if sizes.get("t", 1) > 1 else [])
    return ("\n".join(lines) + "\n").encode()


_ORDERED = {"t", "z", "c", "tz", "tc", "zc", "tzc"}  # subsequences of ImageJ's TZC


@functools.lru_cache(maxsize=1024)  # arrays of one listing often share shape, type and description
def layout(shape: tuple[int, ...], itemsize: int, kind: tuple[int, int], text: bytes) -> "TiffHeader":
    """The header of a TIFF of these pages: classic if the whole file fits in 4 GiB, else BigTIFF."""
    classic = TiffHeader(shape, itemsize, kind, text, big=False)
    if classic.data + classic.pages * classic.page_bytes <= CLASSIC_MAX:
        return classic
    return TiffHeader(shape, itemsize, kind, text, big=True)


class TiffHeader:
    """The bytes before the data, made on demand: `len()` is the data's offset, worked out from a
    few numbers (a listing asks only that), and a slice gives those bytes. Layout: the file
    header, the description, the StripByteCounts all pages share (when a page has several
    strips), IFD 0, then one fixed-size record per further page (its IFD, and its StripOffsets
    when it has several strips), then zeros up to the data."""

    ENTRIES = 11  # tags in every IFD; the first has the description too

    def __init__(self, shape, itemsize: int, kind: tuple[int, int], text: bytes, big: bool):
        self.shape, self.kind, self.text = tuple(shape), kind, text
        self.big, self.word = big, 8 if big else 4
        self.pages = math.prod(shape[:-2])
        rows, width = shape[-2:]
        self.row_bytes = width * itemsize
        self.page_bytes = rows * self.row_bytes
        self.rows_per_strip = rows if self.page_bytes <= STRIP_MAX else max(1, STRIP_MAX // self.row_bytes)
        self.strips = -(-rows // self.rows_per_strip)
        shared = _rounded(self.strips * self.word, 8) if self.strips > 1 else 0  # the StripByteCounts
        self.ifd0_at = (16 if big else 8) + _rounded(len(text) + 1, 8) + shared
        self.record_bytes = _record_bytes(self.ENTRIES, self.strips, big)
        self.records_at = self.ifd0_at + _record_bytes(self.ENTRIES + 1, self.strips, big)
        self.records_end = self.records_at + (self.pages - 1) * self.record_bytes
        self.data = _data_start(self.records_end, self.pages * self.page_bytes)

    @functools.cached_property
    def _built(self) -> tuple[bytes, "_Template", "_Template"]:
        """(the bytes up to the first record, IFD 0's template, the other pages' template)."""
        rows = self.shape[-2]
        counts = [self.rows_per_strip * self.row_bytes] * (self.strips - 1)
        counts.append((rows - (self.strips - 1) * self.rows_per_strip) * self.row_bytes)
        offsets = LONG8 if self.big else LONG
        tags = {WIDTH: (LONG, [self.shape[-1]]), LENGTH: (LONG, [rows]), BITS: (SHORT, [self.kind[1]]),
                COMPRESSION: (SHORT, [1]), PHOTOMETRIC: (SHORT, [1]), SAMPLES: (SHORT, [1]),
                ROWS_PER_STRIP: (LONG, [self.rows_per_strip]), PLANAR: (SHORT, [1]),
                SAMPLE_FORMAT: (SHORT, [self.kind[0]]), STRIP_OFFSETS: (offsets, [0] * self.strips)}
        head = bytearray(b"II+\0\x08\0\0\0" if self.big else b"II*\0")
        head += _words([self.ifd0_at], self.word)  # where IFD 0 is
        text_at = len(head)
        head += _padded(self.text + b"\0", 8)
        if self.strips > 1:  # the same sizes on every page: one array for all
            tags[STRIP_COUNTS] = (offsets, self.strips, len(head))
            head += _padded(_words(counts, self.word), 8)
        else:
            tags[STRIP_COUNTS] = (offsets, counts)
        assert len(head) == self.ifd0_at and len(tags) == self.ENTRIES
        first = _template({**tags, DESCRIPTION: (ASCII, len(self.text) + 1, text_at)}, self.strips, self.big)
        other = _template(tags, self.strips, self.big)
        return bytes(head) + self._records(np.zeros(1, np.int64), first, self.ifd0_at).tobytes(), first, other

    def _records(self, pages: np.ndarray, template: "_Template", first_at: int) -> np.ndarray:
        """The IFD records of these consecutive pages, the first at `first_at`: one row each."""
        at = first_at + np.arange(len(pages), dtype=np.int64) * template.size
        out = np.tile(template.bytes, (len(pages), 1))
        following = np.where(pages + 1 < self.pages, self.records_at + pages * self.record_bytes, 0)
        _put(out, template.next_ifd, following, self.word)
        starts = self.data + pages * self.page_bytes
        if self.strips == 1:
            _put(out, template.strip_offsets, starts, self.word)
        else:
            _put(out, template.strip_offsets, at + template.array, self.word)
            strip_starts = np.arange(self.strips, dtype=np.int64) * (self.rows_per_strip * self.row_bytes)
            own = (starts[:, None] + strip_starts[None, :]).astype(f"<u{self.word}")
            out[:, template.array:template.array + self.strips * self.word] = own.view(np.uint8).reshape(len(pages), -1)
        return out

    def __len__(self) -> int:
        return self.data

    def __sizeof__(self) -> int:  # what the header cache counts: the bytes held (once made), not len()
        return self.records_at + 2 * self.record_bytes + len(self.text) + 400

    def __bytes__(self) -> bytes:
        return self[0:len(self)]

    def __getitem__(self, key: slice) -> bytes:
        start, stop, step = key.indices(len(self))
        if step != 1:
            raise ValueError("a TIFF header is sliced in steps of 1")
        head, _, other = self._built
        parts = [head[start:stop]]
        lo, hi = max(start, self.records_at), min(stop, self.records_end)
        if lo < hi:
            size = self.record_bytes
            first, last = (lo - self.records_at) // size, (hi - 1 - self.records_at) // size
            block = self._records(np.arange(first + 1, last + 2, dtype=np.int64), other,
                                  self.records_at + first * size)
            skip = lo - self.records_at - first * size
            parts.append(block.reshape(-1)[skip:skip + hi - lo].tobytes())
        zeros_from = max(start, self.records_end)
        if stop > zeros_from:
            parts.append(bytes(stop - zeros_from))
        return b"".join(parts)


@dataclass(frozen=True)
class _Template:
    """An IFD record with the page's own offsets left zero, and where they go."""
    bytes: np.ndarray
    size: int  # of the record: the IFD, then the page's StripOffsets if it has several strips
    strip_offsets: int  # the StripOffsets entry's value: the offset (one strip) or where the array is
    next_ifd: int
    array: int  # where the page's StripOffsets array starts (several strips)


def _template(tags: dict, strips: int, big: bool) -> _Template:
    """tags: tag -> (type, values) for values held in the entry, or (type, count, offset)."""
    word = 8 if big else 4
    out = bytearray(_words([len(tags)], 8 if big else 2))
    strip_offsets = 0
    for tag in sorted(tags):
        kind, *rest = tags[tag]
        if len(rest) == 2:  # values elsewhere in the header
            out += _words([tag, kind], 2) + _words([rest[0]], word) + _words([rest[1]], word)
            continue
        values = rest[0]
        if tag == STRIP_OFFSETS:
            strip_offsets = len(out) + 4 + word
        fits = len(values) * SIZES[kind] <= word  # else several strips' offsets: an array after the IFD, per page
        inline = _words(values, SIZES[kind]) if fits else b""
        out += _words([tag, kind], 2) + _words([len(values)], word) + inline + bytes(word - len(inline))
    next_ifd = len(out)
    out += bytes(word)
    array = len(out)
    size = _record_bytes(len(tags), strips, big)
    assert array == _ifd_bytes(len(tags), big)
    return _Template(np.frombuffer(bytes(out) + bytes(size - len(out)), np.uint8), size, strip_offsets, next_ifd,
                     array)


def _ifd_bytes(entries: int, big: bool) -> int:
    return 8 + 20 * entries + 8 if big else 2 + 12 * entries + 4


def _record_bytes(entries: int, strips: int, big: bool) -> int:
    """An IFD, then its page's StripOffsets array when it has several strips; word-aligned."""
    word = 8 if big else 4
    return _rounded(_ifd_bytes(entries, big) + (strips * word if strips > 1 else 0), 8 if big else 2)


def _data_start(header_end: int, data_bytes: int) -> int:
    """Where the data starts: at a multiple of 4 KiB, so that the kernel's pages of NAME.tif
    hold the same bytes as NAME.bin's; for data of BLOCK or more, at a multiple of BLOCK (the
    mount's read size) with a whole BLOCK of zeros after the header: a reader opening the file
    reads the header in reads of up to BLOCK (readers buffer by st_blksize), and the kernel
    reads one window of up to BLOCK ahead of them, so reading the header never reaches the data
    and never decodes a chunk. A sequential reader's requests then fall on the chunks'
    boundaries as they do in NAME.bin, a chunk decoded ahead sent as it is
    (rawfile.read_malloced). The price: 1 to 2 MiB of zeros."""
    if data_bytes < BLOCK:
        return _rounded(header_end, PAGE)
    return _rounded(header_end, BLOCK) + BLOCK


def _words(values, width: int) -> bytes:
    return np.asarray(values, dtype=f"<u{width}").tobytes()


def _put(out: np.ndarray, column: int, values: np.ndarray, width: int) -> None:
    out[:, column:column + width] = values.astype(f"<u{width}").view(np.uint8).reshape(-1, width)


def _padded(data: bytes, multiple: int) -> bytes:
    return data + bytes(-len(data) % multiple)


def _rounded(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
