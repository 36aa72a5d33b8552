"""Variable-length strings and bytes as text: NAME.txt, one element per line, C order.

An element is written as its UTF-8 text with three escapes, so that every element is one line
and the file is valid UTF-8: a backslash is `\\\\`, a newline `\\n`, and a byte that is not part
of valid UTF-8 (only variable-length bytes can hold one) `\\xNN`. Every line ends with `\\n`.

Elements of a v2 array of JSON values (json2) are written as one line of JSON each instead.

These arrays have no fixed element size, so the text is made whole (TEXT_LIMIT bounds it) and
a listed file shows its true size: splice(2) (GIO's copy: Thunar, Nautilus, `gio copy`) and tar
read no further than the size, and a size that moved when opened made file managers type the
file as empty and backups copy it again. A size depends on every element's text, so it is
worked out once per version of the array (its documents and the version of its stored values,
as its mtime follows them) and kept (Texts): an array of up to SIZED_ELEMENTS elements is
rendered (and its text kept for the open); one of up to LISTED_ELEMENTS elements in up to
LISTED_CHUNKS chunks is read a slab of chunks at a time and let go (text_size), so memory stays
that of one slab: the whole chunks of a vlen-utf8 string array read as their lines' sizes,
counted from their stored bytes with no object per element (text_as_bytes.sizes_view), the
rest decoded and each slab's lines counted at once without being made (text_lines.py), at most
DECODED_ELEMENTS of them. readdir gives every entry's size, so a listing must not decode arrays
without bound: a text it cannot count within those bounds (told from the metadata where they
are of shape and chunks; on a remote store, a pass past -o timeout), or that cannot be made at
all (past TEXT_LIMIT, a corrupt chunk), is left out of the listing rather than listed with a
size it does not read (Texts.listed). It stays reachable by name, as `.Trash-UID` is: a stat by
name counts its size without the listing's bounds, a slab at a time (Texts.size), and from then
on listings show it with that size; one that cannot be made is refused by name as its open is.
The sidecar says when the text is listed (hierarchy.text_listed). Reads are served with direct
I/O, so a reader never sees pages of an older rendering.
This module is the seam for a view-file registry: `render(array)` is a pure function of the
decoded elements.
"""

import functools
import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from zarrfs.codecs import vlen_line_sizes
from zarrfs.engine import read_budget
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.errors import BudgetError, StoreError, UnsupportedError, ZarrfsError
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
# at most DECODED_ELEMENTS of them, 0.3 to 0.7 s. Past either, left out of listings until a stat by name
# counts it (docs/views.md).
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
_ESCAPED = re.compile(rb"\\(?:x([0-9a-fA-F]{2})|(n)|\\)")  # unescape's: \xNN, \n, \\


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


class Unlisted(NamedTuple):
    """Why a listing cannot tell a text's size, from its metadata alone; `never`: nothing can,
    its text being past TEXT_LIMIT."""
    why: str
    never: bool = False


def unlisted(store, node) -> Unlisted | None:
    """Why a listing cannot tell the text's size, from its metadata alone (no chunk read): past
    the listing's bounds (LISTED_ELEMENTS, LISTED_CHUNKS, DECODED_ELEMENTS) or TEXT_LIMIT; None
    when a listing counts it. The sidecar says it (hierarchy.text_listed), so it must depend on
    nothing but the metadata."""
    if math.prod(node.meta.shape) <= min(LISTED_CHUNKS, DECODED_ELEMENTS, TEXT_LIMIT):  # a chunk: one element or more
        return None  # told without building its codecs: a listing asks this of each small text
    plan = _plan(store, node, ChunkCache(0), bounded=True)
    return plan if isinstance(plan, Unlisted) else None


def _plan(store, node, cache, bounded: bool) -> Unlisted | tuple:
    """How the text's size is counted: (array, its whole chunks read as sizes or None, the box of
    those, the boxes decoded element by element, as_bytes), or why a listing cannot (`bounded`)
    or nothing can, from the metadata alone."""
    meta, shape = node.meta, tuple(node.meta.shape)
    elements = math.prod(shape)
    if elements > TEXT_LIMIT:  # every line is at least its newline
        return Unlisted(f"{elements} elements: its text is more than zarrfs's limit of {TEXT_LIMIT} bytes", True)
    if bounded and elements > LISTED_ELEMENTS:
        return Unlisted(f"{elements} elements, more than a listing counts ({LISTED_ELEMENTS})")
    as_bytes = text_as_bytes.bytes_view(meta)  # strings counted from their bytes: no str made
    array = open_array(store, node.path, as_bytes or meta, cache)
    chunks = chunks_spanned([full_box(shape)], array.leaf_grid)
    if bounded and chunks > LISTED_CHUNKS:  # each chunk is a request and a decode
        return Unlisted(f"{chunks} chunks, more than a listing reads ({LISTED_CHUNKS})")
    sizes, inside, edges = _whole_chunk_sizes(store, node, as_bytes, array.leaf_grid,
                                              DECODED_ELEMENTS if bounded else elements)
    decoded = sum(math.prod(box_shape(box)) for box in edges)
    if bounded and decoded > DECODED_ELEMENTS:
        return Unlisted(f"{decoded} elements to decode one by one, more than a listing decodes ({DECODED_ELEMENTS})")
    return array, sizes, inside, edges, as_bytes


def _counted(store, node, cache, name: str, bounded: bool = True) -> int | None:
    """The text's size, counted a slab at a time: the whole chunks of a vlen-utf8 string array
    from their stored bytes (text_as_bytes.sizes_view), its edge chunks and any other text
    element by element (strings as the bytes they store). `bounded` (a listing's count): None
    past the listing bounds (LISTED_CHUNKS, DECODED_ELEMENTS elements decoded one by one),
    before any chunk is read, and the whole pass one read's budget (-o timeout); else (a stat
    by name) no bound but TEXT_LIMIT, each request bounded by the store's own timeout."""
    plan = _plan(store, node, cache, bounded)
    if isinstance(plan, Unlisted):
        if plan.never and not bounded:  # a listing says nothing of it: a stat by name does
            raise UnsupportedError(f"{name}: {plan.why}")
        return None
    array, sizes, inside, edges, as_bytes = plan
    count = (lambda values: vlen_line_sizes.lines_size(values.reshape(-1).tolist())) if as_bytes else \
        functools.partial(_lines_size_of, line_of=lines_of(node.meta.data_type.name)[0])
    rows, size = slab_rows(tuple(node.meta.shape), array.leaf_grid), 0
    deadline = array.source.capabilities.read_deadline if bounded else None
    with read_budget.reading(name, 0, 0, deadline, "its text's size"):
        if sizes is not None:
            size = text_size(sizes, inside, rows, name, lambda values: int(values.sum()))
        for box in edges:
            size = text_size(array, box, rows, name, count, size)
    return size


def _whole_chunk_sizes(store, node, as_bytes, leaf_grid, decode_limit: int) -> tuple:
    """(the array read as each chunk's size, the box of its whole chunks, the boxes of the rest)
    for a string array of vlen-utf8 alone on a regular grid; else (None, (), [every element]).
    At most `decode_limit` elements decoded one by one in all (BudgetError past it)."""
    shape = tuple(node.meta.shape)
    inside, edges = whole_chunks(shape, leaf_grid) if regular(leaf_grid) else ((), [])
    decoded = sum(math.prod(box_shape(box)) for box in edges)
    if as_bytes is None or not inside or not math.prod(box_shape(inside)) or decoded > decode_limit:
        return None, (), [full_box(shape)]
    fill_size = vlen_line_sizes.lines_size([as_bytes.fill_value.item()])
    meta = text_as_bytes.sizes_view(node.meta, fill_size, decode_limit - decoded)
    if meta is None:
        return None, (), [full_box(shape)]
    # each chunk's size is read once: kept in no cache, where it would push out chunks read again
    return open_array(store, node.path, meta, ChunkCache(0)), inside, edges


def _lines_size_of(values: np.ndarray, line_of) -> int:
    return _lines_size(values.reshape(-1).tolist(), line_of)


def unescape(line: str) -> bytes:
    """The element bytes of one line (without its newline): the inverse of escape, for readers.
    One regular expression over the line's UTF-8 (no escape's byte is part of a multi-byte
    character): a reader checking a text of millions of lines unescapes each."""
    return _ESCAPED.sub(_unescaped, line.encode())


def _unescaped(match: re.Match) -> bytes:
    if match[1] is not None:
        return bytes((int(match[1], 16),))
    return b"\n" if match[2] is not None else b"\\"


_UNKNOWN = object()  # no outcome kept for this version of the array


class Retry(NamedTuple):
    """A listing's count that failed as a store error may pass: a listing counts again from `at`
    (time.monotonic()), a stat by name at once."""
    at: float


def _kept(error: ZarrfsError) -> ZarrfsError:
    """An error to keep for a version of an array, and raise again: its message and errno,
    without the frames it was raised in (which hold chunks)."""
    kept = ZarrfsError(str(error))
    kept.errno = error.errno
    return kept


class Texts:
    """Rendered texts of the arrays opened lately, bounded in bytes, and the sizes of texts
    worked out, each kept for the version of the array it was made from.

    A listing shows NAME.txt only with its true size (listed): where a listing cannot tell it
    (past its bounds, a chunk that cannot be read or decoded, a remote store past -o timeout),
    it leaves the file out, and a stat by name counts it without those bounds (size). Once a
    size is known for a version, listings show the file with it; `known` counts the sizes known
    so, for listings made before to be made again. A listing's count that a store error stopped
    is made again by a listing `retry_after` seconds later (the stored state's lifetime)."""

    def __init__(self, limit: int = 64 << 20, retry_after: float = 30.0):
        self.limit, self.retry_after = limit, retry_after
        self._texts: OrderedDict[str, tuple[object, object, bytes]] = OrderedDict()  # path -> (node, version, text)
        self._text_bytes = 0  # of the texts kept: summed as they come and go, so that keeping one costs no pass
        # path -> (node, version, outcome): the size; the error that makes the text impossible;
        # None where a listing could not count it (a stat by name does); Retry after a store error
        self._sizes: OrderedDict[str, tuple[object, object, int | ZarrfsError | Retry | None]] = OrderedDict()
        self._lock = threading.Lock()
        self.known = 0

    def listed(self, store, node, cache, version: object = None) -> int | None:
        """The size a listing shows, None where the file is left out: within SIZED_ELEMENTS it is
        rendered for this; above, counted a slab at a time (_counted) within the listing bounds,
        once per version of the array (see size). Past them (from the metadata alone where
        they are of shape and chunks), or when the text cannot be made, None."""
        outcome = self._outcome(node, version)
        if outcome is _UNKNOWN:
            outcome = self._listing_count(store, node, cache, version)
            self._keep_size(node, version, outcome)
        return outcome if isinstance(outcome, int) else None

    def _listing_count(self, store, node, cache, version: object) -> int | ZarrfsError | Retry | None:
        name = node.path or "/"
        try:
            if math.prod(node.meta.shape) > SIZED_ELEMENTS:
                return _counted(store, node, cache, name)  # None past the bounds: no chunk read
            if unlisted(store, node) is not None:  # rendered, each chunk is a request and a decode too
                return None
            with read_budget.reading(name, 0, 0, store.capabilities.read_deadline, "its text's size"):
                return len(self._render(store, node, cache, version))
        except (BudgetError, read_budget.ReadBudgetError) as e:  # more than a listing may cost
            log.debug("%s: its text's size is not counted by a listing (%s): left out until stated by name", name, e)
        except StoreError as e:  # perhaps passing: a stat by name tries again, a listing after a while
            log.warning("%s: its text's size is not known (%s): left out of listings for %g s, or until stated by "
                        "name", name, e, self.retry_after)
            return Retry(time.monotonic() + self.retry_after)
        except ZarrfsError as e:  # as the open refuses: kept, the file never listed for this version
            log.warning("%s: its text cannot be made (%s): left out of listings", name, e)
            return _kept(e)
        return None

    def size(self, store, node, cache, version: object = None) -> int:
        """The text's size in bytes, as a stat by name asks: counted without the listing bounds
        (each remote request bounded by the store's timeout) once per version of the array: its
        node (its documents) and `version`, what its stored values are
        (stored_usage.Stored.version), so that another program's write shows as a mtime does.
        A text that cannot be made (past TEXT_LIMIT, a corrupt chunk) raises the error its open
        would, so that no stat shows a size its read does not give."""
        outcome = self._outcome(node, version)
        if isinstance(outcome, int):
            return outcome
        if isinstance(outcome, ZarrfsError):
            raise _kept(outcome)
        try:
            if math.prod(node.meta.shape) <= SIZED_ELEMENTS:
                return len(self.text(store, node, cache, version))
            size = _counted(store, node, cache, node.path or "/", bounded=False)
        except StoreError:  # perhaps passing (a timeout): asked again at the next stat
            raise
        except ZarrfsError as e:
            self._keep_size(node, version, _kept(e))
            raise
        assert size is not None  # an unbounded count gives a size or raises
        self._keep_size(node, version, size, by_name=True)
        return size

    def _outcome(self, node, version: object):
        known = self._sizes.get(node.path)
        if known is None or known[0] is not node or known[1] != version:
            return _UNKNOWN
        return _UNKNOWN if isinstance(known[2], Retry) and known[2].at <= time.monotonic() else known[2]

    def retry_at(self, node) -> float:
        """When a listing counts the text again after a store error (Retry); else never (inf)."""
        known = self._sizes.get(node.path)
        return known[2].at if known is not None and isinstance(known[2], Retry) else math.inf

    def _keep_size(self, node, version: object, outcome: int | ZarrfsError | Retry | None,
                   by_name: bool = False) -> None:
        """Keep what is known of the text's size for this version. A size known by name where no
        listing could tell it, or a text listed before that a listing cannot size now (its stored
        values changed), makes listings made before stale (`known`). A listing's outcome never
        replaces what a stat by name found for the same version meanwhile (two threads)."""
        with self._lock:
            before = self._sizes.get(node.path)
            same = before is not None and before[0] is node and before[1] == version
            if same and not by_name and not isinstance(before[2], Retry):  # listed() counts only what is
                return  # not known for this version, or what it is to count again
            listed_before = before is not None and isinstance(before[2], int)
            if by_name and not (same and listed_before) or listed_before and not isinstance(outcome, int):
                self.known += 1
            self._sizes[node.path] = (node, version, outcome)
            self._sizes.move_to_end(node.path)
            while len(self._sizes) > SIZES_KEPT:
                self._sizes.popitem(last=False)

    def text(self, store, node, cache, version: object = None) -> bytes:
        """The whole text, as an open makes it (its size then known, by name)."""
        return self._render(store, node, cache, version, by_name=True)

    def _render(self, store, node, cache, version: object, by_name: bool = False) -> bytes:
        cached = self._texts.get(node.path)
        if cached is not None and cached[0] is node and cached[1] == version:
            return cached[2]
        array = open_array(store, node.path, node.meta, cache)
        text = render(array.read(tuple(slice(0, n) for n in node.meta.shape)), node.path or "/",
                      lines_of(node.meta.data_type.name)[0])
        self._keep_size(node, version, len(text), by_name)
        with self._lock:
            old = self._texts.pop(node.path, None)
            self._text_bytes += len(text) - (0 if old is None else len(old[2]))
            self._texts[node.path] = (node, version, text)
            while self._text_bytes > self.limit and len(self._texts) > 1:
                self._text_bytes -= len(self._texts.popitem(last=False)[1][2])
        return text
