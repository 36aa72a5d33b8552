"""BufferPool: lent buffers come back and are lent again, within a byte bound."""

import numpy as np

from zarrfs.engine.buffers import BufferPool


def test_a_returned_buffer_is_lent_again():
    pool = BufferPool(1 << 20)
    with pool.lend((4, 8), "<f4") as first:
        assert first.shape == (4, 8) and first.dtype == np.dtype("<f4") and first.flags.c_contiguous
        address = first.ctypes.data
    with pool.lend((32,), "<u4") as again:  # the same size, another shape
        assert again.ctypes.data == address


def test_buffers_lent_at_once_are_distinct():
    pool = BufferPool(1 << 20)
    with pool.lend((100,), "u1") as a, pool.lend((100,), "u1") as b:
        a[...] = 1
        b[...] = 2
        assert (a == 1).all()


def test_idle_buffers_stay_within_the_bound():
    pool = BufferPool(1000)
    with pool.lend((600,), "u1") as a, pool.lend((600,), "u1") as b:
        kept = {a.ctypes.data, b.ctypes.data}
    assert pool.nbytes == 600
    with pool.lend((600,), "u1") as c, pool.lend((600,), "u1") as d:
        assert len(kept & {c.ctypes.data, d.ctypes.data}) == 1
    with pool.lend((2000,), "u1"):
        pass
    assert pool.nbytes == 600
