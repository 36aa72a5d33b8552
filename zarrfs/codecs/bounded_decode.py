"""Decoders that never produce more than a known number of bytes, whatever the stored bytes say.

A chunk's decoded size is known from its metadata, so a stream that claims more, or a decoder
that would loop or allocate on the stream's word, is a corrupt chunk, not a reason to hang or
to run out of memory. (A chunk of variable-length elements has no such size: its bound is what
its stored bytes could decode to, MAX_RATIO.) (numcodecs' Zstd().decode() spins forever on some 27-byte frames whose
header declares no content size; its GZip decodes a bomb whole.)
"""

import bz2
import lzma
import zlib
from collections.abc import Callable
from typing import Protocol

import numcodecs
import zstandard

from zarrfs.codecs.stored_bytes import BytesLike
from zarrfs.errors import CorruptChunkError

BLOSC_HEADER = 16
READ_STEP = 1 << 22  # zstd output taken 4 MiB at a time
# The most bytes one stored byte can decode to, by numcodecs id, from each format's own limits:
# zstd's RLE block of 4 bytes makes 128 KiB; deflate makes 258 bytes from 2 bits; blosc's inner
# codecs reach zstd's at most; numcodecs' lz4 block 255 per length byte. Variable-length data has
# no size known before decoding: its chunk is bounded by what its stored bytes could hold (real
# data never exceeds that), within base.MAX_CHUNK_NBYTES. bz2 and lzma have no useful ratio.
MAX_RATIO = {"zstd": 1 << 15, "gzip": 1032, "zlib": 1032, "blosc": 1 << 15, "lz4": 256}
ZSTD_SKIPPABLE = 0x184D2A50  # the magic of a skippable frame, its low 4 bits free


def zstd_decode(data, limit: int) -> bytes:
    """The bytes of the zstd frames in `data`, at most `limit` of them. The output grows as it
    decodes: a limit is a bound, not an allocation (a variable-length chunk's is large). A first
    frame that declares more than `limit` is refused before any of it is decoded."""
    declared = _declared_size(data)
    if declared is not None and declared > limit:
        raise CorruptChunkError(f"zstd stream declares {declared} bytes, more than the {limit} bytes expected")
    parts, filled = [], 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True) as reader:
            while filled <= limit:
                part = reader.read(min(limit + 1 - filled, READ_STEP))
                if not part:
                    break
                parts.append(part)
                filled += len(part)
    except zstandard.ZstdError as e:
        raise CorruptChunkError(f"undecodable zstd stream ({e})") from None
    if filled > limit:
        raise CorruptChunkError(f"zstd stream decodes to more than the {limit} bytes expected")
    if not _whole_zstd_frames(data):  # the reader ends quietly where a cut stream does
        raise CorruptChunkError("undecodable zstd stream (truncated)")
    return b"".join(parts)


def _declared_size(data: BytesLike) -> int | None:
    """The decoded size the first frame's header declares, if it declares one."""
    try:
        size = zstandard.frame_content_size(bytes(memoryview(data)[:18]))  # a frame header is at most 18 bytes
    except zstandard.ZstdError:
        return None  # not a frame header: the decode says why
    return None if size < 0 else size


def _whole_zstd_frames(data: BytesLike) -> bool:
    """`data` ends where a frame does: each frame's header, blocks (up to the last) and checksum
    are all there (RFC 8878, 3.1). Walks the block headers only; decodes nothing."""
    view, pos = memoryview(data).cast("B"), 0
    while pos < len(view):
        if len(view) - pos < 8:
            return False
        if int.from_bytes(view[pos:pos + 4], "little") & ~0xF == ZSTD_SKIPPABLE:
            pos += 8 + int.from_bytes(view[pos + 4:pos + 8], "little")
            continue
        try:
            checksum, pos = view[pos + 4] & 4, pos + zstandard.frame_header_size(bytes(view[pos:pos + 18]))
        except zstandard.ZstdError:
            return False
        last = 0
        while not last:
            if len(view) - pos < 3:
                return False
            header = int.from_bytes(view[pos:pos + 3], "little")
            last, kind, size = header & 1, header >> 1 & 3, header >> 3
            pos += 3 + (1 if kind == 1 else size)  # an RLE block holds one byte
        pos += 4 if checksum else 0
    return pos == len(view)


def gzip_decode(data: BytesLike, limit: int) -> bytes:
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


class Decompressor(Protocol):
    """zlib's, bz2's and lzma's decompressor objects, as _stream_decode uses them."""

    @property
    def eof(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int, /) -> bytes: ...


Decoder = Callable[[BytesLike, int], BytesLike]  # (stored bytes, limit) -> at most `limit` decoded bytes


def _stream_decode(make: Callable[[], Decompressor], errors: type[Exception] | tuple[type[Exception], ...]) -> Decoder:
    """A bounded decoder for a decompressor object with decompress(data, max_length)."""
    def decode(data: BytesLike, limit: int) -> bytes:
        decoder = make()
        try:
            out = decoder.decompress(bytes(data), limit + 1)
        except errors as e:
            raise CorruptChunkError(f"undecodable stream ({e})") from None
        if len(out) > limit:
            raise CorruptChunkError(f"stream decodes to more than the {limit} bytes expected")
        if not decoder.eof:
            raise CorruptChunkError("undecodable stream (truncated)")
        return out
    return decode


def _lz4_decode(data: BytesLike, limit: int) -> BytesLike:
    """numcodecs' LZ4 frames its block with the decoded size (4 bytes, little-endian) first."""
    if len(data) < 4 or int.from_bytes(bytes(data[:4]), "little") > limit:
        raise CorruptChunkError(f"lz4 stream is short or decodes to more than the {limit} bytes expected")
    try:
        return numcodecs.LZ4().decode(data)
    except Exception as e:
        raise CorruptChunkError(f"undecodable lz4 stream ({e})") from None


def _blosc_decode(data: BytesLike, limit: int) -> BytesLike:
    check_blosc_header(data, limit)
    try:
        return numcodecs.Blosc().decode(data)
    except Exception as e:
        raise CorruptChunkError(f"undecodable blosc stream ({e})") from None


def bounded_decoder(codec_id: str) -> Decoder | None:
    """A decoder for numcodecs' codec `codec_id` that stops at a limit, None for codecs whose
    output is never larger than their input (checksums, shuffle)."""
    return {
        "zlib": _stream_decode(zlib.decompressobj, zlib.error),
        "bz2": _stream_decode(bz2.BZ2Decompressor, (OSError, ValueError)),
        "lzma": _stream_decode(lzma.LZMADecompressor, lzma.LZMAError),
        "gzip": gzip_decode,
        "zstd": zstd_decode,
        "lz4": _lz4_decode,
        "blosc": _blosc_decode,
    }.get(codec_id)
