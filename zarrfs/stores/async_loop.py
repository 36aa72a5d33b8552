"""One asyncio loop in a thread of ours, for stores whose library speaks asyncio (icechunk-python's
session store is zarr's async Store API): the file system's threads wait on it, each call bounded."""

import asyncio
import errno
import re
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from zarrfs.errors import StoreError, ZarrfsError

T = TypeVar("T")


class Loop:
    """One asyncio loop in a daemon thread of ours: icechunk-python's stores are zarr's async
    Store API, and the file system's threads wait on it, each call at most `timeout` seconds."""

    def __init__(self, timeout: float, before_each: Callable[[], None] | None = None):
        self.timeout = timeout
        self._before_each = before_each  # called before each call: its error is the call's (icechunk_contained.py)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="icechunk", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """The loop stopped, its thread ended and its descriptors (an epoll instance and a socket
        pair) closed: a process that opens repositories one after another (the tests, a mount's
        Python API) keeps none of them. A call after it is EBADF; a second close does nothing."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self.timeout)
        if not self._thread.is_alive():  # else a call outlived its timeout: the loop is left to it
            self._loop.close()

    def run(self, coroutine: Coroutine[Any, Any, T], what: str) -> T:
        if self._before_each is not None:
            try:
                self._before_each()
            except BaseException:
                coroutine.close()  # never run: not left to warn that it was never awaited
                raise
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        except RuntimeError:  # the loop is closed
            coroutine.close()
            raise StoreError(f"{what}: the repository is closed", errno.EBADF) from None
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise StoreError(f"{what}: no answer within {self.timeout:g} s (-o timeout)", errno.ETIMEDOUT) from None

    def call(self, coroutine: Coroutine[Any, Any, T], what: str,
             errno_of: Callable[[Exception], int] = lambda error: errno.EIO) -> T:
        """run(), the library's own errors (multi-line reports of its own types) one line naming
        `what`, with the errno `errno_of` gives them (EIO unless told)."""
        try:
            return self.run(coroutine, what)
        except ZarrfsError:
            raise
        except Exception as e:
            raise StoreError(f"{what}: {first_line(e)}", errno_of(e)) from None


def first_line(error: BaseException) -> str:
    """An error's first line, at most 300 characters: its type's name when it says nothing. The
    queries of the URLs it quotes are left out: a SAS token or a signature travels in one."""
    lines = str(error).strip().splitlines()
    return URL_QUERY.sub(r"\1?(query not shown)", lines[0])[:300] if lines else type(error).__name__


URL_QUERY = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s?#]*)\?[^\s]*", re.IGNORECASE)
