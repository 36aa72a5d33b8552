"""Many machines on one bucket (issue 28, section 6): four daemons on one SeaweedFS prefix, two
writing disjoint elements of one shard at the same time (some of them within one inner chunk),
two reading, one of them holding the file open. Every write lands (conditional PUTs refused and
merged), the readers see the writers' data once their daemons look again, and after all unmount
zarr-python reads exactly what was written."""

import os
import threading

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from mounting import mounted, wait_for
from servers.seaweed import unique_prefix

SHAPE = (64, 256)
ROUNDS = 4
# (rows, columns) of each writer: disjoint, all in shard 0 (rows 0-31), and row 24 shared in halves
REGIONS = {
    "w1": [(slice(0, 8), slice(0, 256)), (slice(24, 25), slice(0, 128))],
    "w2": [(slice(16, 24), slice(0, 256)), (slice(24, 25), slice(128, 256))],
}


def mount(seaweed, prefix, tmp_path, *options, name):
    return mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options(*options), name=name, env=seaweed.env())


def write_rounds(path, name, errors):
    """ROUNDS rounds of writing this writer's regions (round r: value 100*writer+r), each fsynced."""
    try:
        with open(path, "r+b") as f:
            for r in range(ROUNDS):
                value = (1 if name == "w1" else 2) * 100 + r
                for rows, cols in REGIONS[name]:
                    for row in range(rows.start, rows.stop):
                        data = np.full(cols.stop - cols.start, value, "<u2").tobytes()
                        os.pwrite(f.fileno(), data, (row * SHAPE[1] + cols.start) * 2)
                os.fsync(f.fileno())
    except Exception as e:  # reported by the test's thread
        errors.append(e)


def expected() -> np.ndarray:
    values = np.full(SHAPE, 1, "<u2")
    for name, regions in REGIONS.items():
        for rows, cols in regions:
            values[rows, cols] = (1 if name == "w1" else 2) * 100 + ROUNDS - 1
    return values


def test_two_writers_and_two_readers_on_one_shard(seaweed, tmp_path):
    prefix = unique_prefix("many")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array(
        "a", shape=SHAPE, chunks=(8, 256), shards=(32, 256), dtype="u2", compressors=[ZstdCodec(level=1)])[...] = 1
    want = expected()
    with mount(seaweed, prefix, tmp_path, name="w1") as w1, mount(seaweed, prefix, tmp_path, name="w2") as w2, \
            mount(seaweed, prefix, tmp_path, "ro", "metadata_ttl=1", name="r1") as r1, \
            mount(seaweed, prefix, tmp_path, "ro", "metadata_ttl=1", name="r2") as r2:
        held = open(r1 / "a.bin", "rb")
        try:
            assert (np.frombuffer(held.read(), "<u2") == 1).all()
            assert (np.frombuffer((r2 / "a.bin").read_bytes(), "<u2") == 1).all()
            errors: list = []
            writers = [threading.Thread(target=write_rounds, args=(m / "a.bin", name, errors))
                       for m, name in ((w1, "w1"), (w2, "w2"))]
            for t in writers:
                t.start()
            for t in writers:
                t.join(120)
            assert not errors and not any(t.is_alive() for t in writers), errors

            def seen(data: bytes) -> bool:
                return np.array_equal(np.frombuffer(data, "<u2").reshape(SHAPE), want)

            wait_for(lambda: seen(os.pread(held.fileno(), want.nbytes, 0)), timeout=30,
                     what="the reader holding the file to see both writers")
            wait_for(lambda: seen((r2 / "a.bin").read_bytes()), timeout=30, what="a new open to see both writers")
        finally:
            held.close()
    stored = zarr.open_array(seaweed.zarr_store(prefix + "/a"), mode="r")[...]
    assert np.array_equal(stored, want)
