"""The asyncio loop an Icechunk repository's calls run on (zarrfs/stores/async_loop.py): closed,
its thread ends, and a call after it is one clear error, never a wait nor a crash."""

import asyncio
import errno
import inspect
import threading

import pytest

from zarrfs.errors import StoreError
from zarrfs.stores.async_loop import Loop


def loop_threads() -> int:
    return sum(thread.name == "icechunk" for thread in threading.enumerate())


async def answer() -> int:
    await asyncio.sleep(0)
    return 42


def test_a_call_after_close_is_ebadf_and_the_loop_thread_is_gone():
    before = loop_threads()
    loop = Loop(30.0)
    assert loop_threads() == before + 1
    assert loop.run(answer(), "a listing") == 42
    loop.close()
    loop.close()  # twice is once
    assert loop_threads() == before
    late = answer()
    with pytest.raises(StoreError) as raised:
        loop.run(late, "a listing of 'g'")
    assert raised.value.errno == errno.EBADF
    assert str(raised.value) == "a listing of 'g': the repository is closed"
    assert inspect.getcoroutinestate(late) == inspect.CORO_CLOSED  # never left to warn it was not awaited
