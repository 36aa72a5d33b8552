"""Variable-length strings and bytes as text: NAME.txt, one element per line, C order.

An element is written as its UTF-8 text with three escapes, so that every element is one line
and the file is valid UTF-8: a backslash is `\\\\`, a newline `\\n`, and a byte that is not part
of valid UTF-8 (only variable-length bytes can hold one) `\\xNN`. Every line ends with `\\n`.

Elements of a v2 array of JSON values (json2) are written as one line of JSON each instead.

These arrays have no fixed element size, so the text is made whole (TEXT_LIMIT bounds it) and
its true size is shown from the first stat: splice(2) (GIO's copy: Thunar, Nautilus, `gio
copy`) and tar read no further than the size, and a size that moved when opened made file
managers type the file as empty and backups copy it again. A size depends on every element's
text, so it is worked out once per version of the array and kept (Texts.size): an array of up
to SIZED_ELEMENTS elements is rendered (and its text kept for the open); one of up to
LISTED_ELEMENTS is read a slab of chunks at a time, each line's length added up and the text let
go (text_size), so memory stays that of one slab; a larger one shows 0 until first opened (a
listing decodes no more than that of any array: readdir gives every entry's size). Reads are served with direct I/O, so a reader never sees pages
of an older rendering.
This module is the seam for a view-file registry: `render(array)` is a pure function of the
decoded elements.
"""

import json
import logging
import math
import re
import threading
from collections import OrderedDict

import numpy as np

from zarrfs.engine.array import open_array
from zarrfs.errors import UnsupportedError, ZarrfsError
from zarrfs.geometry import largest_chunk

log = logging.getLogger(__name__)

TEXT_LIMIT = 1 << 30  # bytes of text made for one file: a larger array is refused, not rendered
SIZED_ELEMENTS = 1 << 18  # arrays up to this many elements are rendered to tell their size (~0.1 s), kept
SLAB_ELEMENTS = 1 << 18  # a larger array's size is added up this many elements (whole chunk rows) at a time
# at most this many elements are decoded to tell a size at a stat (about 2 s on a loaded 2-core machine): readdir
# gives every entry's attributes, so a folder of larger string arrays would be read whole by `ls`
LISTED_ELEMENTS = 1 << 20
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
    """The text of an object array's elements, in C order."""
    lines, size = [], 0
    for element in elements.reshape(-1):
        line = _line(element, line_of)
        size = _added(size, line, name)
        lines.append(line)
    return b"\n".join(lines) + b"\n" if lines else b""


def text_size(array, shape: tuple, rows: int, name: str, line_of=escape) -> int:
    """len(render(elements)) of the array's elements, read `rows` of the first axis at a time
    (array.read(box)), so that only one slab's elements and no text are held."""
    if not shape:
        return len(render(array.read(()), name, line_of))
    size = 0
    for start in range(0, shape[0], max(rows, 1)):
        box = (slice(start, min(start + rows, shape[0])), *(slice(0, n) for n in shape[1:]))
        for element in array.read(box).reshape(-1):
            size = _added(size, _line(element, line_of), name)
    return size


def _line(element, line_of) -> bytes:
    """An element's line as the file holds it, without its newline."""
    return line_of(element).encode("utf-8", "surrogatepass")


def _added(size: int, line: bytes, name: str) -> int:
    """The text's size in bytes with `line` and its newline: past TEXT_LIMIT, refused (render and
    text_size count alike, so a size listed is never of a text that is refused when opened)."""
    size += len(line) + 1
    if size > TEXT_LIMIT:
        raise UnsupportedError(f"{name}: its text is more than zarrfs's limit of {TEXT_LIMIT} bytes")
    return size


def slab_rows(shape: tuple, chunk_shape) -> int:
    """Rows of the first axis read at a time: whole chunk rows, about SLAB_ELEMENTS elements."""
    if not shape:
        return 1
    row = math.prod(shape[1:]) or 1
    chunk_rows = largest_chunk(chunk_shape)[0]
    return max(chunk_rows, SLAB_ELEMENTS // row // chunk_rows * chunk_rows)


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
    """Rendered texts of the arrays opened lately, bounded in bytes."""

    def __init__(self, limit: int = 64 << 20):
        self.limit = limit
        self._texts: OrderedDict[str, tuple[object, bytes]] = OrderedDict()
        self._sizes: dict[str, tuple[object, int]] = {}  # path -> (node, size of its text): a few ints each
        self._lock = threading.Lock()

    def size(self, store, node, cache) -> int:
        """The text's size in bytes: once per node (a changed array is a new node). Within
        SIZED_ELEMENTS it is rendered for this; up to LISTED_ELEMENTS, added up a slab at a time
        (text_size); above, 0 until it is first opened. A text that cannot be made (too large, a
        corrupt chunk) shows 0: opening it reports the error."""
        known = self._sizes.get(node.path)
        if known is not None and known[0] is node:
            return known[1]
        if math.prod(node.meta.shape) > LISTED_ELEMENTS:
            return 0  # until it is opened (text() keeps its size), as /proc files
        try:
            if math.prod(node.meta.shape) <= SIZED_ELEMENTS:
                return len(self.text(store, node, cache))
            array = open_array(store, node.path, node.meta, cache)
            size = text_size(array, tuple(node.meta.shape), slab_rows(tuple(node.meta.shape), node.meta.chunk_shape),
                             node.path or "/", lines_of(node.meta.data_type.name)[0])
            with self._lock:
                self._sizes[node.path] = (node, size)
            return size
        except ZarrfsError as e:
            log.warning("%s: its text's size is not known (%s): shown as 0", node.path or "/", e)
            with self._lock:
                self._sizes[node.path] = (node, 0)
            return 0

    def text(self, store, node, cache) -> bytes:
        cached = self._texts.get(node.path)
        if cached is not None and cached[0] is node:
            return cached[1]
        array = open_array(store, node.path, node.meta, cache)
        text = render(array.read(tuple(slice(0, n) for n in node.meta.shape)), node.path or "/",
                      lines_of(node.meta.data_type.name)[0])
        with self._lock:
            self._sizes[node.path] = (node, len(text))
            self._texts[node.path] = (node, text)
            self._texts.move_to_end(node.path)
            while sum(len(t) for _, t in self._texts.values()) > self.limit and len(self._texts) > 1:
                self._texts.popitem(last=False)
        return text
