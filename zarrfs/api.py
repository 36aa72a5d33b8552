"""The public Python API: open one array of a hierarchy as a flat byte view."""

from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import MetadataError, UnsupportedError, ZarrfsError
from zarrfs.format.v3 import ArrayMetadata
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.local import LocalStore

DEFAULT_CACHE_BYTES = 256 << 20


class RawView:
    """An array's flat little-endian C-order bytes: read, write (mode 'r+'), flush, close."""

    def __init__(self, raw: RawFile, meta: ArrayMetadata):
        self._raw = raw
        self.metadata = meta
        self.size = raw.size

    def read(self, offset: int, size: int) -> bytes:
        return self._raw.read(offset, size)

    def write(self, offset: int, data) -> int:
        return self._raw.write(offset, data)

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        if self._raw.writable:
            self.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_raw(root: str, path: str = "", mode: str = "r", cache_bytes: int = DEFAULT_CACHE_BYTES) -> RawView:
    """Open the array at `path` (e.g. "group/temperature") of the hierarchy in directory `root`."""
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
    return RawView(RawFile(array, writable=(mode == "r+")), meta)
