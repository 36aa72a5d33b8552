"""NAME.txt's lines of many elements at once: their bytes, or only how many bytes they take.

The per-element rules are views/text.py's (`escape`, `json_line`); this module gives the same
bytes for a list of elements with a few passes of C code over the whole list (str.join,
bytes.join, bytes.count, json.dumps of the list), about 30 ns an element where a Python call per
element cost 2.5 µs. A stat tells NAME.txt's size, which depends on every element, so this is
what lets the size be true at the first stat for arrays of millions of elements.

Counting needs no line: an element's escaped line is its UTF-8 bytes plus one byte per backslash
and per newline in it (each becomes two characters) plus three per byte that is not UTF-8 (one
byte shown as four, `\\xNN`). Joined by newlines, every element's bytes stay apart (a newline is
no part of a multi-byte sequence), so the joined bytes are counted once. Each function answers
None for what it does not handle (elements that are neither all text nor all bytes, a lone
surrogate in JSON): the caller then goes element by element.
"""

import json
import re

_SURROGATE = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, from surrogateescape
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escaped_size(elements: list) -> int | None:
    """sum(len(escape(e).encode()) + 1 for e in elements) for elements all str or all bytes."""
    count = len(elements)
    if not count:
        return 0
    joined = _joined_bytes(elements)
    if joined is None:
        return None
    not_utf8 = 0 if isinstance(elements[0], str) else _bytes_not_utf8(joined)
    newlines_inside = joined.count(b"\n") - (count - 1)
    return len(joined) + 1 + joined.count(b"\\") + newlines_inside + 3 * not_utf8


def escaped_lines(elements: list) -> bytes | None:
    """b"".join(escape(e).encode() + b"\\n" for e in elements) for elements all str or all bytes
    (else None)."""
    count = len(elements)
    if not count:
        return b""
    text = _joined_text(elements)
    if text is None:
        return None
    if text.count("\n") == count - 1:
        text = text.replace("\\", "\\\\")
    else:  # a newline inside an element: the joined text cannot tell it from a line's end
        text = _escaped_apart(elements)
    if not isinstance(elements[0], str):  # bytes: a byte that is not UTF-8 as \xNN
        text = _SURROGATE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)
    return (text + "\n").encode("utf-8", "surrogatepass")


def _escaped_apart(elements: list) -> str:
    """The elements joined by newlines as text, each with its backslashes and newlines escaped
    on its own: a method call of C code each, not a Python call, so that a text whose labels
    hold a newline here and there is made about as fast as one of labels that hold none."""
    if isinstance(elements[0], str):
        return "\n".join([e.replace("\\", "\\\\").replace("\n", "\\n") for e in elements])
    return b"\n".join([e.replace(b"\\", b"\\\\").replace(b"\n", b"\\n") for e in elements]).decode(
        "utf-8", "surrogateescape")


def json_size(elements: list) -> int | None:
    """sum(len(json_line(e).encode()) + 1 for e in elements): the list as compact JSON is the
    elements' lines joined by commas in brackets."""
    count = len(elements)
    if not count:
        return 0
    try:
        text = json.dumps(elements, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None  # element by element, which reports it as before
    if _LONE_SURROGATE.search(text):  # such an element's line is written with \\u escapes
        return None
    return len(text.encode("utf-8")) - 2 - (count - 1) + count


def _joined_bytes(elements: list) -> bytes | None:
    """The elements joined by newlines as bytes: text as UTF-8 (surrogates as escape keeps them)."""
    try:
        if isinstance(elements[0], str):
            return "\n".join(elements).encode("utf-8", "surrogatepass")
        return b"\n".join(elements)
    except TypeError:  # not all of one kind
        return None


def _joined_text(elements: list) -> str | None:
    """The elements joined by newlines as text: bytes decoded as escape decodes them."""
    try:
        if isinstance(elements[0], str):
            return "\n".join(elements)
        return b"\n".join(elements).decode("utf-8", "surrogateescape")
    except TypeError:  # not all of one kind
        return None


def _bytes_not_utf8(joined: bytes) -> int:
    """How many bytes of `joined` are no part of valid UTF-8 (each one surrogate escaped)."""
    try:
        joined.decode("utf-8")
        return 0
    except UnicodeDecodeError:
        escaped = joined.decode("utf-8", "surrogateescape")
        return len(joined) - len(escaped.encode("utf-8", "ignore"))
