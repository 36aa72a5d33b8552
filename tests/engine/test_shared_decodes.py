"""Concurrent readers of one chunk share one decode (decodes_in_progress.py): the first reader
decodes, the others wait for it and take its chunk, or its error.

Each store holds the first GET of the chunk at a gate until every other reader waits for that
decode (or, on code that decodes once per reader, has come to the gate itself), so the readers
overlap on any machine, however loaded."""

import json
import logging
import threading

import numpy as np
import pytest

from helpers import CountingStore, array_doc, open_raw_file, write_doc
from mounting import wait_for
from servers.memory_store import MemoryStore
from zarrfs.errors import CorruptChunkError

N = 1 << 20  # bytes of a chunk
GZIP = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}]
READERS = 4
BOUND = 30.0  # seconds: a condition not met by then fails the test


class Gate:
    """GETs of the gated keys wait here until the test opens the gate."""

    def __init__(self, keys):
        self.keys, self.arrived = set(keys), []
        self._open = threading.Event()
        self._lock = threading.Lock()

    def pass_through(self, key) -> None:
        if key in self.keys:
            with self._lock:
                self.arrived.append(key)
            assert self._open.wait(BOUND), "the gate was never opened"

    def open(self) -> None:
        self._open.set()


class GatedLocalStore(CountingStore):
    gate = Gate(())

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        self.gate.pass_through(key)
        return super().get_versioned(key, byte_range, expect, limit)


class GatedMemoryStore(MemoryStore):
    gate = Gate(())

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        self.gate.pass_through(key)
        return super().get_versioned(key, byte_range, expect, limit)


VALUES = (np.arange(2 * N, dtype=np.uint32) * 2654435761 >> 27).astype("u1")  # compressible, not constant


def gated_array(kind, tmp_path, stored=None):
    """A fresh reader of a 2-chunk gzip uint8 array on a gated store (`stored`: chunk 0's bytes
    replaced)."""
    doc = array_doc([2 * N], "uint8", [N], GZIP)
    if kind == "local":
        write_doc(tmp_path, "", doc)
        store = GatedLocalStore(tmp_path)
    else:
        store = GatedMemoryStore()
        store.set("zarr.json", json.dumps(doc).encode())
    writer = open_raw_file(store)
    writer.write(0, VALUES.tobytes())
    writer.flush()
    if stored is not None:
        store.set("c/0", stored)
    return store, open_raw_file(store, writable=False)


def concurrently(store, raw, reads, gated=("c/0",)) -> list:
    """Run each of `reads` (callables) in its own thread, started together, while the GETs of
    `gated` wait until each reader waits for a decode or is at the gate; their results, or errors."""
    store.gate = gate = Gate(gated)
    results = [None] * len(reads)
    start = threading.Barrier(len(reads))

    def run(i):
        start.wait()
        try:
            results[i] = reads[i]()
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(reads))]
    for t in threads:
        t.start()
    try:
        keys = [raw.array.cache_key + ((int(k.split("/")[1]),),) for k in gated]
        decodes = raw.array.shared.cache.decodes
        wait_for(lambda: len(gate.arrived) + sum(decodes.waiting(k) for k in keys) >= len(reads), BOUND,
              "every reader at the gate or waiting for a decode")
    finally:
        gate.open()
        for t in threads:
            t.join(BOUND)
    assert not any(t.is_alive() for t in threads), "a reader never finished"
    return results


def decodes_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("decoded")]


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize("size", [16 << 10, N], ids=["small", "whole-chunk"])
def test_concurrent_readers_of_one_chunk_decode_it_once(tmp_path, caplog, kind, size):
    store, raw = gated_array(kind, tmp_path)
    offsets = [i * (N - size) // (READERS - 1) for i in range(READERS)]  # each reader its own bytes
    with caplog.at_level(logging.DEBUG, logger="zarrfs.engine.array"):
        results = concurrently(store, raw, [lambda o=o: raw.read(o, size) for o in offsets])
    assert results == [VALUES[o:o + size].tobytes() for o in offsets]
    assert len(decodes_logged(caplog)) == 1, decodes_logged(caplog)
    assert store.gate.arrived == ["c/0"]  # and one GET


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_a_failed_shared_decode_fails_every_waiter_naming_the_chunk(tmp_path, kind):
    store, raw = gated_array(kind, tmp_path, stored=b"\x1f\x8b not a gzip stream" * 64)
    results = concurrently(store, raw, [lambda o=o: raw.read(o * 4096, 4096) for o in range(READERS)])
    assert all(isinstance(e, CorruptChunkError) for e in results), results
    assert {str(e) for e in results} == {str(results[0])} and "chunk c/0" in str(results[0])
    assert store.gate.arrived == ["c/0"]  # read and decoded once, not once a reader
    assert raw.read(N, 16) == VALUES[N:N + 16].tobytes()  # nothing left waiting


def test_readers_of_two_chunks_in_opposite_orders_finish(tmp_path, caplog):
    """Each reader leads the decode of one chunk and then wants the other's: neither holds a
    decode while it waits for one, so both finish."""
    store, raw = gated_array("memory", tmp_path)
    forward = lambda: raw.read(0, 16) + raw.read(N, 16)  # noqa: E731
    backward = lambda: raw.read(N, 16) + raw.read(0, 16)  # noqa: E731
    with caplog.at_level(logging.DEBUG, logger="zarrfs.engine.array"):
        results = concurrently(store, raw, [forward, backward], gated=("c/0", "c/1"))
    first, second = VALUES[:16].tobytes(), VALUES[N:N + 16].tobytes()
    assert results == [first + second, second + first]
