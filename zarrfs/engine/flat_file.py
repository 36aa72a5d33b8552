"""RawFile: an array as one flat file of little-endian C-order bytes.

Byte offsets map to element spans, element spans to at most 2*ndim-1 boxes; elements cut by
the ends of a write are completed from their stored bytes.
"""

import functools
import logging
import math
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack

import numpy as np

from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.engine import growth, read_budget, stored_as_is
from zarrfs.engine.array import Array
from zarrfs.engine.buffers import malloced
from zarrfs.engine.chunk_sources import ShapeChangedError
from zarrfs.engine.decode_ahead import Streams
from zarrfs.errors import InvalidValueError, OutOfBoundsError, ReadOnlyError
from zarrfs.geometry import Box, box_shape, c_order_boxes, chunks_spanned

log = logging.getLogger(__name__)
MAX_CODE_POINT = 0x10FFFF
SPARSE_READ = 64 << 10  # reads smaller than this are random ones: the kernel's read-ahead sends more


class RawFile:
    def __init__(self, array: Array, writable: bool = False):
        self.array = array
        self.writable = writable
        self.itemsize = array.dtype.itemsize
        # (bytes of the array's elements: whole records; appended bytes of a record not yet
        # complete, after them: growth.py). One tuple, replaced whole: an append that completes
        # a record moves its bytes from one to the other, and a reader without the lock sees
        # both as of one moment (a size read between would pass the end, and a reader's page
        # past it be zero-filled)
        self._ends: tuple[int, bytes] = (math.prod(array.shape) * self.itemsize, b"")
        self.streams = Streams()  # sequential readers, whose next chunks are decoded ahead
        self.rebases = 0  # times the records appended here moved after another writer's (flush)

    @property
    def size(self) -> int:
        """Bytes of the array's elements: whole records."""
        return self._ends[0]

    @property
    def pending(self) -> bytes:
        """Appended bytes of a record not yet complete, after `size` (growth.py)."""
        return self._ends[1]

    @property
    def file_size(self) -> int:
        """The file's size as a writer appending to it sees it: whole records and a partial one.
        Taken without the lock, which writes hold while they decode edge chunks (a stat of the
        file would wait for the store)."""
        size, pending = self._ends
        return size + len(pending)

    def take_pending(self) -> bytes:
        """The bytes of a partial record, dropped from the file (saved for recovery instead)."""
        with self.array.shared.lock:
            size, pending = self._ends
            self._ends = (size, b"")
        return pending

    def read(self, offset: int, size: int) -> bytes:
        """Bytes [offset, offset+size), short at the end of the file, b'' past it."""
        return self.read_array(offset, size).tobytes()

    def read_array(self, offset: int, size: int) -> np.ndarray:
        """The same bytes as a uint8 array."""
        out = np.empty(max(0, min(size, self.file_size - offset)), "u1")
        return out[:self.read_into(offset, out)]

    def read_into(self, offset: int, out: np.ndarray) -> int:
        """Fill the uint8 array `out` from `offset`; returns the bytes filled (short at the end)."""
        if self.pending and offset + len(out) > self.size:
            return self._read_with_pending(offset, out)
        n = min(len(out), self.size - offset)
        if n <= 0 or offset < 0:
            return 0
        streaming = n >= SPARSE_READ and self._decode_ahead(offset, offset + n)
        return self._fill(offset, out[:n], streaming=streaming)

    def _read_with_pending(self, offset: int, out: np.ndarray) -> int:
        """A read that reaches the partial record a writer is appending: the records, then the
        bytes written of it (a reader of the file sees what was written, as of any file)."""
        with self.array.shared.lock:  # an append moves bytes from pending into the records
            size, pending = self.size, self.pending
            n = max(0, min(len(out), size + len(pending) - offset))
            inside = max(0, min(n, size - offset))
            if offset < 0 or not n:
                return 0
            if inside:
                self._fill(offset, out[:inside])
            start = max(0, offset - size)
            out[inside:n] = np.frombuffer(pending, "u1")[start:start + n - inside]
        return int(n)

    def read_malloced(self, offset: int, size: int) -> tuple[int, int]:
        """(address, count) of the bytes from `offset` in memory from malloc, the caller's to
        free (replies.py): a whole chunk decoded ahead as it is, else decoded into new memory."""
        if self.pending and offset + size > self.size:
            n = max(0, min(size, self.file_size - offset))
            return malloced(n, lambda out: self.read_into(offset, out))
        n = max(0, min(size, self.size - offset))
        boxes = None  # of whole elements, found once for both ways of answering
        streaming = False
        if n >= SPARSE_READ and offset >= 0:
            streaming = self._decode_ahead(offset, offset + n)
            if offset % self.itemsize == 0 and n % self.itemsize == 0:
                boxes = c_order_boxes(self.array.shape, offset // self.itemsize, (offset + n) // self.itemsize)
                found = self._whole_chunk_ahead(boxes)
                if found is not None:
                    return found, n
        return malloced(n, lambda out: self._fill(offset, out, boxes, streaming) if n and offset >= 0 else 0)

    @functools.cached_property
    def _stored_layout(self) -> stored_as_is.Layout | None:
        return stored_as_is.layout(self.array)

    def stored_ranges(self, offset: int, size: int) -> stored_as_is.Opened | None:
        """Descriptors and ranges of stored files holding bytes [offset, offset+size) as they
        are (stored_as_is.py), the caller's to close; None when they must be decoded."""
        plan = self._stored_layout
        n = min(size, self.size - offset)
        if plan is None or n <= 0 or offset < 0 or self.pending and offset + size > self.size:
            return None
        opened = stored_as_is.open_ranges(self.array, plan, offset, n)
        if opened is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("read %s bytes %d-%d from %d stored ranges as they are", self.array.shared.name, offset,
                      offset + n, len(opened.ranges))
        return opened

    def _whole_chunk_ahead(self, boxes: list) -> int | None:
        """The address of the chunk decoded ahead whose bytes are exactly those of `boxes`."""
        found = self.array.whole_chunk(boxes[0]) if len(boxes) == 1 else None
        if found is None:
            return None
        view, coords = found
        taken = view.take_ahead(coords)
        return None if taken is None else taken[0]

    def _fill(self, offset: int, out: np.ndarray, boxes: list | None = None, streaming: bool = False) -> int:
        """`streaming`: the read continues a stream (read_budget.streaming)."""
        n = len(out)
        first, last = offset // self.itemsize, -(-(offset + n) // self.itemsize)
        with self._budget(offset, n, lambda: c_order_boxes(self.array.shape, first, last), streaming):
            sparse = n < SPARSE_READ
            if offset % self.itemsize == 0 and n % self.itemsize == 0:  # decode straight into `out`
                self._read_elements(first, last, out.view(self.array.dtype), sparse, boxes)
            else:
                elements = np.empty(last - first, self.array.dtype)
                self._read_elements(first, last, elements, sparse)
                skip = offset - first * self.itemsize
                out[:n] = elements.view("u1")[skip:skip + n]
        return n

    def read_boxes_into(self, pieces: list[tuple[Box, np.ndarray]]) -> None:
        """Fill each `out` (its box's shape, the array's type) with the elements of its `box`,
        bounded as one read of the file is (one chunk count, one deadline, for all of them): for
        a view whose bytes are boxes, not byte ranges (the TIFF tiles one read of
        IMAGE.ome.tif meets). Never a sparse read, however small: a reader probing a tile's
        first bytes reads the tile next, and finds its chunks decoded whole in the cache
        (Bio-Formats reads 16 bytes, then the tile: as a sparse read, the first chunk was
        decoded twice)."""
        if not pieces:
            return
        start = int(np.ravel_multi_index([s.start for s in pieces[0][0]], self.array.shape)) * self.itemsize
        with self._budget(start, sum(out.nbytes for _, out in pieces), lambda: [box for box, _ in pieces]):
            for box, out in pieces:
                self.array.read_into(box, out)

    def _budget(self, offset: int, n: int, boxes: Callable[[], list[Box]],
                streaming: bool = False) -> AbstractContextManager[None]:
        """The bounds of one read of bytes [offset, offset + n), the elements of boxes(), where
        each chunk is a round trip (read_budget.py): refused if it meets too many chunks, and a
        deadline for its fetches; `streaming`: it continues a stream."""
        capabilities = self.array.source.capabilities
        if capabilities.remote:
            grid = self.array.leaf_grid
            chunks = sum(chunks_spanned([box], grid) for box in boxes())
            read_budget.check_chunks(self.array.shared.name, offset, n, chunks)
        return read_budget.reading(self.array.shared.name, offset, n, capabilities.read_deadline, streaming=streaming)

    def _decode_ahead(self, offset: int, end: int) -> bool:
        """A read that continues a stream starts the decoding of the chunks after it (decode_ahead.py),
        one chunk's bytes at a time from where the stream's last walk stopped. Whether it does
        continue one."""
        ahead = self.array.shared.cache.ahead
        stream = self.streams.follow(offset, end)
        if stream is None:
            return False
        # walked only when a quarter of the budget is free: a walk costs Python, a submit little
        if not ahead.room(max(self.array.leaf_nbytes, ahead.max_bytes // 4)):
            return True
        reached, started = stream
        if ahead.left_behind():  # back after a pause: what was decoded for it is not a gone reader's
            for box in c_order_boxes(self.array.shape, offset // self.itemsize, -(-max(started, end) // self.itemsize)):
                self.array.keep_ahead(box)
        step = self.array.leaf_nbytes
        # at most MAX_READ_CHUNKS chunks a walk: tiny chunks would make the window millions of them
        position = max(reached, started)
        stop = min(self.size, reached + ahead.max_bytes, position + read_budget.MAX_READ_CHUNKS * step)
        if self.array.reads_indexes_ahead:  # the whole window's shards, before their chunks
            for box in c_order_boxes(self.array.shape, position // self.itemsize, -(-stop // self.itemsize)):
                self.array.read_indexes_ahead(box)
        while position < stop:
            until = min(stop, position + step)
            boxes = c_order_boxes(self.array.shape, position // self.itemsize, -(-until // self.itemsize))
            if not all(self.array.decode_ahead(box) for box in boxes):
                break  # no room: the next walk starts again at this step
            position = until
        self.streams.decoded_ahead(reached, position)
        return True

    def _read_elements(self, first: int, last: int, out: np.ndarray, sparse: bool = False,
                       boxes: list | None = None) -> None:
        """The boxes of a span share chunks (a partial row, whole rows, a partial row): a small
        read of several boxes decodes a chunk whole, once, for all of them (see Array.read_into).
        `boxes`: the span's boxes when the caller has them already."""
        pos = 0
        boxes = c_order_boxes(self.array.shape, first, last) if boxes is None else boxes
        whole = sparse and len(boxes) > 1
        if whole:
            self.array.keep_room(boxes)
        for box in boxes:
            n = math.prod(box_shape(box))
            self.array.read_into(box, out[pos:pos + n].reshape(box_shape(box)), sparse, whole)
            pos += n

    def write(self, offset: int, data: BytesLike, grow: bool = False) -> int:
        """Write bytes at `offset`. Passing the end raises, writing nothing; unless `grow`: then
        the write appends records along dimension 0 (growth.py), and keeps a partial one pending."""
        if not self.writable:
            raise ReadOnlyError(f"{self.array.shared.name}: opened read-only")
        data = memoryview(data).cast("B")
        if grow and offset >= 0 and offset + len(data) > self.size:
            return self._append(offset, data)
        if offset < 0 or offset + len(data) > self.size:
            raise OutOfBoundsError(f"{self.array.shared.name}: write of {len(data)} bytes at {offset} passes the "
                                   f"end of the {self.size}-byte file")
        return self._write_bytes(offset, data)

    def append(self, data: BytesLike) -> tuple[int, int]:
        """`data` written at the end of the file, partial record included (O_APPEND):
        (where it was written, how many bytes)."""
        with self.array.shared.lock:
            at = self.file_size
            return at, self.write(at, data, grow=True)

    def _append(self, offset: int, data: memoryview) -> int:
        """A write past the end: the part inside, then the whole records it completes appended
        (dimension 0 grows, stored with the next write-back), the rest of a record held pending.
        A write that starts past the pending bytes would leave a hole: refused."""
        record = growth.record_nbytes(self.array)
        with self.array.shared.lock:  # appends, and reads of the pending bytes, one at a time
            size = self.size
            if offset > size + len(self.pending):
                raise OutOfBoundsError(f"{self.array.shared.name}: a write at {offset} would leave a hole after the "
                                       f"{self.file_size}-byte file (appends start at or before its end)")
            inside = max(0, size - offset)
            if inside:
                self._write_bytes(offset, data[:inside])
            if self.pending:  # joined with the partial record's bytes (overwriting those it covers)
                joined = bytearray(self.pending)
                start = offset + inside - size
                joined[start:start + len(data) - inside] = data[inside:]
                tail = memoryview(joined)
            else:  # the caller's bytes as they are
                tail = data[inside:]
            whole = len(tail) - len(tail) % record
            if whole:
                self._grow(size, tail[:whole], whole // record)
                self.resized(bytes(tail[whole:]))
            else:
                self._ends = (size, bytes(tail))
        return len(data)

    def _grow(self, size: int, records: memoryview, count: int) -> None:
        """`count` records appended after the `size` bytes of the array."""
        old = self.array.shape
        self.array.resize((old[0] + count, *old[1:]))
        try:
            self._write_bytes(size, records)
        except BaseException:  # nothing was written (writes check everything first): the shape goes back
            self.array.resize(old)
            raise

    def truncate(self, length: int) -> None:
        """The file becomes `length` bytes, a whole number of records (growth.truncate), stored
        by the caller's next flush. Pending bytes of a partial record are dropped. Under the
        append lock, as an append: one racing it would write rows for the old end (a grow's fill
        of the edge chunk then covering them), or have its pending bytes dropped by resized()."""
        record = growth.record_nbytes(self.array)
        with self.array.shared.lock:
            self.take_pending()
            growth.truncate(self.array, length // record)
            self.resized()

    def resized(self, pending: bytes = b"") -> None:
        """The array's shape may have changed: the file's size and stored layout follow, and
        `pending` is the partial record after its whole ones (in the same assignment)."""
        self._ends = (math.prod(self.array.shape) * self.itemsize, pending)
        self.__dict__.pop("_stored_layout", None)

    def _write_bytes(self, offset: int, data: memoryview) -> int:
        if not data:
            return 0
        end = offset + len(data)
        first, last = offset // self.itemsize, -(-end // self.itemsize)
        if offset % self.itemsize or end % self.itemsize:
            elements = self._edge_elements(first, last, offset, end)
            skip = offset - first * self.itemsize
            elements.view("u1")[skip:skip + len(data)] = np.frombuffer(data, "u1")
        else:  # whole elements: use the caller's bytes as they are (the chunks copy them)
            elements = np.frombuffer(data, self.array.dtype)
        if elements.dtype.kind == "b":  # a bool is one byte, 0 or 1
            elements = elements.view("u1") != 0
        if elements.dtype.kind == "U" and (elements.view("<u4") > MAX_CODE_POINT).any():  # numpy cannot hold it
            raise InvalidValueError(f"{self.array.shared.name}: write at {offset}: not UTF-32 (a code point past "
                                    f"U+10FFFF)")
        self.array.spec.data_type.check_values(elements, f"{self.array.shared.name}: write at {offset}")
        pieces, pos = [], 0
        for box in c_order_boxes(self.array.shape, first, last):
            n = math.prod(box_shape(box))
            pieces.append((box, elements[pos:pos + n].reshape(box_shape(box))))
            pos += n
        self.array.write_many(pieces)
        return len(data)

    def _edge_elements(self, first: int, last: int, offset: int, end: int) -> np.ndarray:
        """A buffer for elements [first, last) whose partly overwritten ends hold their stored bytes."""
        elements = np.empty(last - first, self.array.dtype)
        if offset % self.itemsize:
            self._read_elements(first, first + 1, elements[:1])
        if end % self.itemsize:
            self._read_elements(last - 1, last, elements[-1:])
        return elements

    def flush(self, whole_only: bool = False) -> None:
        """Store what is written. When another writer appended to the stored array meanwhile,
        the records appended here move after its records (growth.rebase) and the write-back is
        done again, at most growth.REBASES times; `rebases` counts the moves. From the first
        move on, the array's document is held (growth.held: on a local store, other zarrfs
        processes store no new shape until this one's is stored), so that the flush after a
        move is not beaten again by a writer that appends as often."""
        with ExitStack() as held:
            for attempt in range(growth.REBASES + 1):
                try:
                    return self.array.flush(whole_only)
                except ShapeChangedError as e:
                    if attempt == growth.REBASES:
                        raise
                    if attempt == 0:
                        held.enter_context(growth.held(self.array))
                    self._rebase(e)

    def _rebase(self, e: ShapeChangedError) -> None:
        """Move the records appended here after those another writer stored (growth.rebase),
        unless another flush of this array (the background write-back, a second fsync) stored
        or moved them since `e` was raised: its shape is then not the one `e` checked."""
        shared = self.array.shared
        with shared.flush_lock, shared.lock:  # no batch in flight; appends wait
            if e.expected is not None and self.array.write_back.stored_shape != e.expected:
                return  # flushed again as it is
            before = self.array.write_back.stored_shape[0]
            growth.rebase(self.array, e)
            self.resized(self.pending)
            self.rebases += 1
            log.info("%s: another writer appended records %d to %d: those appended here follow them",
                     shared.name, before, self.array.write_back.stored_shape[0])
