"""The public Python API: open one array of a hierarchy as a flat byte view."""

from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.engine.write_bound import DIRTY_LIMIT, AfterWrite, WriteBound
from zarrfs.errors import MetadataError, UnsupportedError, ZarrfsError
from zarrfs.format.v3 import ArrayMetadata
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.local import LocalStore

DEFAULT_CACHE_BYTES = 256 << 20


class RawView:
    """An array's flat little-endian C-order bytes: read, write (mode 'r+'), flush, close."""

    def __init__(self, raw: RawFile, meta: ArrayMetadata, bound: WriteBound | None = None):
        self._raw = raw
        self._bound = bound or WriteBound()  # as a mount's: written bytes held in memory stay below dirty_limit
        self.metadata = meta
        self.size = raw.size

    def read(self, offset: int, size: int) -> bytes:
        return self._raw.read(offset, size)

    def write(self, offset: int, data) -> int:
        """`data` written at `offset`; past the dirty limit the write waits for them to be stored."""
        written = self._raw.write(offset, data)
        if self._bound.after_write(self._raw.array.shared.dirty_nbytes) is AfterWrite.WRITE_BACK:
            self._raw.flush()  # no background write-back here: the early start is the mount's
        return written

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        if self._raw.writable:
            self.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_raw(root: str, path: str = "", mode: str = "r", cache_bytes: int = DEFAULT_CACHE_BYTES,
             dirty_limit: int = DIRTY_LIMIT) -> RawView:
    """Open the array at `path` (e.g. "group/temperature") of the hierarchy in directory `root`.
    Written bytes are stored at flush() and close(), and whenever more than `dirty_limit` of them
    are held in memory (as a mount's dirty_size)."""
    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', not {mode!r}")
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
    array = open_array(store, path, meta, ChunkCache(cache_bytes))
    return RawView(RawFile(array, writable=(mode == "r+")), meta, WriteBound(dirty_limit))
