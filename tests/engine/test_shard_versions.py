"""A shard's inner chunks are read from the version of the shard its index came from: when
another writer replaces the shard in between, a read finds out and reads the new index, and never
takes bytes of the new shard at the old offsets (which an uncompressed inner chunk would decode)."""

import numpy as np
import pytest

from helpers import open_raw_file, write_sharded
from servers.memory_store import MemoryStore
from zarrfs.stores.contract import Capabilities

INNER, PER_SHARD = 64, 4
REMOTE = Capabilities(remote=True, conditional_writes=True, batched_reads=True, metadata_ttl=60)


@pytest.mark.parametrize("capabilities", [Capabilities(), REMOTE], ids=["local", "remote"])
@pytest.mark.parametrize("size", [INNER, 2 * INNER], ids=["one inner chunk", "two, batched"])
def test_a_shard_replaced_after_its_index_was_read_is_read_again(capabilities, size):
    old = np.arange(INNER * PER_SHARD, dtype="u1")
    store = MemoryStore(capabilities)
    codec = write_sharded(store, old, INNER, PER_SHARD)
    raw = open_raw_file(store, cache_bytes=0)
    assert raw.read(0, INNER) == old[:INNER].tobytes()  # the index is read and kept
    new = (old + 100).astype("u1")
    chunks = [new[i * INNER:(i + 1) * INNER].tobytes() for i in range(PER_SHARD)]
    # another writer: the first inner chunk now empty (the fill value), so every other one moved
    store.other_writer("c/0", codec.assemble([None, *chunks[1:]]))
    assert raw.read(INNER, size) == new[INNER:INNER + size].tobytes()
    assert raw.read(0, INNER) == bytes(INNER)  # the fill value: the new index knows it is empty
