"""zarrfs: a Zarr (v2 or v3) hierarchy as flat little-endian C-order binary files.

    view = zarrfs.open_raw("data.zarr", "group/temperature", mode="r+")
    view.read(offset, size); view.write(offset, data); view.flush(); view.close()
"""

from zarrfs.api import RawView, open_raw
from zarrfs.errors import (
           CorruptChunkError,
           MetadataError,
           OutOfBoundsError,
           ReadOnlyError,
           StoreError,
           UnsupportedError,
           ZarrfsError,
)

__all__ = ["open_raw", "RawView", "ZarrfsError", "MetadataError", "UnsupportedError", "CorruptChunkError",
           "OutOfBoundsError", "ReadOnlyError", "StoreError"]
