"""The open-array table (fs/open_arrays.py) without a mount: one shared view per array, its
handles, retiring an array that is deleted or moved, and the write-back at unmount."""

import errno
import json
import threading

import numpy as np
import pytest
import zarr

from helpers import array_doc, group_doc, make_store
from servers.memory_store import MemoryStore
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.errors import RefusedError
from zarrfs.fs.hierarchy import Hierarchy
from zarrfs.fs.open_arrays import OpenArrays
from zarrfs.fs.stored_usage import Usage
from zarrfs.stores.contract import Capabilities
from zarrfs.stores.local import LocalStore


def table(root, tmp_path) -> tuple[OpenArrays, Hierarchy]:
    store = LocalStore(str(root))
    arrays = OpenArrays(store, ChunkCache(1 << 20), Usage(store), read_only=False, flush_interval=600.0,
                        recovery_dir=str(tmp_path / "recovery"))
    return arrays, Hierarchy(store)


def stored(root) -> list[int]:
    return zarr.open_array(str(root / "a"))[...].tolist()


@pytest.fixture
def root(tmp_path):
    return make_store(tmp_path / "s.zarr")


def test_every_handle_shares_one_view_until_the_last_closes(root, tmp_path):
    arrays, hierarchy = table(root, tmp_path)
    node = hierarchy.node("a")
    first, second = arrays.open(node), arrays.open(node)
    assert first is second and first.handles == 2 and arrays.get("a") is first
    assert arrays.open(node, hold=False).handles == 2  # a preview's look holds no handle
    arrays.close(first)
    arrays.close(second)
    assert first.handles == 0


def test_a_flush_stores_what_was_written_and_reports_a_kept_background_error(root, tmp_path):
    arrays, hierarchy = table(root, tmp_path)
    opened = arrays.open(hierarchy.node("a"))
    opened.raw.write(4, np.array([9], "<i4").tobytes())
    assert stored(root) == [0, 1, 2, 3]
    arrays.flush(opened)
    assert stored(root) == [0, 9, 2, 3] and not opened.raw.array.dirty
    opened.error = RefusedError("from the flusher", errno.ENOSPC)
    with pytest.raises(RefusedError):
        arrays.flush(opened)
    arrays.flush(opened)  # reported once


@pytest.mark.parametrize("keep", [True, False])
def test_a_retired_array_serves_no_more_and_is_stored_only_when_kept(root, tmp_path, keep):
    arrays, hierarchy = table(root, tmp_path)
    opened = arrays.open(hierarchy.node("a"))
    opened.raw.write(0, np.array([7], "<i4").tobytes())
    arrays.retire("a", keep=keep, wait=10.0)
    assert opened.retired and arrays.get("a") is None
    assert stored(root) == ([7, 1, 2, 3] if keep else [0, 1, 2, 3])
    arrays.stop()  # the final write-back leaves a retired array alone
    assert stored(root) == ([7, 1, 2, 3] if keep else [0, 1, 2, 3])


def test_a_write_back_that_outlasts_the_bound_refuses_the_retirement_and_the_array_serves_again(root, tmp_path):
    arrays, hierarchy = table(root, tmp_path)
    opened = arrays.open(hierarchy.node("a"))
    lock = opened.raw.array.shared.flush_lock
    lock.acquire()  # as a write-back in progress holds it
    try:
        with pytest.raises(RefusedError) as refused:
            arrays.retire("a", keep=True, wait=0.01)
    finally:
        lock.release()
    assert refused.value.errno == errno.EBUSY
    assert not opened.retired and arrays.get("a") is opened


def test_stop_ends_the_flusher_and_stores_every_write(root, tmp_path):
    arrays, hierarchy = table(root, tmp_path)
    arrays.start()
    opened = arrays.open(hierarchy.node("a"))
    opened.raw.write(8, np.array([5, 6], "<i4").tobytes())
    arrays.close(opened)
    arrays.stop()
    assert stored(root) == [0, 1, 5, 6] and arrays.unstored == []


def test_a_truncate_is_stored_by_the_tables_write_back_and_known_as_this_mounts_own(tmp_path):
    """A truncate is stored by the table's flush (the mount's truncate asks it), the only
    write-back of it: on a store other machines write, that flush takes the new stored values
    as this mount's own, so the next look sees no other writer's change to drop caches for."""
    store = MemoryStore(Capabilities(remote=True, conditional_writes=True, listing=True))
    store.set("zarr.json", json.dumps(group_doc()).encode())
    store.set("a/zarr.json", json.dumps(array_doc([4, 2], "int32", [2, 2])).encode())
    arrays = OpenArrays(store, ChunkCache(1 << 20), Usage(store, lifetime=0), read_only=False, flush_interval=600.0,
                        recovery_dir=str(tmp_path / "recovery"))
    opened = arrays.open(Hierarchy(store).node("a"))
    opened.raw.write(0, np.arange(8, dtype="<i4").tobytes())
    arrays.flush(opened)
    opened.paths.add("/a.bin")
    opened.raw.truncate(3 * 8)
    arrays.flush(opened)
    assert json.loads(store.get("a/zarr.json"))["shape"] == [3, 2]
    assert arrays.stored_change("a") == []


def test_on_a_local_store_another_programs_change_is_told_from_the_mounts_own(root, tmp_path):
    """The mount's own write-back changes the stored values and is not taken for another
    writer's change; zarr-python's rewrite of a chunk is, and the files showing the array that
    were opened are given for the kernel to drop their pages, its cached chunks forgotten."""
    arrays, hierarchy = table(root, tmp_path)
    opened = arrays.open(hierarchy.node("a"))
    opened.paths.update({"/a.bin", "/a.npy"})
    assert opened.raw.read(0, 16) == np.array([0, 1, 2, 3], "<i4").tobytes()  # its chunks cached
    opened.raw.write(4, np.array([9], "<i4").tobytes())
    arrays.flush(opened)
    arrays.usage.forget("a")  # listed again at once, not after the listing's lifetime
    assert arrays.stored_change("a") == []
    zarr.open_array(str(root / "a"), mode="r+")[2] = 7
    arrays.usage.forget("a")
    assert arrays.stored_change("a") == ["/a.bin", "/a.npy"]
    assert opened.raw.read(0, 16) == np.array([0, 9, 7, 3], "<i4").tobytes()
    assert arrays.stored_change("a") == []  # told once


def test_a_listing_across_the_mounts_own_write_back_is_not_kept(root):
    """A listing of an array's stored values during which the mount's write-back ended (it forgot
    them) may hold part of that write-back: it is answered but not kept, so the next look lists
    again, rather than taking the whole write-back, listed later, for another writer's change."""
    store = LocalStore(str(root))
    listings = []

    class WriteBackEndsWhileListing:
        capabilities = store.capabilities

        def files(self, path, directories=False):
            listings.append(path)
            for index, item in enumerate(store.files(path, directories=directories)):
                if index == 0 and len(listings) == 1:
                    usage.forget(path)
                yield item

    usage = Usage(WriteBackEndsWhileListing())
    first = usage.of("a")
    assert usage.of("a") == first and listings == ["a", "a"]
    usage.of("a")
    assert listings == ["a", "a"]  # the second listing, across no write-back, is kept


def test_a_write_that_lands_as_the_flusher_finds_the_array_clean_is_the_mounts_own(root, tmp_path):
    """The flusher visits every open array; a write that lands after it found this one clean
    and before it took its batch is stored by that very visit. That store is the mount's own:
    the next look at the stored values (listed anew) tells no change, and so drops no kernel page
    of a file that may be written to at that moment (kernel_caching.py)."""
    arrays, hierarchy = table(root, tmp_path)
    opened = arrays.open(hierarchy.node("a"))
    opened.paths.add("/a.bin")
    flush = opened.raw.flush

    def written_meanwhile(*args, **kwargs):  # the write lands between the look and the batch
        opened.raw.write(4, np.array([9], "<i4").tobytes())
        return flush(*args, **kwargs)

    opened.raw.flush = written_meanwhile
    arrays.flush_all()
    assert stored(root) == [0, 9, 2, 3]
    arrays.usage.forget("a")  # listed again at once, not after the listing's lifetime
    assert arrays.stored_change("a") == []


def test_a_flush_that_looked_during_another_flush_of_the_mount_takes_its_own_store(root, tmp_path):
    """Two write-backs of one array (the flusher's and an fsync's): the second looks at the stored
    values while the first is storing, and sees the first one's chunks, which are the mount's own,
    not another writer's. It still takes what it stored as the mount's own, so no later look
    drops the kernel's pages for it."""
    store = LocalStore(str(root))
    arrays = OpenArrays(store, ChunkCache(1 << 20), Usage(store, lifetime=0), read_only=False, flush_interval=600.0,
                        recovery_dir=str(tmp_path / "recovery"))
    opened = arrays.open(Hierarchy(store).node("a"))
    opened.paths.add("/a.bin")
    flush, calls = opened.raw.flush, []
    first_stored, second_waits, first_ends, second_goes = (threading.Event() for _ in range(4))

    def in_turn(*args, **kwargs):
        calls.append(None)
        if len(calls) == 1:  # the first: stores, then waits for the second to have looked
            flush(*args, **kwargs)
            first_stored.set()
            assert first_ends.wait(60)
        else:  # the second: looked already, stores once the first is done
            second_waits.set()
            assert second_goes.wait(60)
            flush(*args, **kwargs)

    opened.raw.flush = in_turn
    opened.raw.write(4, np.array([9], "<i4").tobytes())
    first = threading.Thread(target=arrays.flush, args=(opened,))
    first.start()
    assert first_stored.wait(60)
    opened.raw.write(8, np.array([8], "<i4").tobytes())
    second = threading.Thread(target=arrays.flush, args=(opened,))
    second.start()
    assert second_waits.wait(60)
    first_ends.set()
    first.join(60)
    second_goes.set()
    second.join(60)
    assert stored(root) == [0, 9, 8, 3]
    assert arrays.stored_change("a") == []
