"""The kept decodes of small reads (engine/recent_chunks.py) start small and grow only where
keeping more would serve: each buffer kept is new memory until it is recycled."""

import numpy as np

from helpers import CountingStore, array_doc, open_raw_file, write_doc
from zarrfs.engine.buffers import BufferPool
from zarrfs.engine.recent_chunks import FIRST_SLOTS, RecentDecodes

CHUNK = 1 << 16
BLOSC = [{"name": "bytes", "configuration": {"endian": "little"}},
         {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4,
                                             "blocksize": 0}}]


def kept(recent: RecentDecodes, key, wanted=(0, 16)) -> bool:
    return recent.copy_out(key, (slice(wanted[0], wanted[1]),), np.zeros(wanted[1] - wanted[0], "u1"), list(wanted))


def keep(recent: RecentDecodes, pool: BufferPool, key, decoded=(0, 4096)) -> None:
    recent.keep(key, *pool.take((CHUNK,), "u1"), decoded)


def test_two_slots_at_first_and_the_oldest_pushed_out_goes_back_to_the_pool():
    pool = BufferPool()
    recent = RecentDecodes(pool, slots=16)
    for key in range(3):
        keep(recent, pool, key)
    assert recent.limit == FIRST_SLOTS == 2 and recent.nbytes == 2 * CHUNK
    assert pool.nbytes == CHUNK  # key 0's buffer, for the next decode
    assert not kept(recent, 0) and kept(recent, 1) and kept(recent, 2)


def test_a_slot_more_each_time_a_pushed_out_decode_would_have_served_a_read():
    pool = BufferPool()
    recent = RecentDecodes(pool, slots=3)
    for key in range(4):
        keep(recent, pool, key)  # 0 and 1 pushed out, each decoded over bytes 0-4096
    assert not kept(recent, 0, (5000, 5016)) and recent.limit == 2  # beyond what it held: no help
    assert not kept(recent, 1, (100, 116)) and recent.limit == 3  # within it: one more would have served
    assert not kept(recent, 1, (100, 116)) and recent.limit == 3  # counted once per push-out
    for key in range(4, 8):
        keep(recent, pool, key)
    assert not kept(recent, 4) and recent.limit == 3  # never past the slots
    assert recent.nbytes == 3 * CHUNK


def test_room_made_for_a_read_is_kept_within_the_slots():
    recent = RecentDecodes(BufferPool(), slots=8)
    recent.make_room(5)
    assert recent.limit == 5
    recent.make_room(3)
    assert recent.limit == 5
    recent.make_room(40)
    assert recent.limit == 8


def test_random_small_reads_keep_two_decodes_and_reads_of_several_boxes_room_for_their_chunks(tmp_path):
    """Through the engine: 4 KiB reads of 24 different blosc chunks keep two decodes (sixteen once,
    each new memory); a read of a partial row, a whole row and a partial row of a 2-D array keeps
    every chunk of its row, so its second box decodes nothing again."""
    values = np.random.default_rng(1).random((24 * CHUNK // 4,), "float32")
    write_doc(tmp_path, "a", array_doc(values.shape, "float32", (CHUNK // 4,), codecs=BLOSC))
    raw = open_raw_file(CountingStore(tmp_path), "a")
    raw.write(0, values.tobytes())
    raw.flush()
    raw = open_raw_file(CountingStore(tmp_path), "a", writable=False)
    recent = raw.array.shared.cache.recent
    for chunk in np.random.default_rng(2).permutation(24):
        offset = int(chunk) * CHUNK + 8192
        assert raw.read(offset, 4096) == values.tobytes()[offset:offset + 4096]
    assert recent.limit == FIRST_SLOTS and recent.nbytes == FIRST_SLOTS * CHUNK

    image = np.random.default_rng(3).random((64, 6 * 64), "float32")  # rows of 6 chunks of 64x64
    write_doc(tmp_path, "b", array_doc(image.shape, "float32", (64, 64), codecs=BLOSC))
    raw = open_raw_file(CountingStore(tmp_path), "b")
    raw.write(0, image.tobytes())
    raw.flush()
    raw = open_raw_file(CountingStore(tmp_path), "b", writable=False)
    row = image.shape[1] * 4
    assert raw.read(row + 100, 2 * row) == image.tobytes()[row + 100:3 * row + 100]
    assert raw.array.shared.cache.recent.limit == 6
