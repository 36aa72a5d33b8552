"""Variable-length strings and bytes as text: NAME.txt, one element per line, C order.

An element is written as its UTF-8 text with three escapes, so that every element is one line
and the file is valid UTF-8: a backslash is `\\\\`, a newline `\\n`, and a byte that is not part
of valid UTF-8 (only variable-length bytes can hold one) `\\xNN`. Every line ends with `\\n`.

Elements of a v2 array of JSON values (json2) are written as one line of JSON each instead.

These arrays have no fixed element size, so the text is made whole (TEXT_LIMIT bounds it) and
its true size is shown from the first stat: splice(2) (GIO's copy: Thunar, Nautilus, `gio
copy`) and tar read no further than the size, and a size that moved when opened made file
managers type the file as empty and backups copy it again. A size depends on every element's
text, so it is worked out once per version of the array (its documents and the version of its
stored values, as its mtime follows them) and kept (Texts.size): an array of up to
SIZED_ELEMENTS elements is rendered (and its text kept for the open); one of up to
LISTED_ELEMENTS elements in up to LISTED_CHUNKS chunks is read a slab of chunks at a time and
let go (text_size), so memory stays that of one slab: the whole chunks of a vlen-utf8 string
array read as their lines' sizes, counted from their stored bytes with no object per element
(text_as_bytes.sizes_view), the rest decoded and each slab's lines counted at once without
being made (text_lines.py), at most DECODED_ELEMENTS of them. A larger one shows 0 until first
opened (readdir gives every entry's size, so a listing must not decode arrays without bound).
On a remote store the pass is one read's budget: past -o timeout it stops, and the size shows 0. Reads are served with
direct I/O, so a reader never sees pages of an older rendering.
This module is the seam for a view-file registry: `render(array)` is a pure function of the
decoded elements.
"""

import functools
import json
import logging
import math
import re
import threading
from collections import OrderedDict

import numpy as np

from zarrfs.codecs import vlen_line_sizes
from zarrfs.engine import read_budget
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.errors import BudgetError, UnsupportedError, ZarrfsError
from zarrfs.geometry import box_shape, chunks_spanned, full_box, largest_chunk, regular, whole_chunks
from zarrfs.views import text_as_bytes, text_lines

log = logging.getLogger(__name__)

TEXT_LIMIT = 1 << 30  # bytes of text made for one file: a larger array is refused, not rendered
SIZED_ELEMENTS = 1 << 18  # arrays up to this many elements are rendered to tell their size, the text kept
SLAB_ELEMENTS = 1 << 18  # a larger array's size is counted this many elements (whole chunk rows) at a time
# The bounds of what a stat reads to tell a text's size: readdir gives every entry's attributes, so
# `ls -l` of a folder of string arrays reads each once per version. Measured (scripts/bench_text_size.py,
# CPU on a 2-core machine shared with other work, chunks of 1M elements): whole chunks of vlen-utf8
# strings counted from their bytes (codecs/vlen_line_sizes.py) cost about 25 ns an element (dates: one
# length), 40 (ASCII labels of 3 to 20 bytes) and 70 (labels of 8 to 24 characters, some non-ASCII),
# zstd's decode 13 ns of it: an array of LISTED_ELEMENTS 0.45 to 1.2 s at its first stat. Elements
# decoded one by one (edge chunks, chunks no exact case counts; JSON values, bytes) cost 150 to 320 ns:
# at most DECODED_ELEMENTS of them, 0.3 to 0.7 s. Past either, 0 until opened (docs/views.md).
LISTED_ELEMENTS = 1 << 24
DECODED_ELEMENTS = 1 << 21
LISTED_CHUNKS = read_budget.MAX_READ_CHUNKS  # each chunk a request (remote) and a decode call
SIZES_KEPT = 1 << 16  # sizes kept, of arrays not changed since (path, key, int: about 200 bytes each)
PIECE_ELEMENTS = 1 << 16  # elements whose lines are made at once when rendering
FORMAT = ("UTF-8, one element per line in C order; escapes: \\\\ is a backslash, \\n a newline, "
          "\\xNN a byte that is not UTF-8")
JSON_FORMAT = "UTF-8, one element per line in C order, each a JSON value"
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n"})
_SURROGATE = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, from surrogateescape
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape(element) -> str:
    if isinstance(element, (bytes, bytearray, np.bytes_)):
        text = bytes(element).decode("utf-8", "surrogateescape").translate(_ESCAPES)
        return _SURROGATE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)
    return str(element).translate(_ESCAPES)


def json_line(element) -> str:
    """An element of a json2 array as one line of JSON (JSON escapes newlines in strings), as
    compact as numcodecs writes it; \\u escapes only for what UTF-8 cannot hold (lone surrogates)."""
    line = json.dumps(element, ensure_ascii=False, separators=(",", ":"))
    return line if not _LONE_SURROGATE.search(line) else json.dumps(element, separators=(",", ":"))


LINES = {"json2": (json_line, JSON_FORMAT)}  # data type -> (element -> line, its description); else escape


def lines_of(data_type: str) -> tuple:
    """How an array of this data type's elements become lines, and the sidecar's words for it."""
    return LINES.get(data_type, (escape, FORMAT))


def render(elements: np.ndarray, name: str, line_of=escape) -> bytes:
    """The text of an object array's elements, in C order, made a piece at a time (past
    TEXT_LIMIT, refused as soon as a piece passes it)."""
    flat, pieces, size = elements.reshape(-1), [], 0
    for start in range(0, len(flat), PIECE_ELEMENTS):
        piece = _lines(flat[start:start + PIECE_ELEMENTS].tolist(), line_of)
        size = _checked(size + len(piece), name)
        pieces.append(piece)
    return b"".join(pieces)


def text_size(array, box: tuple, rows: int, name: str, count, size: int = 0) -> int:
    """`size` and the size of the lines of the box's elements, read `rows` of the first axis at a
    time (array.read), so that only one slab's elements and no text are held; count(elements)
    gives a slab's (text_lines.py counts a slab's lines at once). Past TEXT_LIMIT, refused."""
    if not box:
        return _checked(size + count(array.read(())), name)
    for start in range(box[0].start, box[0].stop, max(rows, 1)):
        slab = (slice(start, min(start + rows, box[0].stop)), *box[1:])
        size = _checked(size + count(array.read(slab)), name)
    return size


def _lines(elements: list, line_of) -> bytes:
    """The elements' lines, each with its newline: all at once where text_lines can, else one by one."""
    lines = text_lines.escaped_lines(elements) if line_of is escape else None
    if lines is None:
        lines = b"".join([_line(element, line_of) + b"\n" for element in elements])
    return lines


def _lines_size(elements: list, line_of) -> int:
    """len(_lines(elements, line_of)), counted without making them where text_lines can."""
    size = SIZES_AT_ONCE[line_of](elements) if line_of in SIZES_AT_ONCE else None
    if size is None:
        size = sum(len(_line(element, line_of)) + 1 for element in elements)
    return size


def _line(element, line_of) -> bytes:
    """An element's line as the file holds it, without its newline."""
    return line_of(element).encode("utf-8", "surrogatepass")


def _checked(size: int, name: str) -> int:
    """The text's size so far: past TEXT_LIMIT, refused (render and text_size count alike, so a
    size listed is never of a text that is refused when opened)."""
    if size > TEXT_LIMIT:
        raise UnsupportedError(f"{name}: its text is more than zarrfs's limit of {TEXT_LIMIT} bytes")
    return size


SIZES_AT_ONCE = {escape: text_lines.escaped_size, json_line: text_lines.json_size}  # line_of -> size of many


def slab_rows(shape: tuple, chunk_shape) -> int:
    """Rows of the first axis read at a time: whole chunk rows, about SLAB_ELEMENTS elements."""
    if not shape:
        return 1
    row = math.prod(shape[1:]) or 1
    chunk_rows = largest_chunk(chunk_shape)[0]
    return max(chunk_rows, SLAB_ELEMENTS // row // chunk_rows * chunk_rows)


def _counted(store, node, cache, name: str) -> int | None:
    """The text's size, counted a slab at a time: the whole chunks of a vlen-utf8 string array
    from their stored bytes (text_as_bytes.sizes_view), its edge chunks and any other text
    element by element (strings as the bytes they store); None past the listing bounds
    (LISTED_CHUNKS, DECODED_ELEMENTS elements decoded one by one), before any chunk is read."""
    meta, shape = node.meta, tuple(node.meta.shape)
    as_bytes = text_as_bytes.bytes_view(meta)  # strings counted from their bytes: no str made
    array = open_array(store, node.path, as_bytes or meta, cache)
    if chunks_spanned([full_box(shape)], array.leaf_grid) > LISTED_CHUNKS:
        return None  # each chunk is a request and a decode
    sizes, inside, edges = _whole_chunk_sizes(store, node, as_bytes, array.leaf_grid)
    if sum(math.prod(box_shape(box)) for box in edges) > DECODED_ELEMENTS:
        return None
    count = (lambda values: vlen_line_sizes.lines_size(values.reshape(-1).tolist())) if as_bytes else \
        functools.partial(_lines_size_of, line_of=lines_of(meta.data_type.name)[0])
    rows, size = slab_rows(shape, array.leaf_grid), 0
    with read_budget.reading(name, 0, 0, array.source.capabilities.read_deadline, "its text's size"):
        if sizes is not None:
            size = text_size(sizes, inside, rows, name, lambda values: int(values.sum()))
        for box in edges:
            size = text_size(array, box, rows, name, count, size)
    return size


def _whole_chunk_sizes(store, node, as_bytes, leaf_grid) -> tuple:
    """(the array read as each chunk's size, the box of its whole chunks, the boxes of the rest)
    for a string array of vlen-utf8 alone on a regular grid; else (None, (), [every element])."""
    shape = tuple(node.meta.shape)
    inside, edges = whole_chunks(shape, leaf_grid) if regular(leaf_grid) else ((), [])
    decoded = sum(math.prod(box_shape(box)) for box in edges)
    if as_bytes is None or not inside or not math.prod(box_shape(inside)) or decoded > DECODED_ELEMENTS:
        return None, (), [full_box(shape)]
    fill_size = vlen_line_sizes.lines_size([as_bytes.fill_value.item()])
    meta = text_as_bytes.sizes_view(node.meta, fill_size, DECODED_ELEMENTS - decoded)
    if meta is None:
        return None, (), [full_box(shape)]
    # each chunk's size is read once: kept in no cache, where it would push out chunks read again
    return open_array(store, node.path, meta, ChunkCache(0)), inside, edges


def _lines_size_of(values: np.ndarray, line_of) -> int:
    return _lines_size(values.reshape(-1).tolist(), line_of)


def unescape(line: str) -> bytes:
    """The element bytes of one line (without its newline): the inverse of escape, for readers."""
    out, i = bytearray(), 0
    while i < len(line):
        c = line[i]
        if c == "\\" and line[i + 1:i + 2] == "x":
            out.append(int(line[i + 2:i + 4], 16))
            i += 4
        elif c == "\\":
            out += b"\n" if line[i + 1] == "n" else b"\\"
            i += 2
        else:
            out += c.encode()
            i += 1
    return bytes(out)


class Texts:
    """Rendered texts of the arrays opened lately, bounded in bytes, and the sizes of texts
    worked out, each kept for the version of the array it was made from."""

    def __init__(self, limit: int = 64 << 20):
        self.limit = limit
        self._texts: OrderedDict[str, tuple[object, object, bytes]] = OrderedDict()  # path -> (node, version, text)
        self._text_bytes = 0  # of the texts kept: summed as they come and go, so that keeping one costs no pass
        self._sizes: OrderedDict[str, tuple[object, object, int]] = OrderedDict()  # path -> (node, version, size)
        self._lock = threading.Lock()

    def size(self, store, node, cache, version: object = None) -> int:
        """The text's size in bytes, worked out once per version of the array: its node (its
        documents) and `version`, what its stored values are (stored_usage.Stored.version), so
        that another program's write shows as a mtime does. Within SIZED_ELEMENTS it is
        rendered for this; above, counted a slab at a time (_counted) within the listing
        bounds; past them, 0 until it is first opened. A text that cannot be made (too large, a
        corrupt chunk, a remote store past -o timeout) shows 0: opening it reports the error."""
        known = self._sizes.get(node.path)
        if known is not None and known[0] is node and known[1] == version:
            return known[2]
        if math.prod(node.meta.shape) > LISTED_ELEMENTS:
            return 0  # until it is opened (text() keeps its size), as /proc files
        name = node.path or "/"
        try:
            if math.prod(node.meta.shape) <= SIZED_ELEMENTS:
                return len(self.text(store, node, cache, version))
            size = _counted(store, node, cache, name)
            if size is None:
                return 0  # as an array of more elements: no chunk read
        except BudgetError as e:  # more to decode one by one than a stat may: as above, kept for this version
            log.debug("%s: its text's size is not counted at a stat (%s): shown as 0 until opened", name, e)
            size = 0
        except ZarrfsError as e:
            log.warning("%s: its text's size is not known (%s): shown as 0", name, e)
            size = 0
        self._keep_size(node, version, size)
        return size

    def _keep_size(self, node, version: object, size: int) -> None:
        with self._lock:
            self._sizes[node.path] = (node, version, size)
            self._sizes.move_to_end(node.path)
            while len(self._sizes) > SIZES_KEPT:
                self._sizes.popitem(last=False)

    def text(self, store, node, cache, version: object = None) -> bytes:
        cached = self._texts.get(node.path)
        if cached is not None and cached[0] is node and cached[1] == version:
            return cached[2]
        array = open_array(store, node.path, node.meta, cache)
        text = render(array.read(tuple(slice(0, n) for n in node.meta.shape)), node.path or "/",
                      lines_of(node.meta.data_type.name)[0])
        self._keep_size(node, version, len(text))
        with self._lock:
            old = self._texts.pop(node.path, None)
            self._text_bytes += len(text) - (0 if old is None else len(old[2]))
            self._texts[node.path] = (node, version, text)
            while self._text_bytes > self.limit and len(self._texts) > 1:
                self._text_bytes -= len(self._texts.popitem(last=False)[1][2])
        return text
