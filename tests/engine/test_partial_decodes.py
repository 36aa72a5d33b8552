"""A chunk that a whole decode refuses is refused by every read of it, whatever its size: a small
read that decodes only part of a chunk must never answer from one that a larger read calls
corrupt (the kernel retries a failed 8 KiB read as 4 KiB, and got zeros from a gzip bomb)."""

import gzip
import json
import zlib

import numcodecs
import numpy as np
import pytest
import zstandard

import zarrfs
from helpers import array_doc, open_raw_file, write_doc
from servers.memory_store import MemoryStore
from zarrfs.errors import CorruptChunkError

N = 1 << 16  # int32 elements: one 256 KiB chunk
CHUNK = 4 * N
BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
CODECS = {
    "zstd": {"name": "zstd", "configuration": {"level": 1}},
    "gzip": {"name": "gzip", "configuration": {"level": 1}},
    "numcodecs.zlib": {"name": "numcodecs.zlib", "configuration": {"level": 1}},
    "numcodecs.gzip": {"name": "numcodecs.gzip", "configuration": {"level": 1}},
    "blosc": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4,
                                                 "blocksize": 16384}},
}
ENCODERS = {"zstd": numcodecs.Zstd(1), "gzip": numcodecs.GZip(1), "numcodecs.zlib": numcodecs.Zlib(1),
            "numcodecs.gzip": numcodecs.GZip(1),
            "blosc": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE, blocksize=16384)}
# (offset, size): a sniff, the kernel's 4 and 8 KiB reads, a quarter, all of it, and past the middle
READS = [(0, 4), (0, 4096), (0, 8192), (0, CHUNK // 4), (0, CHUNK), (CHUNK // 2 + 8, 4096)]


def encode(name, values: np.ndarray) -> bytes:
    return bytes(ENCODERS[name].encode(values))


def bomb(name) -> bytes:
    """Zeros four times the chunk's size; zstd's frame header also says (falsely) it is the chunk's.
    (A blosc header says its true decoded size.)"""
    data = encode(name, np.zeros(4 * N, "<i4"))
    if name == "zstd":  # Frame_Content_Size: 4 bytes after the magic, the descriptor and the window byte
        assert data[4] == 0x80
        data = data[:6] + CHUNK.to_bytes(4, "little") + data[10:]
    return data


def cut(name) -> bytes:
    """The chunk's stream without its last bytes: a gzip member's size trailer, a zstd frame's or
    a blosc chunk's second half. (numcodecs decodes a blosc chunk without its last 4 bytes,
    reading past its end: zarrfs checks the header's length first.)"""
    data = encode(name, np.arange(N, dtype="<i4"))
    return data[:-4] if name not in ("zstd", "blosc") else data[:len(data) // 2]


def garbled(name) -> bytes:
    """The chunk's stream, whole in length, wrong at its end: the gzip CRC, the zlib Adler-32, the
    last zstd block's bytes, a blosc block start pointing past the chunk."""
    data = bytearray(encode(name, np.arange(N, dtype="<i4")))
    if name == "blosc":
        last = -(-CHUNK // int.from_bytes(data[8:12], "little")) - 1  # the header's blocksize
        data[16 + 4 * last:20 + 4 * last] = (len(data) + 100).to_bytes(4, "little")
    elif name == "zstd":
        data[-len(data) // 4:] = b"\xaa" * (len(data) // 4)
    else:
        data[-6 if "gzip" in name else -2] ^= 0xFF
    return bytes(data)


def decodes_to_the_chunk(name, data: bytes) -> bool:
    """Whether the codec's own library decodes `data` to exactly the chunk's bytes."""
    try:
        return len(ENCODERS[name].decode(data)) == CHUNK
    except (RuntimeError, ValueError, EOFError, gzip.BadGzipFile, zlib.error, zstandard.ZstdError):
        return False


def local_views(tmp_path, name, stored: bytes):
    """Fresh views of the array on a local store (small blosc reads read stored parts), one per read."""
    write_doc(tmp_path, "g/a", array_doc([N], "int32", [N], [BYTES, CODECS[name]]))
    (tmp_path / "g" / "a" / "c").mkdir()
    (tmp_path / "g" / "a" / "c" / "0").write_bytes(stored)
    return lambda: zarrfs.open_raw(str(tmp_path), "g/a")


def memory_views(tmp_path, name, stored: bytes):
    """Fresh views of the array on an in-memory store (small reads decode the stored chunk in part)."""
    store = MemoryStore()
    store.set("zarr.json", json.dumps(array_doc([N], "int32", [N], [BYTES, CODECS[name]])).encode())
    store.set("c/0", stored)
    return lambda: open_raw_file(store, writable=False)


@pytest.mark.parametrize("store", [local_views, memory_views], ids=["local", "memory"])
@pytest.mark.parametrize("make", [bomb, cut, garbled])
@pytest.mark.parametrize("name", sorted(CODECS))
def test_every_read_of_a_refused_chunk_is_refused(tmp_path, name, make, store):
    stored = make(name)
    assert not decodes_to_the_chunk(name, stored)  # the test data: its library refuses it too
    fresh = store(tmp_path, name, stored)
    refused = []
    for offset, size in READS:
        try:
            fresh().read(offset, size)
        except CorruptChunkError as e:
            assert "c/0" in str(e)
            refused.append((offset, size))
    assert refused == READS


@pytest.mark.parametrize("name", sorted(CODECS))
def test_a_good_chunk_reads_the_same_at_every_size(tmp_path, name):
    values = np.arange(N, dtype="<i4")
    fresh = memory_views(tmp_path, name, encode(name, values))
    flat = values.tobytes()
    for offset, size in READS:
        assert fresh().read(offset, size) == flat[offset:offset + size]
