"""What one read may cost on a remote store (engine/read_budget.py): too many chunks is refused
before any request, and no fetch starts past the read's deadline, which a read nested in another
(a zarr.h5 read reads each array's piece) cannot push back."""

import pytest

from zarrfs.engine import read_budget
from zarrfs.engine.read_budget import MAX_READ_CHUNKS, ReadBudgetError, check_chunks, check_deadline, reading


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(read_budget.time, "monotonic", clock)
    return clock


def test_a_read_meeting_too_many_chunks_is_refused_naming_the_limit():
    check_chunks("a", 0, 4096, MAX_READ_CHUNKS)
    with pytest.raises(ReadBudgetError, match=f"meets {MAX_READ_CHUNKS + 1} chunks"):
        check_chunks("a", 0, 4096, MAX_READ_CHUNKS + 1)


def test_no_fetch_starts_past_the_deadline(clock):
    with reading("a", 0, 4096, 30.0):
        clock.now += 29.9
        check_deadline("a/c/0")
        clock.now += 0.2
        with pytest.raises(ReadBudgetError, match="'a/c/1' and the chunks after it were not fetched"):
            check_deadline("a/c/1")
    check_deadline("a/c/2")  # outside a read: no deadline


def test_a_nested_read_keeps_the_earlier_deadline(clock):
    with reading("zarr.h5", 0, 1 << 20, 30.0):
        clock.now += 20
        with reading("a", 0, 1 << 19, 30.0):  # its own deadline would be 20 s later
            clock.now += 11
            with pytest.raises(ReadBudgetError, match="zarr.h5"):
                check_deadline("a/c/0")
        with reading("b", 0, 1 << 19, None):  # none of its own: the outer one still holds
            with pytest.raises(ReadBudgetError, match="zarr.h5"):
                check_deadline("b/c/0")
