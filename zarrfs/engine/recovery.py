"""Written data that could not be stored when the daemon stopped: saved, and replayed later.

When write-back still fails at shutdown (a full disk, a store gone read-only), the daemon saves
each array's unstored chunks as a recovery directory, exits non-zero, and `zarrfs-recover DIR`
(zarrfs/cli/recover.py, with the mount's -o options and environment for an object store) writes
them into the store once it can take them:

    RECOVERY_DIR/20261122T142233-4711-temperature/
        recovery.json    the store, the array (names as docs/names.md writes them in JSON), its
                         zarr.json, and one record per piece
        0.npy, 1.npy...  the pieces: boxes of the array's elements, as written
        0.written.npy... for a piece of which only some elements were written (an object
                         store's chunk written in part), which: a replay writes only those
        partial-record.bin  the bytes appended of a record never completed (growth.py), and in
                         recovery.json where they start in NAME.bin: kept for a person to
                         complete, never written by a replay (they are no whole element row)
"""

import itertools
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from typing import NotRequired, TypedDict

import numpy as np

from zarrfs.engine import growth
from zarrfs.engine.array import Array, open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.consolidated_copy import copy_of
from zarrfs.errors import ZarrfsError
from zarrfs.format.v3 import ArrayMetadata, parse_object
from zarrfs.geometry import Box
from zarrfs.names import from_json, to_json
from zarrfs.nodes.documents import parse_v2, read_metadata
from zarrfs.stores.contract import Store

log = logging.getLogger(__name__)

MANIFEST = "recovery.json"
_names = itertools.count()

Pieces = Iterable[tuple[Box, np.ndarray, np.ndarray | None]]  # (box, its values, which were written; None: all)


class Piece(TypedDict):
    """One piece's record in the manifest."""

    file: str  # its values (.npy)
    start: list[int]  # where its box starts in the array
    written: NotRequired[str]  # which of its elements were written (.npy), when not all


# recovery.json: names as names.to_json writes them; "zarr.json" is the array's document
class PartialRecord(TypedDict):
    """The bytes of a record never completed: kept, never replayed."""

    file: str
    offset: int  # where they start in NAME.bin
    bytes: int


Manifest = TypedDict("Manifest", {"store": str | list[int], "array": str | list[int], "zarr.json": dict,
                                  "zarr_format": object, "pieces": list[Piece], "saved": str,
                                  "partial_record": NotRequired[PartialRecord]})


def default_directory() -> str:
    """Root keeps recovery data in /var/lib, like other daemons' state; users in XDG's state home."""
    if os.geteuid() == 0:
        return "/var/lib/zarrfs/recovery"
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "zarrfs", "recovery")


PARTIAL_RECORD = "partial-record.bin"


def save(directories: list[str], store_root: str, array_path: str, document: dict, pieces: Pieces,
         partial: tuple[int, bytes] | None = None) -> str:
    """Save `pieces` ((box, values) pairs), and `partial` ((its offset in NAME.bin, the bytes of a
    record never completed), if any) in the first of `directories` that takes them; returns the
    recovery directory made. Raises OSError when none does."""
    kept = list(pieces)
    errors = []
    for directory in directories:
        try:
            return _save_in(directory, store_root, array_path, document, kept, partial)
        except OSError as e:
            errors.append(f"{directory}: {e.strerror or e}")
    raise OSError(f"cannot save recovery data ({'; '.join(errors)})")


def _save_in(directory: str, store_root: str, array_path: str, document: dict, pieces: Pieces,
             partial: tuple[int, bytes] | None) -> str:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    label = (array_path or os.path.basename(store_root.rstrip("/")) or "array").replace("/", "_")
    final = os.path.join(directory, f"{stamp}-{os.getpid()}-{next(_names)}-{label}")
    work = tempfile.mkdtemp(prefix=".partial-", dir=directory)
    try:
        records: list[Piece] = []
        for i, (box, values, written) in enumerate(pieces):
            np.save(os.path.join(work, f"{i}.npy"), np.ascontiguousarray(values), allow_pickle=False)
            records.append({"file": f"{i}.npy", "start": [s.start for s in box]})
            if written is not None:  # only these elements are the mount's: the others were read
                np.save(os.path.join(work, f"{i}.written.npy"), np.ascontiguousarray(written), allow_pickle=False)
                records[-1]["written"] = f"{i}.written.npy"
        manifest: Manifest = {"store": to_json(store_root), "array": to_json(array_path), "zarr.json": document,
                    "zarr_format": document.get("zarr_format", 3), "pieces": records,
                    "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if partial is not None:
            with open(os.path.join(work, PARTIAL_RECORD), "wb") as f:
                f.write(partial[1])
            manifest["partial_record"] = {"file": PARTIAL_RECORD, "offset": partial[0], "bytes": len(partial[1])}
        with open(os.path.join(work, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.rename(work, final)  # whole or absent: a half-written directory is never replayed
        _fsync_directory(directory)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final


def load(directory: str) -> Manifest:
    """A recovery directory's manifest (recovery.json), as save() wrote it."""
    with open(os.path.join(directory, MANIFEST)) as f:
        manifest: Manifest = json.load(f)
    return manifest


def saved_from(manifest: Manifest) -> str:
    """The store the data was written to: a directory, or an object store's URL (without
    credentials: a mount never takes them in its URL, and none is ever saved here)."""
    return from_json(manifest["store"])


def replay(directory: str, manifest: Manifest, store: Store, force: bool = False) -> int:
    """Write a recovery directory's pieces into `store` (opened from saved_from(manifest), with
    the mount's options) as a writer does, and make them durable; returns how many pieces. On an
    object store they are merged like any write: only the elements saved replace the stored
    ones, conditionally on the version read. Refuses (unless forced) when the array's shape or
    data type has changed."""
    path = from_json(manifest["array"])
    key = path or "/"
    meta = read_metadata(store, path)
    if meta is None:
        raise ZarrfsError(f"{manifest['store']}: no array at {path or '/'!r} any more")
    where = f"{directory}/{MANIFEST}"
    saved = (parse_v2(manifest["zarr.json"], {}, "array", where) if manifest.get("zarr_format") == 2
             else parse_object(manifest["zarr.json"], where))
    if not isinstance(saved, ArrayMetadata):
        raise ZarrfsError(f"{where}: its zarr.json is not an array's metadata")
    if not isinstance(meta, ArrayMetadata) or (meta.shape, meta.data_type) != (saved.shape, saved.data_type):
        if not force:
            raise ZarrfsError(f"{key}: the array's shape or data type changed since the data was saved "
                              f"(--force writes it anyway)")
    if not isinstance(meta, ArrayMetadata):  # forced, but a group cannot take an array's pieces
        raise ZarrfsError(f"{manifest['store']}: {key!r} is a group now, not an array")
    array = open_array(store, path, meta, ChunkCache(64 << 20), copy_of(store))  # a growth's copy follows
    _grow_for(array, directory, manifest["pieces"], key)
    for record in manifest["pieces"]:
        values = np.load(os.path.join(directory, record["file"]), allow_pickle=False)
        written = np.load(os.path.join(directory, record["written"]), allow_pickle=False) \
            if "written" in record else None
        if written is not None and written.shape != values.shape:
            raise ZarrfsError(f"{where}: {record['written']} does not match {record['file']}'s shape")
        for start, part in _written_parts(values, written):
            box = tuple(slice(a + b, a + b + n) for a, b, n in zip(record["start"], start, part.shape, strict=True))
            array.write(box, part)
        if array.shared.dirty_nbytes > 256 << 20:
            array.flush()
    array.flush()
    partial = manifest.get("partial_record")
    if partial is not None:  # the directory is kept for it
        raise ZarrfsError(f"{len(manifest['pieces'])} pieces written and stored; {partial['file']} holds "
                          f"{partial['bytes']} bytes of a record never completed, from byte {partial['offset']} of "
                          f"the array's .bin file: append them with the rest of that record, then remove the directory")
    return len(manifest["pieces"])


def _grow_for(array: Array, directory: str, pieces: list[Piece], key: str) -> None:
    """Records appended past the stored shape (growth.py) make the array grow to hold them, as
    the mount would have: the new shape is stored after the records, by the last flush. A piece
    past dimension 0 of an array that cannot grow, or past another end, is refused."""
    if not array.shape:
        return
    length = array.shape[0]
    for record in pieces:
        start = record["start"]
        shape = np.load(os.path.join(directory, record["file"]), mmap_mode="r", allow_pickle=False).shape
        if len(start) != len(array.shape) or len(shape) != len(start) or \
                any(a + n > s for a, n, s in zip(start[1:], shape[1:], array.shape[1:], strict=True)):
            raise ZarrfsError(f"{key}: a saved piece lies outside the array")
        length = max(length, start[0] + shape[0])
    if length > array.shape[0]:
        why = growth.why_fixed(array)
        if why is not None:
            raise ZarrfsError(f"{key}: saved records lie past dimension 0 ({length} > {array.shape[0]}), and the "
                              f"array cannot grow: {why}")
        array.resize((length, *array.shape[1:]))


def _written_parts(values: np.ndarray, written: np.ndarray | None) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """(start, values) of the boxes to write: the whole piece, or where only some elements were
    the mount's, each run of them along the last axis (the others stay as stored now)."""
    if written is None or written.all():
        yield (0,) * values.ndim, values
        return
    for row in np.ndindex(*written.shape[:-1]):
        edges = np.flatnonzero(np.diff(np.concatenate(([0], written[row].astype(np.int8), [0]))))
        for begin, end in zip(edges[::2], edges[1::2], strict=True):
            yield (*row, int(begin)), values[(*row, slice(begin, end))].reshape((1,) * len(row) + (end - begin,))


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
