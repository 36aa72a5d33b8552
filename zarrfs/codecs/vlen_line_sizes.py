"""A vlen-utf8 chunk's size as NAME.txt lines, read from its stored form with no object per element.

NAME.txt (views/text.py) writes an element as its UTF-8 bytes with a backslash and a newline
each escaped by one more byte, and ends it with a newline. A stat tells the file's size, so
it needs every element's line size, and numcodecs' decode of a chunk makes one Python object
per element: most of the 150 ns an element the size pass cost. The stored form (numcodecs'
VLenUTF8 and VLenBytes, zarr v3's vlen-utf8) is a u32 count n, then per element a u32 length
and the bytes, so with B the chunk's bytes the elements hold len(B) - 4 - 4n bytes. Their
escapes are counted exactly, without splitting B, in three cases, each checking that the chunk's
elements are UTF-8 as the open does (the first case walks no length: a chunk whose lengths pass
its end is refused when the file is opened, but bytes after its last element, which numcodecs
ignores, are counted, and the size is too large until the open renders the text):

- B (after the count) holds no newline, no backslash and no byte past ASCII: a length prefix
  can then fake none (a length of 10 is b"\\n\\0\\0\\0"), and ASCII is UTF-8;
- every element has one length L (len(B) - 4 == n * (4 + L), every prefix L): the elements are
  the columns of B after the count, each row a prefix and its element;
- every element is shorter than 256 bytes, so each prefix is its length byte and three zeros:
  where B has just n places of a byte and three zeros (no empty element but the first, no three
  zero bytes in a row inside an element), they are the prefixes, found at once and proven to be
  the chunk's by the chain of lengths (each prefix the next one's start).

Else the chunk is decoded as numcodecs does (`lines_size`), as the size pass did before, and
that work is bounded: past `decode_limit` elements in all, BudgetError. The codec is made only
by views/text_as_bytes.sizes_view, in place of vlen-utf8 (v3, v2's only filter, a shard's inner
codecs). Its decoded chunk holds the chunk's size in its first element and 0 in the others:
a sum over whole chunks is exact, one over part of a chunk is not (the caller reads whole chunks).
"""

import codecs
import threading
from typing import cast

import numpy as np

from zarrfs.codecs.base import ArrayBytesCodec, ChunkSpec
from zarrfs.codecs.numcodecs_adapter import check_vlen_header, codec_class
from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import BudgetError, CorruptChunkError, MetadataError, UnsupportedError
from zarrfs.format.data_types import DataType

NAME = "zarrfs.vlen_line_sizes"
SIZES = np.dtype("<i8")
NEWLINE, BACKSLASH = 0x0A, 0x5C


def lines_size(elements: list) -> int:
    """The size of the lines of `elements`, bytes that are the UTF-8 of text elements; bytes
    that are not UTF-8 are refused, as decoding them to str when the file is opened refuses them."""
    count = len(elements)
    if not count:
        return 0
    joined = b"\n".join(elements)  # a newline is no part of a multi-byte sequence: each element checked apart
    _check_utf8(joined)
    return len(joined) + 1 + joined.count(b"\\") + joined.count(b"\n") - (count - 1)


def chunk_lines_size(data: bytes, count: int) -> int | None:
    """The size of the lines of the `count` elements of vlen chunk `data` (its count checked),
    counted from its bytes; None when neither exact case holds."""
    body = data[4:]
    if len(body) < 4 * count:
        raise CorruptChunkError(f"vlen chunk of {len(data)} bytes cannot hold {count} elements")
    if body.find(b"\n") < 0 and body.find(b"\\") < 0 and body.isascii():
        return len(body) - 4 * count + count
    size = _one_length_size(body, count)
    return _short_lengths_size(body, count) if size is None else size


def _one_length_size(body: bytes, count: int) -> int | None:
    """chunk_lines_size where every element has the same length, else None."""
    width, rest = divmod(len(body), count)
    if rest or width < 4:
        return None
    length = width - 4
    rows = np.frombuffer(body, np.uint8).reshape(count, width)
    if not (rows[:, :4].copy().view("<u4") == length).all():
        return None
    prefix = length.to_bytes(4, "little")  # every row's: its escapes counted apart from the elements'
    escapes = (body.count(b"\\") - count * prefix.count(b"\\")) + (body.count(b"\n") - count * prefix.count(b"\n"))
    if not body.isascii() and max(prefix) < 0x80:  # ASCII prefixes end any multi-byte sequence
        _check_utf8(body)
    elif not body.isascii() and (rows[:, 4:] >= 0x80).any():
        lines = np.empty((count, length + 1), np.uint8)
        lines[:, :length], lines[:, length] = rows[:, 4:], NEWLINE
        _check_utf8(lines)
    return count * (length + 1) + escapes


def _short_lengths_size(body: bytes, count: int) -> int | None:
    """chunk_lines_size where the prefixes are the n places of a byte and three zeros, else None."""
    raw = np.frombuffer(body, np.uint8)
    starts = _prefix_places(raw, count)
    if len(starts) != count or not count or starts[0] != 0:
        return None
    lengths = raw[starts].astype(np.int64)
    if not (np.diff(starts) == lengths[:-1] + 4).all() or starts[-1] + 4 + int(lengths[-1]) != len(raw):
        return None  # not the chain of lengths from the first prefix to the chunk's end: not the prefixes
    escapes = (np.count_nonzero(raw == BACKSLASH) - np.count_nonzero(lengths == BACKSLASH)
               + np.count_nonzero(raw == NEWLINE) - np.count_nonzero(lengths == NEWLINE))
    if not body.isascii():
        if lengths.max() < 0x80:  # ASCII prefixes end any multi-byte sequence: the elements checked apart
            _check_utf8(body)
        else:
            separated = raw.copy()  # each prefix as newlines
            for byte in range(4):
                separated[starts + byte] = NEWLINE
            _check_utf8(separated)
    return len(body) - 3 * count + int(escapes)


def _prefix_places(raw: np.ndarray, count: int) -> np.ndarray:
    """The places of a byte then three zeros: from the zero bytes where they are 3 * count, in
    runs of three (no empty element: the common case, and twice as fast), else looked for. The
    places are listed only where they can be the `count` prefixes: a chunk of zero bytes costs
    a few masks of its size, not an index (8 bytes) per zero byte."""
    zero = raw == 0
    if np.count_nonzero(zero) == 3 * count:
        zeros = np.flatnonzero(zero)
        if (zeros[2::3] - zeros[::3] == 2).all():
            return zeros[::3] - 1
        del zeros
    places = zero[1:-2] & zero[2:-1]
    places &= zero[3:]
    if np.count_nonzero(places) != count:
        return np.empty(0, np.intp)  # not the prefixes
    return np.flatnonzero(places)


def _check_utf8(joined: BytesLike) -> None:
    """Refuse bytes (any buffer) that are not UTF-8."""
    try:
        codecs.utf_8_decode(joined, "strict", True)
    except UnicodeDecodeError as e:
        raise CorruptChunkError(f"a string element is not UTF-8 ({e.reason})") from None


class VlenLineSizesCodec(ArrayBytesCodec):
    """Decode-only: a vlen chunk as its lines' size (see the module's doc)."""

    kind = "array->bytes"
    variable_length = True

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        if spec.data_type.numpy != SIZES:
            raise MetadataError(f"{where}: {NAME} decodes to {SIZES}, not {spec.data_type.name}")
        limit = config.get("decode_limit")
        if type(limit) is not int or limit < 0:
            raise MetadataError(f"{where}: decode_limit must be a count of elements, not {limit!r}")
        self.spec, self.decode_limit = spec, limit
        self.count = int(np.prod(spec.shape))
        # the fallback: numcodecs' decode through its adapter, which checks the chunk as a read does
        bytes_spec = ChunkSpec(spec.shape, DataType("bytes", np.dtype(object)), np.array(b"", dtype=object))
        adapter = codec_class("vlen-bytes", where)
        assert adapter is not None  # numcodecs always has vlen-bytes
        self.vlen = cast(ArrayBytesCodec, adapter({}, bytes_spec, where))
        self._decoded, self._lock = 0, threading.Lock()

    def decode(self, data: BytesLike) -> np.ndarray:
        check_vlen_header(data, self.spec.shape)
        data = bytes(data)
        size = chunk_lines_size(data, self.count)
        if size is None:
            self._spend(self.count)
            size = lines_size(self.vlen.decode(data).reshape(-1).tolist())
        out = np.zeros(self.spec.shape, SIZES)
        out.reshape(-1)[0] = size
        return out

    def _spend(self, count: int) -> None:
        """Count elements decoded one by one: past decode_limit, BudgetError."""
        with self._lock:
            self._decoded += count
            if self._decoded > self.decode_limit:
                raise BudgetError(f"more than {self.decode_limit} elements to decode one by one")

    def encode(self, array: np.ndarray) -> BytesLike | None:
        raise UnsupportedError(f"{self.where}: {NAME} only reads")
