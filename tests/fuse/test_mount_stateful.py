"""A bytearray model against a mounted .bin file under interleaved writes, reads, fsyncs and remounts."""

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import zarr
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mount_data import flat
from mounting import Remounts

SIZE = 24 * 20 * 2  # uint16 (24, 20), nested shards with overhanging edges


class MountedFile(Remounts, RuleBasedStateMachine):
    held = "a.zarr.bin"

    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.root = self.tmp / "a.zarr"
        z = zarr.create_array(str(self.root), shape=(24, 20), chunks=(16, 16), dtype="uint16", fill_value=9,
                              compressors=None, serializer=zarr.codecs.ShardingCodec(
                                  chunk_shape=(8, 8), codecs=[zarr.codecs.ShardingCodec(chunk_shape=(4, 4))]))
        z[5:] = np.arange(19 * 20).reshape(19, 20)
        self.model = bytearray(flat(np.asarray(z[...])))
        self._mount()

    @rule(offset=st.integers(0, SIZE - 1), data=st.binary(min_size=1, max_size=200))
    def write(self, offset, data):
        data = data[:SIZE - offset]
        assert os.pwrite(self.fd, data, offset) == len(data)
        self.model[offset:offset + len(data)] = data

    @rule(offset=st.integers(0, SIZE + 10), size=st.integers(0, 300))
    def read(self, offset, size):
        assert os.pread(self.fd, size, offset) == bytes(self.model[offset:offset + size])

    @rule()
    def fsync(self):
        os.fsync(self.fd)

    @precondition(lambda self: self.mounts < 4)
    @rule()
    def remount(self):
        self._unmount()
        assert flat(np.asarray(zarr.open_array(str(self.root))[...])) == bytes(self.model)
        self._mount()

    @invariant()
    def size_never_changes(self):
        assert os.fstat(self.fd).st_size == SIZE

    def teardown(self):
        try:
            self._unmount()
            assert flat(np.asarray(zarr.open_array(str(self.root))[...])) == bytes(self.model)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)  # its own directory, failed or not


MountedFile.TestCase.settings = settings(max_examples=8, stateful_step_count=25, deadline=None)
test_mounted_file_matches_a_bytearray = MountedFile.TestCase
