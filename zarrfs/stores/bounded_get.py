"""A GET's answer taken into memory only as far as the caller can use it.

A server's answer is untrusted input. obstore's `GetResult.bytes()` allocates whatever size the
server announces before the body arrives (`Content-Length: 1099511627776` aborts the process),
and takes a body of any length. Here the announced size (Content-Length, or Content-Range's for
a ranged GET: `GetResult.range`, known from the headers) is checked first against the most the
caller can use, then the body is read through `GetResult.stream`, which allocates nothing ahead
of the bytes that came, and stopped as soon as more arrives than announced. Every way of failing is a StoreError (EIO)
naming the key and the sizes, which the errno boundary logs in one line.

The most a caller can use: the range it asked for; for a whole chunk, what a chunk of that array
can encode to at most (CodecChain.stored_limit, passed down as the Store contract's `limit`);
DOCUMENT_LIMIT for a metadata document; VALUE_LIMIT where nothing is known.
"""

import errno
from typing import TYPE_CHECKING, Callable

from zarrfs.byte_ranges import ByteRange
from zarrfs.errors import StoreError

if TYPE_CHECKING:  # obstore's typed dicts and results exist in its stubs only
    from obstore import GetResult

DOCUMENT_LIMIT = 256 << 20  # bytes of one metadata document (a consolidated .zmetadata of a large hierarchy)
VALUE_LIMIT = 4 << 30  # a whole value whose caller gives no limit (a decoded chunk is at most 2 GiB: codecs/base.py)


def most(byte_range: ByteRange, limit: int | None) -> int:
    """The most bytes an answer to a GET of `byte_range` may have: the range's length, else the
    caller's limit for the whole value, else VALUE_LIMIT."""
    if byte_range is not None:
        return byte_range.length
    return VALUE_LIMIT if limit is None else limit


def body(key: str, result: "GetResult", most: int, error: Callable[[str, str, BaseException], StoreError]) -> bytes:
    """The body of obstore's GetResult `result`, at most `most` bytes (read-only bytes). The
    stream is asked for pieces of the announced size, so a body as announced comes as one piece,
    copied once; a longer one stops within one network read past it. `error(what, key,
    exception)` explains a transfer that broke off (the store's error(): a timeout, a reset)."""
    start, stop = result.range
    announced = stop - start
    if announced > most:
        raise StoreError(f"cannot read {key!r}: the server announced {announced} bytes, more than the {most} "
                         f"expected", errno.EIO)
    pieces: list[bytes] = []
    received = 0
    try:
        for piece in result.stream(min_chunk_size=max(announced, 1)):
            received += len(piece)
            if received > announced:
                raise StoreError(f"cannot read {key!r}: the server sent more than the {announced} bytes it "
                                 f"announced", errno.EIO)
            pieces.append(piece)
    except StoreError:
        raise
    except Exception as e:  # the body broke off or timed out
        reason = str(error("cannot read", key, e)).removeprefix(f"cannot read {key!r}: ")
        raise StoreError(f"cannot read {key!r}: the {announced} bytes the server announced did not all arrive "
                         f"({received} had): {reason}", errno.EIO) from None
    if received != announced:
        raise StoreError(f"cannot read {key!r}: the server sent {received} of the {announced} bytes it announced",
                         errno.EIO)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
