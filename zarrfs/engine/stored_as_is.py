"""Stored-as-is bytes: which byte ranges of a flat file lie, unchanged, in stored files.

When a chunk is stored with the `bytes` codec alone in little-endian order, the flat file's
bytes (engine/flat_file.py: little-endian C order) are the chunk file's own bytes: a READ can
be answered with a descriptor of that file and an offset, and libfuse reads (or splices) them
itself after the callback returns, without a copy through Python (fuse/replies.py).

This module decides when that holds and opens the files; the FUSE read path falls back to
decoding whenever it answers None:
- only arrays whose chain is `bytes` alone (or `sharding_indexed` over inner chunks that are)
  with no byte swap and no conversion (bool, big-endian, transposes, compressors: never);
- only a local store, through its contained opening (LocalStore.open_value);
- only chunks that are stored whole (a missing chunk is a hole: it reads as the fill value) and
  not dirty or being flushed (dirty chunks in memory are the truth);
- only when the request maps to at most MAX_RANGES contiguous ranges of stored files.

Stored values are never changed in place (a write-back renames a new value over the old one),
so a descriptor opened while the array's version was even and its chunk clean serves exactly
the bytes the decoding path would have read at that moment.
"""

import logging
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from zarrfs.codecs.chain import BytesCodec, CodecChain
from zarrfs.codecs.shard_format import EMPTY
from zarrfs.engine.array import Array
from zarrfs.engine.chunk_sources import ShardChunks, StoreChunks
from zarrfs.errors import ZarrfsError
from zarrfs.stores.contract import Store

log = logging.getLogger(__name__)

MAX_RANGES = 16  # stored ranges in one reply: past that, decoding costs less than the walk
MAX_KEPT = 64  # stored files kept open between requests (Descriptors)
SMALL_READ = 64 << 10  # reads below this keep the files they open (as flat_file.SPARSE_READ)
KINDS = "iufcmM"  # numbers and times: the flat bytes are the stored ones (bool is 0/1, text is checked)


@dataclass(frozen=True)
class Layout:
    """How the flat file maps onto stored chunks (the leaf chunks: inner chunks when sharded).

    Dimensions after `split` are whole in every chunk (chunk extent == array extent), so a run
    along dimension `split` within one chunk is contiguous both in the flat file and in the
    chunk file; `row` is the bytes of one step along it."""

    shape: tuple[int, ...]
    leaf: tuple[int, ...]  # the leaf chunk shape
    outer: tuple[int, ...] | None  # the shard shape when sharded
    split: int
    row: int
    leaf_nbytes: int


def layout(array: Array) -> Layout | None:
    """The Layout of an engine Array when its stored bytes are its flat bytes, else None."""
    if not array.shape or not isinstance(array.source, StoreChunks):
        return None
    store = array.source.store
    if store.capabilities.remote or not store.capabilities.file_values:
        return None
    chain, outer = array.chain, None
    if chain.sharding is not None:
        if chain.array_array or chain.bytes_bytes:
            return None
        outer, chain = array.chunk_shape, chain.sharding.inner_chain
    if not _as_is(chain, array.dtype):
        return None
    leaf = chain.spec.shape
    split = max([d for d in range(len(leaf)) if leaf[d] != array.shape[d]], default=0)
    row = math.prod(array.shape[split + 1:]) * array.dtype.itemsize
    return Layout(array.shape, tuple(leaf), outer, split, row, chain.spec.nbytes)


def _as_is(chain: CodecChain, dtype: np.dtype) -> bool:
    """`bytes` alone, storing exactly the flat file's element bytes."""
    if chain.sharding is not None or chain.array_array or chain.bytes_bytes:
        return False
    codec = chain.array_bytes
    return isinstance(codec, BytesCodec) and dtype.kind in KINDS and codec.stored == dtype \
        and dtype.byteorder != ">"


def runs(plan: Layout, offset: int, n: int) -> list[tuple[tuple, int, int]] | None:
    """[(leaf chunk coords, byte offset in the chunk, bytes)] covering flat bytes [offset,
    offset+n), or None past MAX_RANGES."""
    out = []
    split, row, shape, leaf = plan.split, plan.row, plan.shape, plan.leaf
    if split == 0:  # chunks of whole rows (every 1-D array): no index to unravel
        return _runs_along_first(plan, offset, n)
    head = shape[:split + 1]
    while n > 0:
        r, within = divmod(offset, row)
        index = []
        for extent in reversed(head):  # the row's index in dimensions 0..split
            r, i = divmod(r, extent)
            index.append(i)
        index.reverse()
        coords = tuple(i // c for i, c in zip(index, leaf, strict=False)) + (0,) * (len(leaf) - split - 1)
        local = [i % c for i, c in zip(index, leaf, strict=False)]
        position = 0
        for i, c in zip(local, leaf[:split + 1], strict=False):
            position = position * c + i
        stop = min((coords[split] + 1) * leaf[split], shape[split])  # this chunk's end along split
        length = min(n, (stop - index[split]) * row - within)
        out.append((coords, position * row + within, length))
        if len(out) > MAX_RANGES:
            return None
        offset, n = offset + length, n - length
    return out


def _runs_along_first(plan: Layout, offset: int, n: int) -> list[tuple[tuple, int, int]] | None:
    """runs() when only the first dimension is chunked: each chunk is one span of the flat file."""
    out, row, rows, extent = [], plan.row, plan.leaf[0], plan.shape[0]
    rest = (0,) * (len(plan.leaf) - 1)
    while n > 0:
        r, within = divmod(offset, row)
        c = r // rows
        length = min(n, (min((c + 1) * rows, extent) - r) * row - within)
        out.append(((c, *rest), (r - c * rows) * row + within, length))
        if len(out) > MAX_RANGES:
            return None
        offset, n = offset + length, n - length
    return out


class Opened:
    """Descriptors of stored files and the (fd, position, length) ranges a reply reads from them."""

    def __init__(self, version: int = 0, small: bool = True):
        self.version = version  # the array's, while the files were opened
        self.small = small  # a small read: files opened for it are kept (Descriptors)
        self.fds: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self.ranges: list[tuple[int, int, int]] = []

    def add(self, fd: int, position: int, length: int) -> None:
        """One more range; one that continues the last in the same file extends it (the inner
        chunks of a shard usually lie one after another)."""
        if self.ranges:
            last_fd, last_position, last_length = self.ranges[-1]
            if last_fd == fd and last_position + last_length == position:
                self.ranges[-1] = (fd, last_position, last_length + length)
                return
        self.ranges.append((fd, position, length))

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class Descriptors:
    """Stored files kept open between requests, so that a request opens none: opening a chunk
    beneath the store's root was half of this module's cost per request (py-spy).

    An entry is named (array namespace, array version, key): only a request that finds the
    array at that version uses it, and stored values change only by a commit, which moves the
    version (a request checks the version again after opening, open_ranges); entries of older
    versions are never found again and age out.
    A request gets a duplicate (its own to close), made under the lock, so that an eviction
    never closes a descriptor a reply reads from. At most MAX_KEPT; each pins a replaced or
    deleted value's space until it goes. Only on disk file systems (LocalStore.hold_replaced):
    elsewhere (NFS, FUSE) an unlinked file held open shows under a hidden name meanwhile."""

    def __init__(self, limit: int = MAX_KEPT):
        self.limit = limit
        self._kept: OrderedDict[tuple, tuple[int, int]] = OrderedDict()  # name -> (fd, size)
        self._lock = threading.Lock()

    def lend(self, store: Store, name: tuple) -> tuple[int, int] | None:
        """(a descriptor of the value, the caller's to close; its size), None if not stored.
        Only small reads ask (open_ranges): they come back to their chunks, a stream does not
        and would only pay for the keeping."""
        with self._lock:
            kept = self._kept.get(name)
            if kept is not None:
                self._kept.move_to_end(name)
                return os.dup(kept[0]), kept[1]
        fd = store.open_value(name[-1])
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            mine = os.dup(fd)
        except BaseException:
            os.close(fd)
            raise
        self._keep(name, fd, size)
        return mine, size

    def _keep(self, name: tuple, fd: int, size: int) -> None:
        with self._lock:
            gone = [self._kept.pop(name)] if name in self._kept else []
            self._kept[name] = (fd, size)
            while len(self._kept) > self.limit:
                gone.append(self._kept.popitem(last=False)[1])
        for old, _ in gone:
            os.close(old)


descriptors = Descriptors()


def open_ranges(array: Array, plan: Layout, offset: int, n: int) -> Opened | None:
    """The stored ranges holding flat bytes [offset, offset+n), their files opened; None when
    any part must be decoded (see the module's docstring). The caller closes what it gets."""
    pieces = runs(plan, offset, n)
    if pieces is None:
        return None
    version = array.shared.version
    if version % 2:  # a commit is replacing stored values
        return None
    opened = Opened(version, small=n < SMALL_READ)
    try:
        for coords, within, length in pieces:
            found = _locate(array, plan, coords, opened)
            if found is None:
                opened.close()
                return None
            fd, base = found
            opened.add(fd, base + within, length)
        if array.shared.version != version or any(_dirty(array, plan, c) for c, _, _ in pieces):
            opened.close()  # written or committed meanwhile
            return None
    except (OSError, ZarrfsError):
        opened.close()
        return None  # the decoding path reports it, naming the chunk
    return opened


def _locate(array: Array, plan: Layout, coords: tuple, opened: Opened) -> tuple[int, int] | None:
    """(fd, offset of the leaf chunk's bytes in that file) for stored leaf chunk `coords` (whether
    it is dirty is looked at once all are opened: open_ranges)."""
    if plan.outer is None:
        found = _open(array, array.source.key(coords), opened)
        return None if found is None or found[1] != plan.leaf_nbytes else (found[0], 0)
    shard = tuple(c * i // o for c, i, o in zip(coords, plan.leaf, plan.outer, strict=False))
    inner = tuple((c * i % o) // i for c, i, o in zip(coords, plan.leaf, plan.outer, strict=False))
    source = array.shard_view(shard).source
    if not isinstance(source, ShardChunks):  # a shard view reads its shard's inner chunks: always
        return None
    index = source.index()
    if index is None:
        return None
    start, nbytes = (int(v) for v in index[source.flat(inner)])
    if start == EMPTY or nbytes != plan.leaf_nbytes:
        return None
    found = _open(array, array.source.key(shard), opened)
    return None if found is None or found[1] < start + nbytes else (found[0], start)


def _open(array: Array, key: str, opened: Opened) -> tuple[int, int] | None:
    """(fd, size) of stored value `key`, opened once per request."""
    found = opened.fds.get(key)
    if found is not None:
        return found, opened.sizes[key]
    if not isinstance(array.source, StoreChunks):  # layout() asked for one: values of a store
        return None
    store = array.source.store
    if opened.small and store.capabilities.hold_open:  # kept open across requests
        lent = descriptors.lend(store, (array.cache_key, opened.version, key))
    else:
        fd = store.open_value(key)
        lent = None if fd is None else (fd, _size(fd))
    if lent is None:
        return None
    opened.fds[key], opened.sizes[key] = lent
    return lent


def _size(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise


def _dirty(array: Array, plan: Layout, coords: tuple) -> bool:
    """Leaf chunk `coords` has bytes in memory that are not stored yet."""
    if plan.outer is None:
        return array.has_unflushed(coords)
    shard = tuple(c * i // o for c, i, o in zip(coords, plan.leaf, plan.outer, strict=False))
    if array.has_unflushed(shard):
        return True
    inner = tuple((c * i % o) // i for c, i, o in zip(coords, plan.leaf, plan.outer, strict=False))
    return array.shard_view(shard).has_unflushed(inner)
