"""The public Python API: open one array of a hierarchy as a flat byte view."""

from zarrfs.engine import growth
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.consolidated_copy import copy_of
from zarrfs.engine.flat_file import RawFile
from zarrfs.engine.write_bound import DIRTY_LIMIT, AfterWrite, WriteBound
from zarrfs.errors import MetadataError, UnsupportedError, ZarrfsError
from zarrfs.format.v3 import ArrayMetadata, GroupMetadata
from zarrfs.fs import growable
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.local import LocalStore

DEFAULT_CACHE_BYTES = 256 << 20


class RawView:
    """An array's flat little-endian C-order bytes: read, write (mode 'r+'), flush, close.
    `grows`: writes past the end append records along dimension 0, as NAME.bin's do on a mount
    (engine/growth.py; docs/writing.md, "Appending")."""

    def __init__(self, raw: RawFile, meta: ArrayMetadata, store: LocalStore, bound: WriteBound | None = None,
                 grows: bool = False):
        self._raw = raw
        self._store = store  # opened for this view alone: closed with it
        self._bound = bound or WriteBound()  # as a mount's: written bytes held in memory stay below dirty_limit
        self.metadata = meta  # as opened: `shape` follows a growth
        self.grows = grows

    @property
    def size(self) -> int:
        """Bytes of the file: the array's, and those of a partial record appended (growth.py)."""
        return self._raw.file_size

    @property
    def shape(self) -> tuple[int, ...]:
        return self._raw.array.shape

    def read(self, offset: int, size: int) -> bytes:
        return self._raw.read(offset, size)

    def write(self, offset: int, data) -> int:
        """`data` written at `offset`; past the dirty limit the write waits for them to be stored.
        Past the end: the records it completes appended when the array grows (a partial one
        pending until a write completes it), else OutOfBoundsError."""
        written = self._raw.write(offset, data, grow=self.grows)
        if self._bound.after_write(self._raw.array.shared.dirty_nbytes) is AfterWrite.WRITE_BACK:
            self._raw.flush()  # no background write-back here: the early start is the mount's
        return written

    def append(self, data) -> int:
        """`data` written at the end of the file (as O_APPEND)."""
        return self.write(self.size, data)

    def flush(self) -> None:
        """Store what is written, the new shape with it (the mount's write-back). A partial record
        is not stored: ZarrfsError saying so, once the whole ones are."""
        self._raw.flush()
        if self._raw.pending:
            raise ZarrfsError(f"{self._raw.array.shared.name}: the last {len(self._raw.pending)} bytes written are a "
                              f"partial record (records are {growth.record_nbytes(self._raw.array)} bytes) and cannot "
                              f"be stored until a write completes it")

    def close(self) -> None:
        """Written bytes stored, then the store's directory let go: no read or write after it.
        A flush that fails (a partial record) keeps the view open, for the write that completes it."""
        if self._raw.writable:
            self.flush()
        self._store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_raw(root: str, path: str = "", mode: str = "r", cache_bytes: int = DEFAULT_CACHE_BYTES,
             dirty_limit: int = DIRTY_LIMIT, grow: str = growable.MARKED) -> RawView:
    """Open the array at `path` (e.g. "group/temperature") of the hierarchy in directory `root`.
    Written bytes are stored at flush() and close(), and whenever more than `dirty_limit` of them
    are held in memory (as a mount's dirty_size). `grow`: which arrays grow along dimension 0 by
    writes past the end, as a mount's -o grow (fs/growable.py)."""
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', not {mode!r}")
    if grow not in growable.CHOICES:
        raise ValueError(f"grow must be one of {', '.join(growable.CHOICES)}, not {grow!r}")
    path = path.strip("/")
    store = LocalStore(root, read_only=(mode == "r"))
    meta = read_metadata(store, path)
    if meta is None:
        raise ZarrfsError(f"{root}: no Zarr node (zarr.json, .zarray or .zgroup) at {path or '/'!r}")
    if not isinstance(meta, ArrayMetadata):
        raise MetadataError(f"{path or '/'}: is a group, not an array")
    if meta.data_type.numpy.kind == "O":
        raise UnsupportedError(f"{path or '/'}: {meta.data_type.name} elements are variable-length: there is no flat "
                               f"view (a mount shows the array as text, NAME.txt)")
    if mode == "r" or grow == growable.NONE:
        array = open_array(store, path, meta, ChunkCache(cache_bytes))
        return RawView(RawFile(array, writable=(mode == "r+")), meta, store, WriteBound(dirty_limit))
    array = open_array(store, path, meta, ChunkCache(cache_bytes), copy_of(store))  # a growth's copy follows
    return RawView(RawFile(array, writable=True), meta, store, WriteBound(dirty_limit),
                   growable.grows(grow, path, meta, lambda at: _metadata_at(store, at), array))


def _metadata_at(store: LocalStore, path: str) -> ArrayMetadata | GroupMetadata | None:
    """The node's metadata at `path` (the group defining an array's dimensions), None where
    there is none or it cannot be read: the array is then not marked by it."""
    try:
        return read_metadata(store, path)
    except ZarrfsError:
        return None
