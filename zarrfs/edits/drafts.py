"""Files being written that are not an array's data yet: a new NAME.npy, a written NAME.json or
group document, and editors' temporary files.

    NpyDraft      `cp frames.npy GROUP/`: the header gives shape and dtype, then the data goes
                  through the normal write path into a node staged beside its name (begin_node);
                  the array is published (commit_node) when the file is closed complete. Until
                  then only NAME.npy is seen, growing; an incomplete copy is discarded.
    TextDraft     JSON written whole, applied when the file is closed: a new sidecar makes an
                  array, a written sidecar or group document replaces attributes. Editors'
                  temporary files are TextDrafts applied only when renamed over NAME.json.

Each draft is shown at its path while it lives (HierarchyEdits keeps them by path).
"""

import io
import logging
from typing import Callable

import numpy as np

from zarrfs.edits.new_nodes import InvalidNodeError, check, npy_documents
from zarrfs.engine.array import open_array
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import OutOfBoundsError, ZarrfsError
from zarrfs.views.prefixed_file import PrefixedFile

log = logging.getLogger(__name__)

MAX_TEXT = 16 << 20  # bytes of a JSON document or an editor's temporary file, kept in memory
MAX_NPY_HEADER = 1 << 20


class TextDraft:
    """Bytes in memory; `apply(bytes)` runs at close when they were written (None: kept, for a
    rename to apply them)."""

    def __init__(self, path: str, content: bytes, apply: Callable[[bytes], None] | None):
        self.path, self.content, self.apply = path, bytearray(content), apply
        self.handles, self.dirty, self.committed = 0, False, False

    @property
    def size(self) -> int:
        return len(self.content)

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self.content[offset:offset + size])

    def write(self, offset: int, data) -> int:
        if offset + len(data) > MAX_TEXT:
            raise OutOfBoundsError(f"{self.path}: documents written through the mount are at most {MAX_TEXT} bytes")
        if offset > len(self.content):
            self.content.extend(b"\0" * (offset - len(self.content)))
        self.content[offset:offset + len(data)] = data
        self.dirty = True
        return len(data)

    def truncate(self, length: int) -> None:
        if length > MAX_TEXT:
            raise OutOfBoundsError(f"{self.path}: documents written through the mount are at most {MAX_TEXT} bytes")
        del self.content[length:]
        self.content.extend(b"\0" * (length - len(self.content)))
        self.dirty = True

    def close(self) -> None:
        """At close(): apply what was written; the error (EINVAL naming the field) fails the close."""
        if self.dirty and self.apply is not None:
            self.dirty = False
            self.apply(bytes(self.content))
            self.committed = True

    def release(self) -> None:
        pass


class NpyDraft:
    """A new array, made from an .npy file copied in."""

    def __init__(self, path: str, store_path: str, editor, cache, dirty_limit: int):
        self.path, self.store_path, self.editor = path, store_path, editor
        self.cache, self.dirty_limit = cache, dirty_limit
        self.head = bytearray()  # the bytes written before the header is complete
        self.file: PrefixedFile | None = None
        self.staging = self.documents = None
        self.extent = 0  # bytes from 0 that the file shows: the furthest write
        self.handles, self.committed, self.discarded = 0, False, False

    @property
    def size(self) -> int:
        return self.extent

    @property
    def complete(self) -> bool:
        return self.file is not None and self.extent == self.file.size

    def read(self, offset: int, size: int) -> bytes:
        if self.file is None:
            return bytes(self.head[offset:offset + size])
        return self.file.read(offset, max(0, min(size, self.extent - offset)))

    def write(self, offset: int, data) -> int:
        self._check_open()
        if self.file is None:
            if offset + len(data) > MAX_NPY_HEADER:
                raise InvalidNodeError(f"{self.path}: no .npy header in the first {MAX_NPY_HEADER} bytes")
            self.head[len(self.head):offset] = bytes(max(0, offset - len(self.head)))
            self.head[offset:offset + len(data)] = data
            self.extent = max(self.extent, offset + len(data))
            self._start()
            return len(data)
        if offset + len(data) > self.file.size:
            raise OutOfBoundsError(f"{self.path}: writes past the {self.file.size} bytes its header describes")
        written = self.file.write(offset, data)
        self.extent = max(self.extent, offset + written)
        if self.file.raw.array.shared.dirty_nbytes > self.dirty_limit // 4:
            self.file.raw.flush()  # memory stays bounded: the writer encodes as it goes
        return written

    def _start(self) -> None:
        """Parse the header once it is all written; then stage the array and replay the bytes."""
        header = _header_length(bytes(self.head))
        if header is None or len(self.head) < header:
            return
        stream = io.BytesIO(bytes(self.head[:header]))
        try:
            version = np.lib.format.read_magic(stream)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(stream)
        except (ValueError, SyntaxError, TypeError) as e:
            raise InvalidNodeError(f"{self.path}: not an .npy header: {e}") from None
        self.documents = npy_documents(dtype, shape, fortran, self.editor.zarr_format)
        meta = check(self.documents, f"{self.path}: .npy header")
        self.staging = self.editor.begin(self.store_path)
        raw = RawFile(open_array(self.editor.store, self.staging, meta, self.cache), writable=True)
        self.file = PrefixedFile(raw, bytes(self.head[:header]), self.path)
        head, self.head = bytes(self.head), bytearray()
        if len(head) > header:
            self.file.write(header, memoryview(head)[header:])

    def truncate(self, length: int) -> None:
        """O_TRUNC at open, and a copy that ends in a hole (cp --sparse), are the only truncates."""
        self._check_open()
        limit = self.file.size if self.file is not None else MAX_NPY_HEADER
        if length > limit or length < self.extent and length:
            raise OutOfBoundsError(f"{self.path}: truncate to {length} bytes refused (the header says {limit})")
        self.extent = max(self.extent, length)

    def close(self) -> None:
        """At close(): once every byte the header promises is written, store the data and
        publish the array whole."""
        if self.committed or self.discarded or not self.complete:
            return
        self.file.raw.flush()
        self.editor.commit(self.staging, self.store_path, self.documents)
        self.committed = True

    def release(self) -> None:
        """The last handle is gone: an incomplete copy leaves nothing."""
        if self.committed or self.discarded:
            return
        self.discard()
        log.warning("%s: copy incomplete (%d bytes written%s): no array was made", self.path, self.extent,
                    f" of {self.file.size}" if self.file is not None else ", no complete .npy header")

    def discard(self) -> None:
        self.discarded = True
        if self.staging is not None:
            self.editor.store.abort_node(self.staging)

    def _check_open(self) -> None:
        if self.committed or self.discarded:
            raise ZarrfsError(f"{self.path}: the array is made already; write to its files")


def _header_length(head: bytes) -> int | None:
    """The length of an .npy header (magic, version, length field, header text), None until
    the length field is written."""
    if len(head) < 10:
        return None
    if head[:6] != b"\x93NUMPY":
        raise InvalidNodeError("not an .npy file: NAME.npy must start with the .npy magic string")
    if head[6] == 1:
        return 10 + int.from_bytes(head[8:10], "little")
    if len(head) < 12:
        return None
    return 12 + int.from_bytes(head[8:12], "little")
