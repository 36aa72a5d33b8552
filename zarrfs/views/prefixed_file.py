"""A data view that shows a header before the array's flat bytes (NAME.npy, NAME.tif): the same
RawFile, shifted by the header's length. Writes may repeat the header's bytes (a `cp` of a
same-shape .npy) but never change them. The header is bytes, or bytes-like (views/tiff.py)."""

import numpy as np

from zarrfs.engine.buffers import malloced
from zarrfs.engine.flat_file import RawFile
from zarrfs.errors import HeaderWriteError


class PrefixedFile:
    def __init__(self, raw: RawFile, header: bytes, name: str):
        self.raw, self.header, self.name = raw, header, name
        self.size = len(header) + raw.size

    def read(self, offset: int, size: int) -> bytes:
        out = np.empty(max(0, min(size, self.size - offset)), "u1")
        return out[:self.read_into(offset, out)].tobytes()

    def read_into(self, offset: int, out: np.ndarray) -> int:
        """Fill the uint8 array `out` from `offset`; returns the bytes filled (short at the end)."""
        n = 0
        if 0 <= offset < len(self.header):
            part = self.header[offset:offset + len(out)]
            out[:len(part)] = np.frombuffer(part, "u1")
            n = len(part)
        if n < len(out):
            n += self.raw.read_into(offset + n - len(self.header), out[n:])
        return n

    def read_malloced(self, offset: int, size: int) -> tuple[int, int]:
        """(address, count) of the bytes from `offset` in memory from malloc (replies.py): past the
        header, the array's own answer, so a chunk decoded ahead is sent as it is."""
        if offset >= len(self.header):
            return self.raw.read_malloced(offset - len(self.header), size)
        return malloced(max(0, min(size, self.size - offset)), lambda out: self.read_into(offset, out))

    def stored_ranges(self, offset: int, size: int):
        """Past the header, the stored files' ranges of the array's bytes, as RawFile.stored_ranges
        gives them (engine/stored_as_is.py); None where the header is read."""
        if offset < len(self.header):
            return None
        return self.raw.stored_ranges(offset - len(self.header), size)

    def write(self, offset: int, data) -> int:
        data = memoryview(data).cast("B")
        skip = max(0, min(len(self.header) - offset, len(data)))
        if skip and bytes(data[:skip]) != self.header[offset:offset + skip]:
            raise HeaderWriteError(f"{self.name}: a write of {len(data)} bytes at {offset} would change its "
                                   f"{len(self.header)}-byte header, which follows the array's metadata")
        rest = data[skip:]
        return skip + (self.raw.write(offset + skip - len(self.header), rest) if len(rest) else 0)
