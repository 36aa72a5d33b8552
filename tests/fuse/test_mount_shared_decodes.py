"""Concurrent readers of one chunk through a real mount share one decode
(engine/decodes_in_progress.py): a thumbnailer's threads reading one file at once."""

import os
import re
import threading

import numpy as np
import zarr
from zarr.codecs import GzipCodec

from mounting import mounted

N = 16 << 20  # one 16 MiB gzip chunk: its decode lasts long enough for the readers to meet in it
READERS = 4
READ = 16 << 10


def test_concurrent_small_reads_of_one_chunk_decode_it_once(tmp_path):
    root = tmp_path / "h"
    values = (np.arange(N, dtype=np.uint32) * 2654435761 >> 27).astype("u1")  # compressible, not constant
    zarr.open_group(str(root), mode="w")
    zarr.create_array(store=str(root / "a"), shape=(N,), chunks=(N,), dtype="u1", compressors=GzipCodec(level=1))[...] = values
    offsets = [i * (N // READERS) for i in range(READERS)]
    results = [None] * READERS
    with mounted(root, tmp_path, "ro", "debug") as m:
        fd = os.open(m / "a.bin", os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # each pread one READ of 16 KiB
            start = threading.Barrier(READERS)

            def read(i):
                start.wait()
                results[i] = os.pread(fd, READ, offsets[i])

            threads = [threading.Thread(target=read, args=(i,)) for i in range(READERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        finally:
            os.close(fd)
        log = m.settled_log()
    assert results == [values[o:o + READ].tobytes() for o in offsets]
    assert len(re.findall(r"decoded a chunk a/c/0 ", log)) == 1, re.findall(r".*decoded.*", log)
