"""A counting store proves reads and writes touch only the chunks and byte ranges they need."""

import numpy as np
import pytest

from helpers import CountingStore, array_doc, open_raw_file, sharding, write_doc
from zarrfs.byte_ranges import Range, Suffix
from zarrfs.engine.flat_file import SPARSE_READ

ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]
INDEX_NBYTES = 16 * 16 + 4  # 4x4 inner chunks per shard, crc32c


def filled(tmp_path, codecs, chunk_shape=(32, 32), shape=(64, 64)):
    write_doc(tmp_path, "", array_doc(shape, "uint16", chunk_shape, codecs))
    store = CountingStore(tmp_path)
    raw = open_raw_file(store)
    raw.write(0, np.arange(np.prod(shape), dtype="<u2").tobytes())
    raw.flush()
    fresh = open_raw_file(store)  # a cold cache
    store.reset()
    return store, fresh


def offset_of(row, col, shape=(64, 64)):
    return (row * shape[1] + col) * 2


@pytest.mark.parametrize("location", ["end", "start"])
def test_cold_read_in_a_shard_reads_index_and_one_inner_chunk(tmp_path, location):
    store, raw = filled(tmp_path, [sharding([8, 8], ZSTD, location)])
    assert raw.read(offset_of(9, 10), 4) == np.arange(9 * 64 + 10, 9 * 64 + 12, dtype="<u2").tobytes()
    (index_key, index_range, index_n), (chunk_key, chunk_range, chunk_n) = store.gets
    assert index_key == chunk_key == "c/0/0"
    assert index_range == (Range(0, INDEX_NBYTES) if location == "start" else Suffix(INDEX_NBYTES))
    assert index_n == INDEX_NBYTES
    stored = (tmp_path / "c" / "0" / "0").read_bytes()
    assert isinstance(chunk_range, Range) and chunk_n == chunk_range.length < len(stored) // 8
    store.reset()
    raw.read(offset_of(9, 12), 8)  # the same inner chunk: decoded whole by the first read, kept
    raw.read(offset_of(9, 13), 4)
    assert store.gets == []
    store.reset()
    raw.read(offset_of(20, 20), 2)  # another inner chunk of the same shard: index cached
    assert len(store.gets) == 1 and isinstance(store.gets[0][1], Range)


def test_nested_shards_read_three_ranges(tmp_path):
    store, raw = filled(tmp_path, [sharding([16, 16], [sharding([8, 8], ZSTD)])])
    raw.read(offset_of(40, 40), 2)
    assert [k for k, _, _ in store.gets] == ["c/1/1"] * 3
    assert all(r is not None for _, r, _ in store.gets)  # never the whole shard
    assert store.bytes_read < 600


def test_plain_read_decodes_only_touched_chunks(tmp_path):
    store, raw = filled(tmp_path, ZSTD, chunk_shape=(8, 8))
    raw.read(offset_of(3, 6), 8)  # columns 6..9: two chunks
    assert sorted(k for k, _, _ in store.gets) == ["c/0/0", "c/0/1"]


def test_complete_chunk_overwrite_reads_nothing(tmp_path):
    store, raw = filled(tmp_path, ZSTD, chunk_shape=(8, 64))
    raw.write(offset_of(8, 0), bytes(8 * 64 * 2 - 0))  # exactly chunk row 1
    assert store.gets == []
    raw.write(offset_of(16, 3), b"\x01")  # partial: decodes that chunk only
    assert [k for k, _, _ in store.gets] == ["c/2/0"]
    raw.flush()
    assert sorted(k for k, _ in store.sets) == ["c/2/0"]  # chunk 1 became all fill: deleted
    assert not (tmp_path / "c" / "1" / "0").exists()


def test_each_touched_shard_is_rewritten_once(tmp_path):
    store, raw = filled(tmp_path, [sharding([8, 8], ZSTD)])
    for row in (1, 9, 17, 25):  # four inner chunks of shard (0, 0)
        raw.write(offset_of(row, 1), b"\xff\xff")
    raw.write(offset_of(40, 40), b"\xff\xff")  # and one of shard (1, 1)
    store.reset()
    raw.flush()
    assert sorted(k for k, _ in store.sets) == ["c/0/0", "c/1/1"]
    whole = [k for k, r, _ in store.gets if r is None]
    assert sorted(whole) == ["c/0/0", "c/1/1"]  # each read once, to keep its other inner chunks


def test_complete_shard_overwrite_does_not_read_the_shard(tmp_path):
    store, raw = filled(tmp_path, [sharding([8, 8], ZSTD)])
    raw.write(0, np.ones((32, 64), "<u2").tobytes())  # shard row 0 entirely
    raw.flush()
    assert store.gets == []
    assert sorted(k for k, _ in store.sets) == ["c/0/0", "c/0/1"]


def test_edge_shard_overwrite_ignores_inner_chunks_outside_the_array(tmp_path):
    store, raw = filled(tmp_path, [sharding([8, 8], ZSTD)], shape=(40, 64))  # shard row 1 overhangs
    raw.write(offset_of(32, 0, (40, 64)), np.ones((8, 64), "<u2").tobytes())
    raw.flush()
    assert store.gets == []


def test_a_new_array_never_sees_the_cached_chunks_of_a_dropped_one(tmp_path):
    """The mount replaces an array whose metadata changed; the chunk cache is shared."""
    import gc

    from zarrfs.engine.array import open_array
    from zarrfs.engine.chunk_cache import ChunkCache
    from zarrfs.format.v3 import parse_document
    for name, value in [("a", 1), ("b", 2)]:
        write_doc(tmp_path, name, array_doc([16], "uint8", [16], ZSTD))
        raw = open_raw_file(CountingStore(tmp_path), name)
        raw.write(0, bytes([value]) * 16)
        raw.flush()
    store, cache = CountingStore(tmp_path), ChunkCache(1 << 20)
    metas = {name: parse_document(store.get(f"{name}/zarr.json"), name) for name in "ab"}
    for attempt in range(20):  # CPython hands a freed object's address straight to the next one
        name = "ab"[attempt % 2]
        array = open_array(store, name, metas[name], cache)
        assert array.read((slice(0, 16),)).tobytes() == bytes([1 + attempt % 2]) * 16, attempt
        del array
        gc.collect()


def test_whole_chunk_reads_are_decoded_into_the_reader_and_not_cached(tmp_path):
    """A reader that wants all of a chunk gets it decoded into its buffer; the kernel's page cache
    keeps it, so the chunk cache does not."""
    store, raw = filled(tmp_path, ZSTD, chunk_shape=(8, 64))  # a chunk is 8 whole rows: 1 KiB of the file
    cache = raw.array.shared.cache
    assert raw.read(0, 1024) == np.arange(512, dtype="<u2").tobytes()
    assert cache.nbytes == 0
    raw.read(0, 1024)
    assert [k for k, _, _ in store.gets] == ["c/0/0", "c/0/0"]


def test_a_small_read_caches_no_chunk(tmp_path):
    """Random small reads would fill the cache with chunks read once: a chunk decoded for a small
    read (a zstd chunk whole: recent_chunks.py) serves the next small reads of it, read once and
    never cached."""
    store, raw = filled(tmp_path, ZSTD, chunk_shape=(8, 64))
    cache = raw.array.shared.cache
    for row, col in [(8, 2)] * 3 + [(15, 60)] * 2:
        start = row * 64 + col
        assert raw.read(offset_of(row, col), 4) == np.arange(start, start + 2, dtype="<u2").tobytes()
        assert [k for k, _, _ in store.gets] == ["c/1/0"]
        assert cache.nbytes == 0


def test_a_large_read_caches_the_chunks_it_wants_part_of(tmp_path):
    """Read-ahead sends large requests that cut chunks: each chunk is still read once."""
    shape = (256, 256)  # 128 KiB of uint16, in 32 chunks of 4 KiB
    store, raw = filled(tmp_path, ZSTD, chunk_shape=(8, 256), shape=shape)
    first = raw.read(6, SPARSE_READ)  # chunks 0..16, the last in part
    second = raw.read(6 + SPARSE_READ, raw.size)  # chunk 16 again, then the rest
    assert first + second == np.arange(256 * 256, dtype="<u2").tobytes()[6:]
    assert sorted(k for k, _, _ in store.gets) == sorted(f"c/{i}/0" for i in range(32))


def test_after_write_back_only_chunks_merged_with_stored_data_stay_cached(tmp_path):
    """A chunk written whole is in the kernel's page cache already; one that was merged with its
    stored bytes is kept, so the next small write to it reads nothing."""
    store, raw = filled(tmp_path, ZSTD, chunk_shape=(8, 64))
    raw.write(0, bytes(1024))  # chunk row 0, whole
    raw.write(offset_of(8, 3), b"\x01\x00")  # chunk row 1, in part: decodes it
    raw.flush()
    cache = raw.array.shared.cache
    assert cache.nbytes == 1024
    store.reset()
    raw.write(offset_of(9, 0), b"\x02\x00")
    assert store.gets == []
    raw.write(offset_of(0, 5), b"\x03\x00")
    assert [k for k, _, _ in store.gets] == ["c/0/0"]
