"""A part of a blosc chunk decoded from the stored bytes of the blocks that hold it
(blosc_blocks.stored_ranges, BloscCodec.decode_part): the bytes it does not read may be anything."""

import numcodecs
import numpy as np
import pytest

from zarrfs.codecs.base import ChunkSpec
from zarrfs.codecs.blosc_blocks import HEADER, stored_ranges
from zarrfs.codecs.chain import CodecChain
from zarrfs.errors import CorruptChunkError
from zarrfs.format.data_types import parse_data_type

N = 1 << 18  # float32 elements of a chunk: 1 MiB decoded, in 8 to 32 blocks at clevel 1 (blosc's choice)
GARBAGE = 0xA5


def chain(cname="lz4", shuffle="shuffle", clevel=1, n=N):
    dt = parse_data_type("float32")
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
              {"name": "blosc", "configuration": {"cname": cname, "clevel": clevel, "shuffle": shuffle,
                                                  "typesize": 4, "blocksize": 0}}]
    return CodecChain(codecs, ChunkSpec((n,), dt, dt.fill_value(0)), "test")


def block_size(encoded) -> int:
    return int.from_bytes(bytes(encoded[8:12]), "little")


def values(n=N, seed=0):
    return np.sin(np.arange(n, dtype="float32") / 100) + np.random.default_rng(seed).random(n, "float32") / 1e3


class Stored:
    """The stored chunk behind read_into, and the ranges read from it."""

    def __init__(self, encoded: bytes):
        self.encoded = np.frombuffer(encoded, "u1")
        self.reads = []

    def read_into(self, offset, view):
        self.reads.append((offset, len(view)))
        view[...] = self.encoded[offset:offset + len(view)]

    def buffer(self):
        return np.full(len(self.encoded), GARBAGE, "u1")

    @property
    def bytes_read(self):
        return sum(length for _, length in self.reads)


def decode_part(codec_chain, stored: Stored, wanted):
    out = np.full(codec_chain.spec.nbytes, GARBAGE, "u1")
    widened = list(wanted)
    done = codec_chain.decode_part(stored.read_into, stored.buffer(), out, widened)
    return done, out, widened


def wanted_ranges(block):
    return {"first": (0, 4096), "middle": (5 * block + 100, 5 * block + 4196),
            "two blocks": (3 * block - 10, 3 * block + 10), "last": (4 * N - 4096, 4 * N)}


@pytest.mark.parametrize("cname,shuffle", [("lz4", "shuffle"), ("zstd", "bitshuffle"), ("blosclz", "noshuffle"),
                                           ("lz4hc", "shuffle")])
@pytest.mark.parametrize("where", ["first", "middle", "two blocks", "last"])
def test_a_part_decodes_from_the_blocks_that_hold_it_alone(cname, shuffle, where):
    codec_chain = chain(cname, shuffle)
    expected = values().view("u1")
    stored = Stored(codec_chain.encode(values()))
    block = block_size(stored.encoded)
    assert 4 * N // block >= 8
    wanted = wanted_ranges(block)[where]
    done, out, widened = decode_part(codec_chain, stored, wanted)
    assert done
    assert widened[0] <= wanted[0] and widened[1] >= wanted[1] and widened[0] % block == 0
    assert (out[widened[0]:widened[1]] == expected[widened[0]:widened[1]]).all()
    assert stored.bytes_read < len(stored.encoded) * 3 // 8  # the header, then one or two blocks of 8 or more


def test_blocks_stored_out_of_order_end_where_the_next_one_begins():
    """Blocks compressed on several threads are stored in the order they finished: the bytes of
    block j end at the next start above its own, not at block j + 1's start. (numcodecs may
    store them out of order already; reversed here, whatever it did.)"""
    codec_chain = chain()
    encoded = bytes(codec_chain.encode(values()))
    block = block_size(encoded)
    nblocks = N * 4 // block
    starts = np.frombuffer(encoded, "<i4", nblocks, HEADER).tolist()
    ends = [min([s for s in starts if s > start], default=len(encoded)) for start in starts]
    order = list(reversed(range(nblocks)))  # stored last block first
    body, new_starts, at = [], [0] * nblocks, HEADER + 4 * nblocks
    for j in order:
        new_starts[j] = at
        body.append(encoded[starts[j]:ends[j]])
        at += ends[j] - starts[j]
    shuffled = encoded[:HEADER] + np.array(new_starts, "<i4").tobytes() + b"".join(body)
    assert numcodecs.Blosc().decode(shuffled) == numcodecs.Blosc().decode(encoded)  # a valid chunk
    expected = values().view("u1")
    for wanted in wanted_ranges(block).values():
        stored = Stored(shuffled)
        done, out, widened = decode_part(codec_chain, stored, wanted)
        assert done and (out[widened[0]:widened[1]] == expected[widened[0]:widened[1]]).all()


def test_a_chunk_stored_uncompressed_reads_the_bytes_wanted_after_its_header():
    codec_chain = chain(clevel=0)
    stored = Stored(codec_chain.encode(values()))
    assert stored.encoded[2] & 0x2  # memcpyed
    block = block_size(stored.encoded)
    wanted = (4 * N - 5000, 4 * N - 1000)
    done, out, widened = decode_part(codec_chain, stored, wanted)
    assert done and (out[widened[0]:widened[1]] == values().view("u1")[widened[0]:widened[1]]).all()
    assert stored.bytes_read <= 4096 + block < len(stored.encoded)


def test_more_block_starts_than_the_first_read_holds_decline():
    """4096 blocks' starts do not fit in the first 4 KiB: the caller reads the chunk whole."""
    nblocks, first = 4 * N // 256, HEADER + 4 * 4096
    cbytes = first + 20 * nblocks
    header = bytes([2, 1, 1, 4]) + b"".join(n.to_bytes(4, "little") for n in (4 * N, 256, cbytes))
    stored = header + np.arange(first, cbytes, 20, dtype="<i4").tobytes()
    assert stored_ranges(stored[:4096], cbytes, 4 * N, [0, 4096]) is None
    assert stored_ranges(stored, cbytes, 4 * N, [0, 4096]) == [(first, first + 20 * 16)]  # all starts: 16 blocks


def test_a_large_part_declines():
    """More than a quarter of the chunk: decoding it whole costs about the same."""
    codec_chain = chain()
    stored = Stored(codec_chain.encode(values()))
    assert not decode_part(codec_chain, stored, (0, 2 * N))[0] and stored.reads == []


def test_a_header_that_disagrees_with_the_stored_size_is_corrupt():
    codec_chain = chain()
    stored = Stored(bytes(codec_chain.encode(values())) + b"tail")
    with pytest.raises(CorruptChunkError, match="header says"):
        decode_part(codec_chain, stored, (0, 4096))


def test_a_block_start_outside_the_chunk_is_corrupt():
    codec_chain = chain()
    encoded = bytearray(codec_chain.encode(values()))
    encoded[HEADER + 4 * 5:HEADER + 4 * 6] = (len(encoded) + 10).to_bytes(4, "little")
    block = block_size(encoded)
    with pytest.raises(CorruptChunkError, match="outside the chunk"):
        decode_part(codec_chain, Stored(bytes(encoded)), (5 * block, 5 * block + 4096))


@pytest.mark.parametrize("cname,shuffle", [("lz4", "shuffle"), ("zstd", "bitshuffle"), ("blosclz", "noshuffle"),
                                           ("lz4hc", "shuffle")])
def test_a_last_block_cut_short_decodes_alone(cname, shuffle):
    """A chunk whose length is not a multiple of the block: its last block is shorter, and was
    compressed whole (never split by byte): a chunk of one block made of it says so."""
    n = N - 1000
    codec_chain = chain(cname, shuffle, n=n)
    expected = values(n).view("u1")
    stored = Stored(codec_chain.encode(values(n)))
    block = block_size(stored.encoded)
    assert (4 * n) % block
    done, out, widened = decode_part(codec_chain, stored, (4 * n - 100, 4 * n))
    assert done and widened == [4 * n // block * block, 4 * n]
    assert (out[widened[0]:] == expected[widened[0]:]).all()
    assert (out[:widened[0]] == GARBAGE).all()


@pytest.mark.parametrize("size", [-1, 0, 1000, 2 ** 31 - 100])
def test_a_damaged_block_is_corrupt_and_named(size):
    """The first split's stored size at the start of block 5 damaged: an error naming the block,
    never bytes read past it."""
    codec_chain = chain()
    encoded = bytearray(codec_chain.encode(values()))
    start = int.from_bytes(encoded[HEADER + 4 * 5:HEADER + 4 * 6], "little")
    encoded[start:start + 4] = size.to_bytes(4, "little", signed=True)
    block = block_size(encoded)
    with pytest.raises(CorruptChunkError, match="block 5"):
        decode_part(codec_chain, Stored(bytes(encoded)), (5 * block, 5 * block + 4096))
