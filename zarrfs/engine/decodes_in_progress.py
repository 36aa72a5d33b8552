"""Decodes in progress, by chunk key: a second reader of a chunk being decoded waits for that
decode and takes its result instead of decoding the chunk again.

Thumbnailers and file managers read one file from several threads at once; each used to decode
the chunk they share (four 16 KiB reads of one 16 MiB gzip chunk: four decodes, 0.29 s of CPU).
The first reader leads: it decodes as it would alone (into the kernel's buffer, a scratch
buffer, or new memory). Readers that come while it does wait on its flight; when it ends, the
leader hands them the chunk: the array it decoded into new memory as it is, or a copy of one
it decoded into memory it does not own (a few ms for 16 MiB, against 80 ms of inflating). A
decode of only the bytes its reader wanted (blosc blocks) is not handed on: each waiter
decodes its own bytes then, which is cheap. If the decode fails, each waiter raises a copy of
the same error.

A waiter waits only for a decode under way, which holds no lock and waits for no other decode
in progress, so readers of two chunks in opposite orders cannot deadlock, and a wait lasts
no longer than one decode.
"""

import copy
import threading
from collections.abc import Callable, Hashable

NOT_SHARED = object()  # the leader decoded only part of the chunk: each waiter decodes its own


class Flight:
    """One decode under way, and what its waiters get when it ends."""

    def __init__(self, version: int):
        self.version = version  # the array's version when the leader began: what the result is current for
        self.waiters = 0
        self._result: object = NOT_SHARED
        self._error: Exception | None = None
        self._done = threading.Event()

    def wait(self) -> object:
        """The leader's chunk (None: not stored), or NOT_SHARED; the leader's error raised again."""
        self._done.wait()
        if self._error is not None:
            try:
                error = copy.copy(self._error)  # a copy: each waiter's traceback is its own
            except Exception:  # an error whose arguments do not rebuild it: the same one, then
                error = self._error
            raise error
        return self._result

    def _end(self, result: object, error: Exception | None) -> None:
        self._result, self._error = result, error
        self._done.set()


class DecodesInProgress:
    def __init__(self) -> None:
        self._flights: dict[Hashable, Flight] = {}
        self._lock = threading.Lock()

    def join(self, key: Hashable, version: int) -> tuple[Flight, bool]:
        """The flight decoding `key`, and whether the caller leads it (it must then call `end`)
        or waits for it (`Flight.wait`)."""
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                flight.waiters += 1
                return flight, False
            flight = self._flights[key] = Flight(version)
            return flight, True

    def end(self, key: Hashable, flight: Flight, share: Callable[[], object] | None = None,
            error: Exception | None = None) -> None:
        """The leader's decode ended: with `error`, or with the chunk `share()` hands its waiters
        (called only if there are any, so a reader alone copies nothing)."""
        with self._lock:
            del self._flights[key]  # a reader coming from now on finds the chunk cached, or decodes it
            waiters = flight.waiters
        result = NOT_SHARED
        try:
            if waiters and error is None and share is not None:
                result = share()
        except MemoryError:
            pass  # no memory for a copy: the waiters decode for themselves
        finally:
            flight._end(result, error)  # whatever happens, no waiter waits past the decode

    def __contains__(self, key: Hashable) -> bool:
        """Whether a reader is fetching and decoding `key` now."""
        return key in self._flights  # one dict lookup: a stale answer costs one fetch at most

    def waiting(self, key: Hashable) -> int:
        """Readers waiting for the decode of `key` now (0: none, or no decode under way)."""
        with self._lock:
            flight = self._flights.get(key)
            return 0 if flight is None else flight.waiters
