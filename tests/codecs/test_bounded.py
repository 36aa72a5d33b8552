"""The bounded decoders (zarrfs/bounded.py) on streams cut short and on streams that decode to
more than their limit: a CorruptChunkError each time, never a short result taken for the whole."""

import numcodecs
import numpy as np
import pytest
import zstandard

from zarrfs.codecs.bounded_decode import bounded_decoder
from zarrfs.errors import CorruptChunkError

DATA = (np.arange(4096, dtype="<u4") % 251).tobytes()
CODECS = {"zlib": numcodecs.Zlib(1), "bz2": numcodecs.BZ2(1), "lzma": numcodecs.LZMA(), "gzip": numcodecs.GZip(1),
          "lz4": numcodecs.LZ4(), "blosc": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE), "zstd": numcodecs.Zstd(1)}


@pytest.mark.parametrize("codec_id", sorted(CODECS))
def test_a_stream_cut_short_is_corrupt(codec_id):
    encoded = bytes(CODECS[codec_id].encode(DATA))
    decode = bounded_decoder(codec_id)
    assert bytes(decode(encoded, len(DATA))) == DATA
    for cut in (1, len(encoded) // 2, len(encoded) - 1):
        with pytest.raises(CorruptChunkError, match="truncated|undecodable|short"):
            decode(encoded[:cut], len(DATA))


@pytest.mark.parametrize("codec_id", sorted(CODECS))
def test_a_stream_longer_than_its_limit_is_corrupt(codec_id):
    encoded = bytes(CODECS[codec_id].encode(DATA))
    with pytest.raises(CorruptChunkError, match="more than"):
        bounded_decoder(codec_id)(encoded, len(DATA) - 1)


def test_a_zstd_frame_declaring_more_than_its_limit_is_refused_before_it_is_decoded():
    bomb = zstandard.ZstdCompressor().compress(bytes(64 << 20))  # 2 KiB that would inflate to 64 MiB
    with pytest.raises(CorruptChunkError, match=f"declares {64 << 20} bytes, more than the 4096 bytes expected"):
        bounded_decoder("zstd")(bomb, 4096)


def test_zstd_frames_of_every_kind_decode_whole_and_any_cut_is_corrupt():
    """zstd's reader ends quietly where a cut stream ends: the frames are checked to be whole.
    Frames without a declared size, with checksums, of RLE and raw blocks, several in a row
    with a skippable frame between: whole, they decode; cut anywhere inside one, they do not."""
    noise = np.random.default_rng(1).bytes(200_000)
    plain = zstandard.ZstdCompressor(write_content_size=False)
    frames = [plain.compress(DATA * 20), plain.compress(bytes(300_000)), plain.compress(b""),
              zstandard.ZstdCompressor(write_checksum=True).compress(DATA),
              zstandard.ZstdCompressor(level=-100).compress(noise)]
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"hello"
    stream = frames[0] + skippable + b"".join(frames[1:])
    decode = bounded_decoder("zstd")
    assert bytes(decode(stream, 1 << 22)) == DATA * 20 + bytes(300_000) + DATA + noise
    ends = np.cumsum([len(frames[0]), len(skippable)] + [len(f) for f in frames[1:]])
    for cut in sorted({1, 5, 9, 13, *range(len(frames[0]) - 6, len(frames[0])), *(ends - 1), *(ends[:-1] + 5),
                       len(stream) // 2}):
        with pytest.raises(CorruptChunkError, match="truncated|undecodable"):
            decode(stream[:cut], 1 << 22)


def test_a_skippable_frame_before_an_unsized_one_declares_no_size():
    """zstandard says a skippable frame declares 0 bytes: taken for the chunk's decoded size,
    it would send the frame after it (which declares none) to numcodecs, which decodes without
    a bound, instead of to the bounded decoder."""
    from zarrfs.codecs.chain import zstd_content_size

    skippable = (0x184D2A50).to_bytes(4, "little") + (0).to_bytes(4, "little")
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(1 << 20))
    assert zstd_content_size(skippable + unsized) is None
    assert zstd_content_size(zstandard.ZstdCompressor().compress(bytes(100))) == 100
