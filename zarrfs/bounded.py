"""Decoders that never produce more than a known number of bytes, whatever the stored bytes say.

A chunk's decoded size is known from its metadata, so a stream that claims more, or a decoder
that would loop or allocate on the stream's word, is a corrupt chunk, not a reason to hang or
to run out of memory. (numcodecs' Zstd().decode() spins forever on some 27-byte frames whose
header declares no content size; its GZip decodes a bomb whole.)
"""

import zlib

import zstandard

from .errors import CorruptChunkError

BLOSC_HEADER = 16


def zstd_decode(data, limit: int) -> bytearray:
    """The bytes of the zstd frames in `data`, at most `limit` of them."""
    out = bytearray(limit + 1)  # one more: a stream that fills it is too long
    view, filled = memoryview(out), 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True) as reader:
            while filled <= limit:
                n = reader.readinto(view[filled:])
                if not n:
                    break
                filled += n
    except zstandard.ZstdError as e:
        raise CorruptChunkError(f"undecodable zstd stream ({e})") from None
    finally:
        view.release()
    if filled > limit:
        raise CorruptChunkError(f"zstd stream decodes to more than the {limit} bytes expected")
    del out[filled:]
    return out


def gzip_decode(data, limit: int) -> bytes:
    """The bytes of the gzip members in `data`, at most `limit` of them."""
    parts, total, rest = [], 0, bytes(data)
    try:
        while rest:
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
            part = decoder.decompress(rest, limit - total + 1)
            total += len(part)
            parts.append(part)
            if total > limit or decoder.unconsumed_tail:
                raise CorruptChunkError(f"gzip stream decodes to more than the {limit} bytes expected")
            if not decoder.eof:
                raise CorruptChunkError("undecodable gzip stream (truncated)")
            rest = decoder.unused_data
    except zlib.error as e:
        raise CorruptChunkError(f"undecodable gzip stream ({e})") from None
    return b"".join(parts)


def check_blosc_header(data, limit: int) -> None:
    """Refuse a blosc frame whose header disagrees with its length or promises more than `limit`
    bytes, before the decoder allocates or reads on its word."""
    if len(data) < BLOSC_HEADER:
        raise CorruptChunkError(f"undecodable blosc stream ({len(data)} bytes, shorter than its header)")
    header = bytes(data[:BLOSC_HEADER])
    nbytes, cbytes = int.from_bytes(header[4:8], "little"), int.from_bytes(header[12:16], "little")
    if cbytes != len(data):
        raise CorruptChunkError(f"undecodable blosc stream (header says {cbytes} bytes, chunk has {len(data)})")
    if nbytes > limit:
        raise CorruptChunkError(f"blosc stream decodes to {nbytes} bytes, more than the {limit} bytes expected")
