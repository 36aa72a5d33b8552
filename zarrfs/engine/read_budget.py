"""What one read of the mount may cost where each chunk is a network round trip.

A read fetches the chunks its bytes lie in. With tiny chunks (an array of shape [2**63-1] in
chunks of [1]) one 128 KiB read of the kernel's read-ahead meant 131072 GETs, and the daemon kept
fetching long after the reader and the mount were gone. On a store that declares `remote`:

- a read meeting more than MAX_READ_CHUNKS chunks is refused before any request is made;
- a read whose fetches outlast the store's `read_deadline` (-o timeout) makes no further
  request: the chunks it has not fetched by then are not fetched.

Either is EIO with one log line naming the file, the read and the limit. The deadline belongs to
the thread serving the read (`reading`); fetches on other threads (decodes ahead of a stream)
have none, and are bounded by their memory budget instead. A read that waits for a fetch another
thread makes for it (a run of a shard's inner chunks, shard_spans.py) waits until its deadline.

A read that continues a stream says so (`reading(..., streaming=True)`): where each request is a
round trip, it fetches its chunks with the rest of their run of a shard, which the decodes ahead
of the stream then take, instead of GETs of its own (shard_spans.py).
"""

import contextlib
import errno
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import TypeVar

from zarrfs.errors import StoreError

MAX_READ_CHUNKS = 1 << 14  # chunks one read may fetch: a 128 KiB read of 8-byte chunks

_local = threading.local()
T = TypeVar("T")


class ReadBudgetError(StoreError):
    """A read that would cost more than its budget: EIO."""

    def __init__(self, message: str):
        super().__init__(message, errno.EIO)


def check_chunks(name: str, offset: int, size: int, chunks: int) -> None:
    if chunks > MAX_READ_CHUNKS:
        raise ReadBudgetError(f"{name}: a read of {size} bytes at {offset} meets {chunks} chunks, more than "
                              f"zarrfs's limit of {MAX_READ_CHUNKS} for one read")


@contextlib.contextmanager
def reading(name: str, offset: int, size: int, seconds: float | None, what: str | None = None,
            streaming: bool = False) -> Iterator[None]:
    """Within this block, this thread's fetches end `seconds` from now (None: never), or at the
    deadline of a read this one is part of (a read of zarr.h5 reads each array's piece), if
    earlier. `what`: the words for this read in the error, when it is not a read of bytes (a
    stat's); `streaming`: the read continues a stream (streaming())."""
    outer, outer_streaming = getattr(_local, "deadline", None), getattr(_local, "streaming", False)
    what = f"a read of {size} bytes at {offset}" if what is None else what
    inner = None if seconds is None else (time.monotonic() + seconds, seconds, name, what)
    _local.deadline = outer if inner is None or (outer is not None and outer[0] <= inner[0]) else inner
    _local.streaming = streaming
    try:
        yield
    finally:
        _local.deadline, _local.streaming = outer, outer_streaming


def streaming() -> bool:
    """Whether this thread serves a read that continues a stream."""
    return getattr(_local, "streaming", False)


def wait(future: "Future[T]", what: str) -> T:
    """The result of `future`, a fetch another thread makes for this one, waited for until this
    thread's read's deadline (where there is none, a decode ahead's, as long as the fetch takes:
    it is bounded by the store's timeout). Past the deadline, ReadBudgetError naming `what`."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return future.result()
    try:
        return future.result(max(0.0, deadline[0] - time.monotonic()))
    except TimeoutError:
        if future.done():  # the fetch's own error
            raise
        _, seconds, name, read = deadline
        raise ReadBudgetError(f"{name}: {read} did not finish within {seconds:g} s "
                              f"(-o timeout): {what} did not arrive in time") from None


def check_deadline(key: str) -> None:
    """Before a fetch of `key`: refused once this thread's read is past its deadline."""
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline[0]:
        _, seconds, name, read = deadline
        raise ReadBudgetError(f"{name}: {read} did not finish within {seconds:g} s "
                              f"(-o timeout); {key!r} and the chunks after it were not fetched")
