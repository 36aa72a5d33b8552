"""A small read of a blosc chunk on a local store reads only the stored blocks that hold it
(engine/stored_parts.py), and every other read as before."""

import numpy as np
import pytest

from helpers import CountingStore, array_doc, open_raw_file, write_doc
from zarrfs.errors import CorruptChunkError

BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
BLOSC = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle", "typesize": 4,
                                            "blocksize": 0}}
ZSTD = {"name": "zstd", "configuration": {"level": 1}}
N = 1 << 18  # float32 elements of a chunk (1 MiB): blosc makes 16 blocks of it at clevel 1


def make(tmp_path, compressor):
    values = np.sin(np.arange(4 * N, dtype="float32") / 100)
    write_doc(tmp_path, "a", array_doc((4 * N,), "float32", (N,), codecs=[BYTES, compressor]))
    raw = open_raw_file(CountingStore(tmp_path), "a")
    raw.write(0, values.tobytes())
    raw.flush()
    store = CountingStore(tmp_path, read_only=True)
    raw = open_raw_file(store, "a", writable=False)
    store.reset()  # its metadata read
    return values.tobytes(), store, raw


def test_a_small_read_opens_the_chunk_instead_of_reading_it_whole(tmp_path):
    expected, store, raw = make(tmp_path, BLOSC)
    offset = 4 * N + 300_000  # chunk 1
    assert raw.read(offset, 4096) == expected[offset:offset + 4096]
    assert store.opened == ["a/c/1"] and "a/c/1" not in [key for key, _, _ in store.gets]
    for offset in (4 * N + 299_000, 3 * 4 * N + 10):  # within what was decoded; another chunk
        assert raw.read(offset, 100) == expected[offset:offset + 100]
    assert store.opened == ["a/c/1", "a/c/3"]


def test_a_second_read_elsewhere_in_the_chunk_reads_it_whole_and_caches_it(tmp_path):
    expected, store, raw = make(tmp_path, BLOSC)
    assert raw.read(0, 4096) == expected[:4096]
    assert raw.read(4 * N - 4096, 4096) == expected[4 * N - 4096:4 * N]  # the chunk's last block
    assert [key for key, _, _ in store.gets] == ["a/c/0"] and raw.array.shared.cache.nbytes == 4 * N


def test_chunks_of_other_codecs_are_read_as_before(tmp_path):
    expected, store, raw = make(tmp_path, ZSTD)
    assert raw.read(100, 4096) == expected[100:4196]
    assert [key for key, _, _ in store.gets] == ["a/c/0"]  # whole (and opened by that get)


def test_a_chunk_whose_header_disagrees_with_its_file_is_named(tmp_path):
    _, store, raw = make(tmp_path, BLOSC)
    with open(tmp_path / "a" / "c" / "2", "ab") as f:
        f.write(b"appended")
    with pytest.raises(CorruptChunkError, match=r"a/c/2.*header says"):
        raw.read(2 * 4 * N + 8192, 4096)


def test_a_chunk_not_stored_reads_as_the_fill_value(tmp_path):
    expected, store, raw = make(tmp_path, BLOSC)
    (tmp_path / "a" / "c" / "3").unlink()
    assert raw.read(3 * 4 * N + 4096, 4096) == bytes(4096)
