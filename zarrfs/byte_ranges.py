"""The byte ranges a read may ask of a stored value: the vocabulary the stores and the shard
format share (a shard's index is a range at its start or a suffix at its end)."""

from typing import NamedTuple


class Range(NamedTuple):
    """`length` bytes from `start`."""

    start: int
    length: int


class Suffix(NamedTuple):
    """The last `length` bytes."""

    length: int


ByteRange = Range | Suffix | None


def coalesce(ranges: list[Range], gap: int) -> list[tuple[Range, list[int]]]:
    """Runs that cover `ranges`, joining those less than `gap` bytes apart: (run, positions in
    `ranges` of the ranges it covers), in the order of their starts."""
    runs: list[tuple[Range, list[int]]] = []
    for i in sorted(range(len(ranges)), key=lambda i: ranges[i].start):
        r = ranges[i]
        if runs:
            run, members = runs[-1]
            if r.start - (run.start + run.length) < gap:
                stop = max(run.start + run.length, r.start + r.length)
                runs[-1] = (Range(run.start, stop - run.start), members + [i])
                continue
        runs.append((r, [i]))
    return runs
