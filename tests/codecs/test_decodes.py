"""No double decodes: a read that touches a chunk more than once, or small reads of one chunk in
a row, decode it once; the random-read admission policy stays (a chunk read once is not cached)."""

import numpy as np
import pytest

from helpers import CountingStore, array_doc, open_raw_file, sharding, write_doc
from zarrfs.codecs.chain import CodecChain

ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]
BLOSC = [{"name": "bytes", "configuration": {"endian": "little"}},
         {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4,
                                             "blocksize": 0}}]


@pytest.fixture
def decodes(monkeypatch):
    """Every chunk decode, counted at the codec chain (inner chunks of shards included, and
    decodes from stored parts, engine/stored_parts.py)."""
    calls = []
    decode, decode_into, decode_part = CodecChain.decode, CodecChain.decode_into, CodecChain.decode_part

    def counted(self, data, *args, **kwargs):
        calls.append(len(data))
        return decode(self, data, *args, **kwargs)

    def counted_into(self, data, *args, **kwargs):
        calls.append(len(data))
        return decode_into(self, data, *args, **kwargs)

    def counted_part(self, read_into, stored, *args):
        done = decode_part(self, read_into, stored, *args)
        if done:
            calls.append(len(stored))
        return done

    monkeypatch.setattr(CodecChain, "decode", counted)
    monkeypatch.setattr(CodecChain, "decode_into", counted_into)
    monkeypatch.setattr(CodecChain, "decode_part", counted_part)
    return calls


def make(tmp_path, codecs, shape=(256, 256), chunks=(64, 64)):
    """A float32 array of 1 KiB rows in 64x64 chunks (16 KiB each), every chunk stored."""
    values = np.random.default_rng(0).random(shape, "float32")
    write_doc(tmp_path, "a", array_doc(shape, "float32", chunks, codecs=codecs))
    raw = open_raw_file(CountingStore(tmp_path), "a")
    raw.write(0, values.tobytes())
    raw.flush()
    return values.tobytes(), open_raw_file(CountingStore(tmp_path), "a", writable=False)


@pytest.mark.parametrize("codecs", [ZSTD, BLOSC, None, [sharding((32, 32), ZSTD)]],
                         ids=["zstd", "blosc", "raw", "sharded"])
def test_a_small_read_touching_chunks_in_two_row_pieces_decodes_each_once(tmp_path, codecs, decodes):
    expected, raw = make(tmp_path, codecs)
    offset = 512  # mid-row: a partial row, 15 whole rows, a partial row; all in chunks (0, 0..3)
    assert raw.read(offset, 16384) == expected[offset:offset + 16384]
    if codecs and codecs[0]["name"] == "sharding_indexed":  # inner chunks (0, 0..7), and 4 shard indices
        assert sorted(decodes)[:4] == [4 * 16 + 4] * 4
        assert len(decodes) == 8 + 4, decodes
    else:
        assert len(decodes) == 4


@pytest.mark.parametrize("codecs", [ZSTD, BLOSC], ids=["zstd", "blosc"])
def test_small_reads_of_one_chunk_in_a_row_decode_it_once(tmp_path, codecs, decodes):
    expected, raw = make(tmp_path, codecs)
    row = 1024  # of which chunk (0, 0) holds the first 256 bytes
    for offset, size in ((3 * row, 256), (2 * row + 100, 156), (0, 256), (3 * row + 8, 200)):
        assert raw.read(offset, size) == expected[offset:offset + size]  # within what the first read decoded
    assert len(decodes) == 1


def test_the_admission_policy_stays(tmp_path, decodes):
    """A chunk read in small reads is not cached: a zstd chunk is decoded whole (a prefix could
    answer from a chunk a whole decode refuses) into scratch, and the small reads after the
    first copy from that decode, decoding nothing more."""
    expected, raw = make(tmp_path, ZSTD)
    cache = raw.array.shared.cache
    assert raw.read(0, 256) == expected[:256]
    assert cache.nbytes == 0 and len(decodes) == 1
    for offset in (60 * 1024, 63 * 1024, 10, 30 * 1024):
        assert raw.read(offset, 100) == expected[offset:offset + 100]
    assert len(decodes) == 1 and cache.nbytes == 0


def test_many_chunks_read_once_at_random_stay_out_of_the_cache(tmp_path, decodes):
    expected, raw = make(tmp_path, ZSTD)
    for row in range(0, 256, 64):
        for col in range(0, 1024, 256):
            offset = row * 1024 + col
            assert raw.read(offset, 64) == expected[offset:offset + 64]
    assert len(decodes) == 16 and raw.array.shared.cache.nbytes == 0


def test_a_chunk_written_whole_is_not_read_back_from_an_old_decode(tmp_path, decodes):
    """A chunk written whole is not cached after the flush (the page cache has it): the scratch
    decode of its old bytes must have been dropped."""
    expected, _ = make(tmp_path, ZSTD)
    raw = open_raw_file(CountingStore(tmp_path), "a")
    assert raw.read(0, 256) == expected[:256]
    raw.array.write((slice(0, 64), slice(0, 64)), np.full((64, 64), 7, "float32"))
    raw.flush()
    assert raw.read(0, 256) == np.full(64, 7, "float32").tobytes()


def test_a_small_read_of_a_blosc_chunk_decodes_only_the_blocks_that_hold_it(tmp_path, decodes, monkeypatch):
    """A 4 KiB read in a 1 MiB blosc chunk decodes the block that holds it (a chunk of one block
    made in place, blosc_blocks.decode_stored_blocks), not the chunk; a read within that block
    decodes nothing more. A read elsewhere in the chunk is its second: the chunk is decoded whole
    and cached (the admission policy)."""
    import numcodecs.blosc
    decoded = []  # bytes each blosc decompression made
    decompress = numcodecs.blosc.decompress
    monkeypatch.setattr(numcodecs.blosc, "decompress", lambda source, dest=None: decoded.append(
        np.asarray(dest).nbytes if dest is not None else None) or decompress(source, dest))
    codecs = [BLOSC[0], {**BLOSC[1], "configuration": {**BLOSC[1]["configuration"], "blocksize": 1 << 16}}]
    expected, raw = make(tmp_path, codecs, shape=(1 << 20,), chunks=(1 << 18,))
    block = int.from_bytes((tmp_path / "a" / "c" / "0").read_bytes()[8:12], "little")  # blosc's choice
    assert block <= (1 << 20) // 4  # at least four blocks a chunk
    decoded.clear()
    for offset in (block + 1000, block + 9000):
        assert raw.read(offset, 4096) == expected[offset:offset + 4096]
    assert decoded == [block] and len(decodes) == 1
    assert raw.read(3 * block, 4096) == expected[3 * block:3 * block + 4096]
    assert decoded[1:] in ([1 << 20], [None]) and len(decodes) == 2
    assert raw.read(2 * block, 4096) == expected[2 * block:2 * block + 4096]  # cached now
    assert len(decodes) == 2


def test_a_chunk_decoded_again_into_full_recent_decodes_replaces_its_old_decode():
    """A small read past what a chunk's kept decode covers decodes it again and keeps the new
    decode: with every slot and byte of RecentDecodes in use, that once counted the old buffer
    twice, emptied the whole list and failed the read (EIO, then a retry by the kernel)."""
    from zarrfs.engine.buffers import BufferPool
    from zarrfs.engine.recent_chunks import RecentDecodes
    pool = BufferPool()
    recent = RecentDecodes(pool, slots=4, max_bytes=4 << 20)
    recent.make_room(4)
    for key in range(4):
        recent.keep(key, *pool.take((1 << 20,), "u1"), (0, 4096))
    base, chunk = pool.take((1 << 20,), "u1")
    chunk[:] = 7
    recent.keep(2, base, chunk, None)
    assert recent.nbytes == 4 << 20
    out = np.zeros(16, "u1")
    assert recent.copy_out(2, (slice(100, 116),), out, [100, 116]) and (out == 7).all()
    assert recent.copy_out(0, (slice(0, 16),), out, [0, 16])  # the others stay


STORED_CHAINS = {
    "bytes": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "zstd": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}],
    "gzip-crc32c": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}},
                    {"name": "crc32c"}],
    "blosc": [{"name": "bytes", "configuration": {"endian": "little"}},
              {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 1,
                                                  "blocksize": 0}}],
    "sharded-zstd": [sharding([64], [{"name": "bytes", "configuration": {"endian": "little"}},
                                     {"name": "zstd", "configuration": {"level": 1}}])],
}


@pytest.mark.parametrize("name", sorted(STORED_CHAINS))
@pytest.mark.parametrize("size", [64, 1 << 16])
def test_a_stored_chunk_fits_its_chains_stored_limit_even_incompressible(name, size):
    """The limit a store holds a server's answer to (stores/bounded_get.py): every real encoding
    of the chunk fits, even of random bytes, and it stays within a small factor of the chunk."""
    from zarrfs.codecs.base import ChunkSpec
    from zarrfs.format.data_types import DataType
    spec = ChunkSpec((size,), DataType("uint8", np.dtype("u1")), np.array(0, "u1"))
    chain = CodecChain(STORED_CHAINS[name], spec, "codecs")
    data = np.random.default_rng(size).integers(1, 256, size, dtype="u1")
    stored = chain.encode(data)
    assert len(stored) <= chain.stored_limit() <= 3 * size + (2 << 20)
    assert name != "bytes" or chain.stored_limit() == size
