"""One asyncio loop in a thread of ours, for a library that speaks asyncio (icechunk-python's
session store is zarr's async Store API; obstore's async GETs, object_store.py): the file
system's threads submit to it and wait, each wait bounded."""

import asyncio
import errno
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from zarrfs.errors import StoreError, ZarrfsError

T = TypeVar("T")


class Loop:
    """One asyncio loop in a daemon thread named `name`, started at the first call (a daemon
    forks after its stores are made: a thread started before would not be in the child). Each
    call is waited for at most `timeout` seconds unless told otherwise."""

    def __init__(self, timeout: float, name: str = "icechunk"):
        self.timeout = timeout
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> "Future[T]":
        """Start `coroutine` on the loop; its result comes in the concurrent future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._running())

    def run(self, coroutine: Coroutine[Any, Any, T], what: str, timeout: float | None = None) -> T:
        """The coroutine's result, waited for at most `timeout` (the loop's own unless told):
        past it the coroutine is cancelled and the wait is StoreError (ETIMEDOUT) naming `what`."""
        return self.wait(self.submit(coroutine), what, timeout)

    def wait(self, future: "Future[T]", what: str, timeout: float | None = None) -> T:
        """As run(), for a coroutine submitted already."""
        limit = self.timeout if timeout is None else timeout
        try:
            return future.result(limit)
        except TimeoutError:
            if future.done():  # the coroutine's own TimeoutError, not this wait's
                raise
            future.cancel()
            raise StoreError(f"{what}: no answer within {limit:g} s (-o timeout)", errno.ETIMEDOUT) from None

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

    def _running(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            with self._lock:
                if self._loop is None:
                    made = asyncio.new_event_loop()
                    threading.Thread(target=made.run_forever, name=self.name, daemon=True).start()
                    self._loop = made
                loop = self._loop
        return loop


def first_line(error: Exception) -> str:
    """An error's first line, at most 300 characters: its type's name when it says nothing."""
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__
