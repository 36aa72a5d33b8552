"""Readers on other machines see changes (issue 28, section 5): two mounts of one SeaweedFS
prefix, a reader (metadata_ttl=2, read-only or writable) that holds the array open, by a descriptor and by a
memory map, and a writer. Once the reader's daemon learns that the stored values changed, the
kernel's pages and attributes of every file showing the array are dropped: new opens, the held
descriptor and the map all see the write."""

import os

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

from mounting import mounted, wait_for
from servers.seaweed import unique_prefix

SHAPE = (64, 512)
REGION = slice(16 * 512 * 2, 20 * 512 * 2)  # rows 16-19, bytes of <u2


def mount(seaweed, prefix, tmp_path, *options, name):
    return mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options(*options), name=name, env=seaweed.env())


def region_of(data: bytes) -> bytes:
    return data[REGION]


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_a_reader_holding_the_array_open_sees_another_mounts_write(seaweed, tmp_path, mode):
    """`mode` "rw": the reader's mount is writable, so the kernel drops no page for a new mtime
    (its own writes move it: fs/kernel_caching.py); its daemon drops them for the other's write."""
    prefix = unique_prefix("readers")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array(
        "a", shape=SHAPE, chunks=(8, 512), dtype="u2", compressors=[ZstdCodec(level=1)])[...] = 1
    new = np.full(4 * 512, 7, "<u2").tobytes()
    with mount(seaweed, prefix, tmp_path, mode, "metadata_ttl=2", name="reader") as reader, \
            mount(seaweed, prefix, tmp_path, name="writer") as writer:
        held = open(reader / "a.bin", "rb")
        mapped = np.memmap(reader / "a.bin", mode="r", dtype="<u2", shape=SHAPE)
        try:
            assert (np.frombuffer(held.read(), "<u2") == 1).all()
            assert (mapped == 1).all()  # every page of it is in the reader's page cache now
            assert (np.frombuffer((reader / "a.npy").read_bytes()[-2 * 512:], "<u2") == 1).all()
            with open(writer / "a.bin", "r+b") as f:
                os.pwrite(f.fileno(), new, REGION.start)
                os.fsync(f.fileno())
            before = os.stat(reader / "a.bin").st_mtime_ns
            # the reader's daemon learns of the change when it looks at the stored values again
            # (metadata_ttl); a stat shows it has: from then on, every way of reading sees the write
            wait_for(lambda: os.stat(reader / "a.bin").st_mtime_ns != before, timeout=30,
                     what="the reader's daemon to see the new mtime")
            assert region_of((reader / "a.bin").read_bytes()) == new, "a new open"
            assert os.pread(held.fileno(), len(new), REGION.start) == new, "the held descriptor"
            assert (mapped[16:20] == 7).all(), "the memory map"
            npy = (reader / "a.npy").read_bytes()
            assert npy[-SHAPE[0] * SHAPE[1] * 2:][REGION] == new  # the views of the array too
        finally:
            del mapped
            held.close()


def test_a_memory_map_alone_is_refreshed_without_any_request(seaweed, tmp_path):
    """A reader that only touches pages of its map sends the daemon nothing: the daemon looks at
    the stored values of arrays held open every metadata_ttl by itself."""
    prefix = unique_prefix("mapped")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array(
        "a", shape=SHAPE, chunks=(8, 512), dtype="u2", compressors=[ZstdCodec(level=1)])[...] = 1
    with mount(seaweed, prefix, tmp_path, "ro", "metadata_ttl=1", name="reader") as reader:
        maps = [np.memmap(reader / "a.bin", mode="r", dtype="<u2", shape=SHAPE)]  # a list: unmapped at the end
        try:
            assert (maps[0] == 1).all()
            other = zarr.open_array(seaweed.zarr_store(prefix + "/a"), mode="r+")
            other[16:20] = 7  # another machine, through zarr-python
            wait_for(lambda: (maps[0][16:20] == 7).all(), timeout=30, what="the memory map to see the write")
            assert (maps[0][:16] == 1).all() and (maps[0][20:] == 1).all()
        finally:
            maps.clear()
