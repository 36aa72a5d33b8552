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
