"""Arrays that grow and shrink along dimension 0, as netCDF's unlimited (record) dimension does.

A record is one index of dimension 0: the product of the other dimensions times the item size.
A write past the end of the flat file appends the whole records it completes (RawFile.write with
`grow`); the bytes of a record not yet complete wait in the file's `pending` bytes until a later
write completes it, and are never stored. truncate() makes dimension 0 a given number of records,
as zarr-python's resize does; the mount stores it at once, by its own write-back of the array
(OpenArrays.flush). Either way the new shape reaches the store with the chunks (writeback.py): growing, the records before the shape that shows them; shrinking, the shape
first. So a reader of the store sees the old array or the new one.

Two writers appending to one array: the write-back of the second finds the document holding
the first one's shape (ShapeChangedError). rebase() then moves the second one's records, which
only its memory holds, after the first one's, and the write-back is done again on the new shape.

Sharded arrays. What a writer holds of its appended records is, per shard, the shard's view
with its dirty inner chunks (the array's write-back lists the shard as dirty); a shard is
built whole at write-back, its inner chunks not written here taken from the shard as stored
then (ShardChunks.build), so the other writer's inner chunks in a shard both touch are kept.
Moving records needs every one of them held here, never stored before the shape that shows
them: a flush stores the shape with its batch, and an early write-back (whole_only), which
leaves out shards still being filled, stores past the stored end only the shard rows before
the first one it leaves out, with a shape that reaches just that far (WriteBack._shards_taken:
the shard row holding the stored end goes once every row of it past that end is written).
So when the document shows another writer's longer array, this writer's records are all in
its memory, and nothing it stored lies where the other writer's records now are.
rebase() then reads them (from memory), and in the shard row holding the old stored end,
inside each of its shards: the inner chunk row holding that end takes the values stored now
past it (the other writer's), and the inner chunks past it are dropped, so the shard's
rebuild takes the other writer's from the store; shards wholly past the end are dropped
(their views' chunks with them). The records are then written again at their new place:
inner chunks written in part are first read from the shard as stored now (the held views'
indexes are forgotten first), and at write-back the shard holding the other writer's end is
read, merged and rebuilt like any shard written in part. Still refused: the other writer shrank
the array or stored another record shape, this writer shrank it, rows added here are not all
held (a grow by truncate, or a failed write-back that stored some of them), and shards nested
in inner chunks (moving rows through two levels of shards is not done).
"""

import itertools
import math
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from zarrfs.engine import holes
from zarrfs.engine.array import Array
from zarrfs.engine.chunk_sources import ShapeChangedError, StoreChunks
from zarrfs.geometry import grid_shape, regular

MAX_RECORD = 64 << 20  # bytes of one record: a partial one is held in memory until completed
MAX_CLEARED = 1 << 16  # chunks a grown region may find stored (a crash's) and delete, at most
STATS = 16  # chunks a truncate asks after one by one (a stat each) rather than list
ROW_LISTINGS = 16  # chunk rows a truncate lists one by one rather than the whole array
REBASES = 5  # write-backs of one append against other writers that keep growing the array


def record_nbytes(array: Array) -> int:
    """Bytes of one index of dimension 0."""
    return int(math.prod(array.shape[1:]) * array.dtype.itemsize)


def why_fixed(array: Array) -> str | None:
    """Why the array cannot grow or shrink along dimension 0, or None when it can."""
    if not array.shape:
        return "a scalar array has no dimension to grow"
    if not regular(array.chunk_shape):
        return "its chunk grid is rectilinear"
    if array.dtype.kind == "O":
        return "its elements have variable length"
    record = record_nbytes(array)
    if not record:
        return "its records hold no element"
    if record > MAX_RECORD:
        return f"its records are {record} bytes, more than the {MAX_RECORD} a partial one may hold in memory"
    return None


def truncate(array: Array, length: int) -> None:
    """Dimension 0 becomes `length`, stored by the caller's flush (the mount's, at once), as
    zarr-python's resize does: chunks
    (shards) wholly past a shrunk end are deleted and the edge chunk is re-encoded with the fill
    value past the end, so a later growth shows no old values; a grown region stores nothing, and
    chunks a crash left in it (records stored without the shape that shows them) are deleted."""
    old = array.shape[0]
    if length == old:
        return
    low, high = min(old, length), max(old, length)
    rows = array.chunk_shape[0]
    edge_end = min(high, -(-low // rows) * rows)  # the end of the chunk row holding the new or old end
    first, stop = -(-low // rows), -(-high // rows)
    past = _stored_in(array, high, first, stop, shrink=length < old)  # listed before anything changes
    if length > old:
        array.resize((length, *array.shape[1:]))
    if low < edge_end:
        _fill(array, low, edge_end if length > old else min(edge_end, old))
    with array.shared.lock:
        if length < old:  # written here and not stored: dropped (deleted too if a flush is storing it)
            past |= array.write_back.drop_from(first)
        array.write_back.delete(past)
    if length < old:
        array.resize((length, *array.shape[1:]))
    array.forget_stored()  # chunks cached past the end are stale once it moves back


def _fill(array: Array, start: int, stop: int) -> None:
    """Rows [start, stop) of the array take the fill value."""
    box = (slice(start, stop), *(slice(0, n) for n in array.shape[1:]))
    array.write(box, np.full((stop - start, *array.shape[1:]), array.spec.fill_value, array.dtype))


def _stored_in(array: Array, high: int, first: int, stop: int, shrink: bool) -> set[tuple[int, ...]]:
    """Coordinates of the chunks (shards) stored whose index along dimension 0 is in [first,
    stop), of the grid `high` records long, asked of the store (_listed). Where the store has
    no listing, every chunk of those rows; for a grown region, none past MAX_CLEARED of them
    (only a crash leaves chunks there)."""
    grid = grid_shape((high, *array.shape[1:]), array.chunk_shape)
    source = array.source
    if isinstance(source, StoreChunks) and source.capabilities.listing:
        return _listed(source, grid, range(first, stop))
    if not shrink and (stop - first) * math.prod(grid[1:]) > MAX_CLEARED:
        return set()
    return {(i, *rest) for i in range(first, stop) for rest in np.ndindex(*grid[1:])}


def _listed(source: StoreChunks, grid: tuple[int, ...], rows: range) -> set[tuple[int, ...]]:
    """The chunks stored in chunk rows `rows`, found by asking only about those rows, as the
    truncate holds appenders off meanwhile: a few chunks one by one (a grow by a few records),
    a few rows each listed alone where a row is a directory; else one listing of the array's
    values (a shrink of a large sparse array then deletes only what is there)."""
    across = math.prod(grid[1:])
    if len(rows) * across <= STATS:
        return {c for i in rows for rest in np.ndindex(*grid[1:]) if source.is_stored(c := (i, *rest))}
    keys: Iterable[str]
    if len(rows) <= ROW_LISTINGS and source.rows_are_directories(len(grid)):
        keys = itertools.chain.from_iterable(source.row_keys(i) for i in rows)
    else:
        keys = source.stored_keys() or ()  # the caller checked that the store lists
    found = (holes.coords_of(key, source.encoding, grid) for key in keys)
    return {c for c in found if c is not None and c[0] in rows}


def held(array: Array) -> AbstractContextManager[None]:
    """The array's document held against other zarrfs processes' new shapes (Store.exclusive:
    a local store's directory lock; nothing elsewhere) while this writer moves its records and
    stores them."""
    return array.source.exclusive() if isinstance(array.source, StoreChunks) else nullcontext()


def rebase(array: Array, changed: ShapeChangedError) -> None:
    """Another writer grew dimension 0 of the stored array (to `changed.found`) while this one
    appended records not stored yet: they move after the other one's, as if appended to the
    array it stored, and the shape stored from now on is the other one's. In the chunk row
    holding the old stored end, the rows past that end take the values stored now (the other
    writer's) and are written here no more; the chunks wholly past it are dropped, and the
    records are written again at their new place. Where moving would not be right (see
    _why_not_moved) it raises ShapeChangedError saying why, and nothing changes.
    The caller holds the array's flush lock (no batch in flight) and its lock."""
    stored, shape, found = array.write_back.stored_shape, array.shape, changed.found
    why = _why_not_moved(array, stored, found)
    if why is not None or found is None:
        raise ShapeChangedError(f"{changed}: the records appended here are kept, not stored ({why})",
                                found) from None
    rest = tuple(slice(0, n) for n in shape[1:])
    mine = array.read((slice(stored[0], shape[0]), *rest))  # from memory (holds_rows)
    array.forget_stored()  # the other writer's chunks replaced those cached past the old end
    _unwrite_from(array, stored[0])
    array.write_back.rebased(found)
    array.resize((found[0] + len(mine), *shape[1:]))
    array.write((slice(found[0], found[0] + len(mine)), *rest), mine)


def _unwrite_from(array: Array, end: int) -> None:
    """Rows from `end` of dimension 0 are written here no more: in the chunk row holding `end`,
    the rows past it take the values stored now; chunks wholly past it are dropped. A sharded
    array's shards in that row are the same to their inner chunks (shard views: see above)."""
    edge, inside = divmod(end, array.chunk_shape[0])
    if inside:
        for others in np.ndindex(*grid_shape(array.shape, array.chunk_shape)[1:]):
            coords = (edge, *others)
            if array.sharding:
                _unwrite_from(array.shard_view(coords), inside)
            else:
                array.write_back.unwrite_rows(coords, inside, array.decode(array.stored(coords), coords))
    array.write_back.drop_from(edge + 1 if inside else edge)


def _why_not_moved(array: Array, stored: tuple[int, ...], found: tuple[int, ...] | None) -> str | None:
    """Why this writer's records cannot be moved after another writer's, or None."""
    if found is None or found[1:] != stored[1:] or found[0] < stored[0]:
        return "the other writer did not append records of the same shape"
    if array.shape[1:] != stored[1:] or array.shape[0] < stored[0]:
        return "this writer shrank the array"
    if array.sharding and array.sharding.inner_chain.sharding:
        return "its shards hold shards: records are not moved through two levels of them"
    if not array.write_back.holds_rows(stored[0], array.shape[0]):
        return "rows added here are not all written here"
    return None
