"""Names are bytes (docs/names.md).

A node's name is whatever bytes its directory entry holds: a newline, or bytes that are not
UTF-8, are names like any other. Inside zarrfs a name is held as the str Python's os module
makes of those bytes (os.fsdecode, PEP 383: bytes that do not decode become lone surrogates
U+DC80..U+DCFF), which maps one-to-one back to the bytes (os.fsencode). The binding decodes the
kernel's paths the same way, so a name read from a directory, a path the kernel asks for and a
key given to the local store are the same str, and every call into the OS gives back the bytes.

Only where a name must become Unicode text does it meet a rule, and each such place asks here:

    JSON value (sidecar, intent record, recovery manifest)   a string when the bytes are UTF-8,
                                                             else an array of the byte values
    JSON object key (the consolidated copy)                  only UTF-8 names; others left out
    object-store and HTTP keys                                only UTF-8 names (others: EILSEQ)
                                                             without ASCII control characters,
                                                             which obstore refuses (EINVAL)
"""

import errno
import logging
import os

from zarrfs.errors import StoreError


def to_bytes(name: str) -> bytes:
    """The name's bytes, as the file system holds them."""
    return os.fsencode(name)


def text(name: str) -> str | None:
    """The name as Unicode text: its bytes decoded as UTF-8; None when they are not UTF-8."""
    try:
        return to_bytes(name).decode("utf-8")
    except UnicodeDecodeError:
        return None


def to_json(name: str) -> str | list[int]:
    """The name as a JSON value: a string when its bytes are UTF-8, else the list of its byte
    values (0-255), as Zarr writes a raw fill value and journalctl a field that is not UTF-8.
    Never a string with \\uDCxx escapes: those are lone surrogates, which strict JSON readers
    refuse."""
    as_text = text(name)
    return as_text if as_text is not None else list(to_bytes(name))


def from_json(value: str | list[int]) -> str:
    """The name to_json wrote. ValueError for anything else."""
    if isinstance(value, str):
        return os.fsdecode(value.encode("utf-8"))
    if isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) for b in value):
        return os.fsdecode(bytes(value))  # ValueError for a value outside 0-255
    raise ValueError(f"{value!r} is no name: a string or a list of byte values")


def text_key(key: str) -> str:
    """`key` as the Unicode text an object store or URL needs; StoreError naming the key when it
    cannot be one: EILSEQ for a name that is not UTF-8, EINVAL for an ASCII control character
    (a newline, a tab), which obstore's paths refuse. That key alone is refused."""
    as_text = text(key)
    if as_text is None:
        raise StoreError(f"{printable(key)}: the name is not UTF-8, and object-store keys are Unicode text",
                         errno.EILSEQ)
    if any(c < " " or c == "\x7f" for c in as_text):
        raise StoreError(f"{printable(key)}: the name holds a control character, which object-store keys "
                         f"cannot hold", errno.EINVAL)
    return as_text


def printable(name: str) -> str:
    """The name for a log line: bytes that are not UTF-8 as \\xNN, control characters (a
    newline would split the line) as Python escapes them. Any text: a message too."""
    if name.isprintable():  # nearly every log line: no surrogate, no control character
        return name
    decoded = to_bytes(name).decode("utf-8", "surrogateescape")  # the fs encoding may not be UTF-8
    return "".join(_printable(c) for c in decoded)


def _printable(c: str) -> str:
    if "\udc80" <= c <= "\udcff":
        return f"\\x{ord(c) - 0xdc00:02x}"
    return c if c.isprintable() else repr(c)[1:-1]


class LineFormatter(logging.Formatter):
    """Every log record's message as one line of UTF-8, whatever names it holds: a newline in a
    name would split it, and a byte that is not UTF-8 (a lone surrogate here) made the syslog
    handler drop the line (it encodes strict UTF-8). A traceback after it stays as it is."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)
