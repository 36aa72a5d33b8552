"""Concurrent readers of one chunk through a real mount share one decode
(engine/decodes_in_progress.py): a thumbnailer's threads reading one file at once."""

import errno
import os
import re
import threading

import numpy as np
import obstore
import zarr
from zarr.codecs import GzipCodec

from mounting import mounted, wait_for
from servers.fault_proxy import STALL, FaultProxy
from servers.seaweed import unique_prefix

N = 16 << 20  # one 16 MiB gzip chunk: its decode lasts long enough for the readers to meet in it
READERS = 4
READ = 16 << 10


VALUES = (np.arange(N, dtype=np.uint32) * 2654435761 >> 27).astype("u1")  # compressible, not constant
OFFSETS = [i * (N // READERS) for i in range(READERS)]


def one_chunk_array(tmp_path):
    root = tmp_path / "h"
    zarr.open_group(str(root), mode="w")
    zarr.create_array(store=str(root / "a"), shape=(N,), chunks=(N,), dtype="u1", compressors=GzipCodec(level=1))[...] = VALUES
    return root


def concurrent_preads(m, proxy: FaultProxy | None = None) -> tuple[list, str]:
    """READERS preads of 16 KiB of a.bin started together: their bytes or errnos, and the log.
    Through `proxy`, the first reader's GET of the chunk is held until the others wait for its
    decode (-o debug logs each wait), so that all of them meet in it, however loaded the machine."""
    results = [None] * READERS
    fd = os.open(m / "a.bin", os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # each pread one READ of 16 KiB
        start = threading.Barrier(READERS)

        def read(i):
            start.wait()
            try:
                results[i] = os.pread(fd, READ, OFFSETS[i])
            except OSError as e:
                results[i] = e.errno

        threads = [threading.Thread(target=read, args=(i,)) for i in range(READERS)]
        if proxy:
            proxy.add(STALL, "GET", "/a/c/0")  # released by a reset: the store's client sends it again
        for t in threads:
            t.start()
        if proxy:
            proxy.wait_for(lambda: proxy.count("GET", "/a/c/0", STALL) == 1, what="the first reader's GET")
            wait_for(lambda: m.log().count("chunk a/c/0: waiting for the decode another read began") >= READERS - 1,
                     30, what="the other readers waiting for its decode")
            proxy.release()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "a pread never returned"
    finally:
        os.close(fd)
    return results, m.settled_log()


def test_concurrent_small_reads_of_one_chunk_decode_it_once(tmp_path):
    with mounted(one_chunk_array(tmp_path), tmp_path, "ro", "debug") as m:
        results, log = concurrent_preads(m)
    assert results == [VALUES[o:o + READ].tobytes() for o in OFFSETS]
    # One decode when the readers meet in it (tests/engine/test_shared_decodes.py makes sure they
    # do); a reader that a loaded machine delays into the microseconds between the end of that
    # decode and its being kept for small reads decodes once more: never one per reader.
    assert len(re.findall(r"decoded a chunk a/c/0 ", log)) <= 2, re.findall(r".*decoded.*", log)


def test_a_shared_decode_that_fails_gives_each_read_eio_and_one_line(seaweed, tmp_path):
    """Every READ fails with one line naming the file and the chunk, and the readers, held to
    meet in the decode (its GET stalled in a fault proxy until they wait for it), read the
    chunk once between them (the kernel retries each failed READ once with a page: those read
    it at most once each)."""
    prefix = unique_prefix("shared-decode")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w")
    zarr.create_array(store=seaweed.zarr_store(prefix), name="a", shape=(N,), chunks=(N,), dtype="u1",
                      compressors=GzipCodec(level=1))[...] = VALUES
    store = seaweed.store(prefix)
    data = bytearray(obstore.get(store, "a/c/0").bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)  # the gzip stream's check fails at its end
    obstore.put(store, "a/c/0", bytes(data))
    host, port = seaweed.endpoint.removeprefix("http://").split(":")
    with FaultProxy((host, int(port))) as proxy, \
            mounted(seaweed.url(prefix), tmp_path, f"endpoint={proxy.endpoint}", "ro", "debug",
                    env=seaweed.env()) as m:
        results, log = concurrent_preads(m, proxy)
    assert results == [errno.EIO] * READERS
    failed = re.findall(r"read /a\.bin offset=\d+ size=\d+ -> -5", log)
    errors = re.findall(r"ERROR .*", log)
    assert len(errors) == len(failed) >= READERS, errors
    assert all("/a.bin" in line and "chunk a/c/0" in line for line in errors), errors
    assert len(re.findall(r"store read a/c/0 whole", log)) < len(failed), log
