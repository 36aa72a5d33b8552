"""Bad stored data fails the read that touches it, names the chunk, and never becomes wrong bytes."""

import json

import numcodecs
import numpy as np
import pytest

import zarrfs
from helpers import array_doc, sharding, write_doc
from zarrfs.errors import CorruptChunkError, MetadataError, UnsupportedError

BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def make(tmp_path, codecs, chunk_shape=(4,)):
    write_doc(tmp_path, "g/a", array_doc([8], "int32", chunk_shape, codecs))
    with zarrfs.open_raw(str(tmp_path), "g/a", mode="r+") as view:
        view.write(0, np.arange(1, 9, dtype="<i4").tobytes())
    return tmp_path / "g" / "a" / "c"


def expect_corrupt(tmp_path, pattern, offset=0):
    view = zarrfs.open_raw(str(tmp_path), "g/a")
    with pytest.raises(CorruptChunkError, match=pattern) as info:
        view.read(offset, 4)
    assert "g/a" in str(info.value)
    return view


def flip(path, position):
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def test_crc32c_mismatch_fails_only_that_chunk(tmp_path):
    chunks = make(tmp_path, [BYTES, {"name": "crc32c"}])
    flip(chunks / "0", 2)
    view = expect_corrupt(tmp_path, "chunk g/a/c/0: crc32c mismatch")
    assert view.read(16, 16) == np.arange(5, 9, dtype="<i4").tobytes()


@pytest.mark.parametrize("codec", [{"name": "zstd", "configuration": {"level": 1}},
                                   {"name": "gzip", "configuration": {"level": 1}},
                                   {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                                       "shuffle": "shuffle", "typesize": 4}}])
def test_undecodable_stream(tmp_path, codec):
    chunks = make(tmp_path, [BYTES, codec])
    (chunks / "0").write_bytes(b"this is not a compressed stream at all")
    expect_corrupt(tmp_path, f"c/0: undecodable {codec['name']}")


def test_wrong_decoded_size(tmp_path):
    chunks = make(tmp_path, [BYTES])
    (chunks / "0").write_bytes(b"\x00" * 10)
    expect_corrupt(tmp_path, "10 bytes, expected 16")


CODECS = {"zstd": numcodecs.Zstd(1), "gzip": numcodecs.GZip(1),
          "blosc": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)}


@pytest.mark.parametrize("name", sorted(CODECS))
@pytest.mark.parametrize("nbytes", [12, 20])
def test_whole_chunk_read_of_a_stream_with_the_wrong_size(tmp_path, name, nbytes):
    """A read of whole chunks decodes straight into the caller's buffer: a stream that decodes to
    fewer or more bytes than the chunk must fail, not leave stale bytes or overrun."""
    config = {"zstd": {"level": 1}, "gzip": {"level": 1},
              "blosc": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}[name]
    chunks = make(tmp_path, [BYTES, {"name": name, "configuration": config}])
    (chunks / "0").write_bytes(CODECS[name].encode(np.arange(nbytes // 4, dtype="<i4").tobytes()))
    view = zarrfs.open_raw(str(tmp_path), "g/a")
    too_long = "more than the 16 bytes expected"  # refused before decoding
    with pytest.raises(CorruptChunkError, match=f"c/0: .*({nbytes} bytes, expected 16|{too_long})"):
        view.read(0, 32)


def test_zstd_frame_without_a_content_size_is_read_whole(tmp_path):
    """zarr-python writes zstd frames with a content size; other writers stream frames without one."""
    chunks = make(tmp_path, [BYTES, {"name": "zstd", "configuration": {"level": 1}}])
    values = np.arange(40, 44, dtype="<i4").tobytes()
    raw_last_block = (1 | 16 << 3).to_bytes(3, "little")  # RFC 8878: last block, raw, 16 bytes
    (chunks / "0").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00\x00" + raw_last_block + values)
    view = zarrfs.open_raw(str(tmp_path), "g/a")
    assert view.read(0, 32) == values + np.arange(5, 9, dtype="<i4").tobytes()


def zstd_chunk_cut_in_half(tmp_path, checksum: bool):
    """One 512 KiB chunk stored as a zstd frame of four blocks, its second half cut off."""
    codec = {"name": "zstd", "configuration": {"level": 1, "checksum": checksum}}
    write_doc(tmp_path, "g/a", array_doc([1 << 17], "int32", [1 << 17], [BYTES, codec]))
    with zarrfs.open_raw(str(tmp_path), "g/a", mode="r+") as view:
        view.write(0, np.arange(1 << 17, dtype="<i4").tobytes())
    stored = tmp_path / "g" / "a" / "c" / "0"
    stored.write_bytes(stored.read_bytes()[:len(stored.read_bytes()) // 2])
    return zarrfs.open_raw(str(tmp_path), "g/a")


def test_a_zstd_chunk_cut_short_fails_its_first_bytes_too(tmp_path):
    """A read of a chunk's first bytes decodes it whole: a prefix decode would answer from a
    chunk that every read past the cut refuses."""
    view = zstd_chunk_cut_in_half(tmp_path, checksum=False)
    for offset in (400, 3 << 17, (1 << 19) - 4):
        with pytest.raises(CorruptChunkError, match="g/a/c/0: undecodable zstd stream"):
            view.read(offset, 4)


def test_a_small_read_of_a_garbled_zstd_frame_fails(tmp_path):
    zstd_chunk_cut_in_half(tmp_path, checksum=False)
    stored = tmp_path / "g" / "a" / "c" / "0"
    data = stored.read_bytes()
    stored.write_bytes(data[:20] + b"\xff" * len(data))  # the header survives
    with pytest.raises(CorruptChunkError, match="g/a/c/0: undecodable zstd stream"):
        zarrfs.open_raw(str(tmp_path), "g/a").read(400, 4)


def test_a_zstd_frame_with_a_checksum_is_always_decoded_whole(tmp_path):
    view = zstd_chunk_cut_in_half(tmp_path, checksum=True)
    with pytest.raises(CorruptChunkError, match="g/a/c/0: undecodable zstd stream"):
        view.read(400, 4)


def test_truncated_shard(tmp_path):
    chunks = make(tmp_path, [sharding([2])], chunk_shape=(8,))
    (chunks / "0").write_bytes((chunks / "0").read_bytes()[:20])
    expect_corrupt(tmp_path, r"g/a/c/0 inner chunk \[0\]: truncated shard")


def test_index_pointing_outside_the_shard(tmp_path):
    index_codecs = [BYTES]  # no checksum, so the bad entry reaches the bounds check
    chunks = make(tmp_path, [sharding([2], index_codecs=index_codecs)], chunk_shape=(8,))
    data = bytearray((chunks / "0").read_bytes())
    data[-64:-56] = (1000).to_bytes(8, "little")  # inner chunk 0's offset
    (chunks / "0").write_bytes(bytes(data))
    view = expect_corrupt(tmp_path, "points outside the shard")
    assert view.read(8, 8) == np.arange(3, 5, dtype="<i4").tobytes()


def test_inconsistent_index_entry(tmp_path):
    chunks = make(tmp_path, [sharding([2], index_codecs=[BYTES])], chunk_shape=(8,))
    data = bytearray((chunks / "0").read_bytes())
    data[-64:-56] = b"\xff" * 8  # offset says empty, nbytes does not
    (chunks / "0").write_bytes(bytes(data))
    expect_corrupt(tmp_path, "inconsistent shard index")


def test_index_crc_mismatch(tmp_path):
    chunks = make(tmp_path, [sharding([2])], chunk_shape=(8,))
    flip(chunks / "0", len((chunks / "0").read_bytes()) - 10)
    expect_corrupt(tmp_path, "crc32c mismatch")


def test_partial_write_into_corrupt_chunk_fails_and_changes_nothing(tmp_path):
    chunks = make(tmp_path, [BYTES, {"name": "crc32c"}])
    flip(chunks / "1", 0)
    before = {p.name: p.read_bytes() for p in chunks.iterdir()}
    with zarrfs.open_raw(str(tmp_path), "g/a", mode="r+") as view:
        with pytest.raises(CorruptChunkError, match="c/1"):
            view.write(2, b"\x00" * 16)  # touches chunk 0 partly and chunk 1 partly
    assert {p.name: p.read_bytes() for p in chunks.iterdir()} == before


@pytest.mark.parametrize("codecs, error, pattern", [
    ([BYTES, {"name": "lzma"}], UnsupportedError, r"codecs\[1\] \(lzma\): unsupported codec"),
    ([{"name": "zstd"}], MetadataError, "exactly one array->bytes"),
    ([BYTES, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle"}}],
     MetadataError, "typesize"),
    ([{"name": "crc32c"}, BYTES], MetadataError, "array->array, then one array->bytes"),
    ([sharding([3])], MetadataError, "does not divide"),
    ([sharding([2], index_codecs=[BYTES, {"name": "zstd"}])], MetadataError, "fixed encoded size"),
])
def test_unsupported_or_invalid_codecs_name_the_file(tmp_path, codecs, error, pattern):
    write_doc(tmp_path, "g/a", array_doc([8], "int32", [4], codecs))
    with pytest.raises(error, match=pattern) as info:
        zarrfs.open_raw(str(tmp_path), "g/a")
    assert "g/a/zarr.json" in str(info.value)


def test_ignorable_codec_is_skipped(tmp_path):
    codecs = [BYTES, {"name": "x-annotation", "must_understand": False}]
    write_doc(tmp_path, "g/a", array_doc([8], "int32", [4], codecs))
    with zarrfs.open_raw(str(tmp_path), "g/a", mode="r+") as view:
        view.write(0, b"\x01\x00\x00\x00")
    assert zarrfs.open_raw(str(tmp_path), "g/a").read(0, 4) == b"\x01\x00\x00\x00"


def test_write_past_the_end_writes_nothing(tmp_path):
    make(tmp_path, [BYTES])
    with zarrfs.open_raw(str(tmp_path), "g/a", mode="r+") as view:
        with pytest.raises(zarrfs.OutOfBoundsError):
            view.write(30, b"\x00" * 4)
        assert view.read(28, 10) == (8).to_bytes(4, "little")
    with pytest.raises(zarrfs.ReadOnlyError):
        zarrfs.open_raw(str(tmp_path), "g/a").write(0, b"\x00")


def test_group_is_not_an_array(tmp_path):
    (tmp_path / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
    with pytest.raises(MetadataError, match="is a group"):
        zarrfs.open_raw(str(tmp_path), "")


@pytest.mark.parametrize("codec", [{"name": "gzip", "configuration": {"level": 1}},
                                   {"name": "numcodecs.zlib", "configuration": {"level": 1}},
                                   {"name": "numcodecs.gzip", "configuration": {"level": 1}}])
def test_a_deflate_chunk_cut_short_fails_its_first_bytes_too(tmp_path, codec):
    """gzip and zlib are decoded whole for any read, as zstd is: a chunk cut short serves no
    bytes, not even the first ones a file manager's sniff wants."""
    write_doc(tmp_path, "g/a", array_doc([1 << 17], "int32", [1 << 17], [BYTES, codec]))
    values = np.random.default_rng(0).integers(0, 1000, 1 << 17, dtype="<i4")
    with zarrfs.open_raw(str(tmp_path), "g/a", mode="r+") as view:
        view.write(0, values.tobytes())
    stored = tmp_path / "g" / "a" / "c" / "0"
    stored.write_bytes(stored.read_bytes()[:len(stored.read_bytes()) // 2])
    for offset, size in ((0, 4096), ((1 << 19) - 4, 4)):
        with pytest.raises(CorruptChunkError, match="g/a/c/0: .*(deflate|gzip|zlib|stream)"):
            zarrfs.open_raw(str(tmp_path), "g/a").read(offset, size)
