"""LocalStore: a staged value stays invisible until published, temporaries never collide, and a
listing stopped early leaves nothing open."""

import errno
import gc
import os
import subprocess
import sys

import pytest

import zarrfs
from helpers import Worker, descriptors_in, make_store
from leftovers import descriptors
from zarrfs.errors import StoreError
from zarrfs.stores import local as store_module
from zarrfs.stores.deferred_release import releases
from zarrfs.stores.local import TEMP_PREFIX, LocalStore


def temporaries(root) -> list[str]:
    return sorted(name for _, _, names in os.walk(root) for name in names if name.startswith(TEMP_PREFIX))


def test_staged_values_appear_only_when_published(tmp_path):
    store = LocalStore(tmp_path)
    store.set("c/0", b"old")
    staged = [store.stage("c/0", b"new"), store.stage("c/1", b"one")]
    assert store.get("c/0") == b"old" and store.get("c/1") is None
    store.publish(staged)
    assert store.get("c/0") == b"new" and store.get("c/1") == b"one"
    assert temporaries(tmp_path) == []


def test_discarded_values_leave_nothing(tmp_path):
    store = LocalStore(tmp_path)
    store.set("c/0", b"old")
    store.discard([store.stage("c/0", b"new"), store.stage("c/1", None)])
    assert store.get("c/0") == b"old" and temporaries(tmp_path) == []


def test_a_leftover_temporary_with_the_next_name_is_stepped_over(tmp_path):
    store = LocalStore(tmp_path)
    store.set("c/0", b"old")
    upcoming = next(store_module._temporaries) + 1
    leftover = tmp_path / "c" / f"{TEMP_PREFIX}{os.getpid()}-{upcoming}"
    leftover.write_bytes(b"someone else's")
    store.set("c/0", b"new")
    assert store.get("c/0") == b"new"
    assert leftover.read_bytes() == b"someone else's"


def test_a_listing_stopped_early_leaves_no_directory_open(tmp_path):
    for group in "abcd":
        for name in "xyz":
            (tmp_path / group / name).mkdir(parents=True)
            (tmp_path / group / name / "v").write_bytes(b"1")
    store = LocalStore(str(tmp_path))
    before = descriptors_in(tmp_path)
    listing = store.files("")
    next(listing)  # several directories are open now, waiting on the stack
    assert len(descriptors_in(tmp_path)) > len(before)  # the measurement sees them
    listing.close()
    assert descriptors_in(tmp_path) == before


def test_a_store_closed_or_let_go_holds_no_descriptor_of_its_directory(tmp_path):
    """A store holds its root open (every open is beneath it, contained.py); a process that
    opens and drops stores (the Python API, an Icechunk store's spill, a test run, which held
    over a thousand) keeps none of them once they are closed or let go."""
    (tmp_path / "v").write_bytes(b"1")
    closed = LocalStore(str(tmp_path))
    assert descriptors_in(tmp_path) == [str(tmp_path)]  # the measurement sees the root held
    closed.close()
    closed.close()  # twice is once
    for _ in range(20):
        assert LocalStore(str(tmp_path)).get("v") == b"1"
    gc.collect()  # a store is let go at a collection (its nodes call back into it: a cycle)
    assert descriptors_in(tmp_path) == []
    with pytest.raises(StoreError) as raised:  # a closed store opens nothing, wherever its old number leads now
        closed.get("v")
    assert raised.value.errno == errno.EBADF


def test_an_open_raw_view_closed_holds_no_descriptor_of_its_store(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    for mode in ("r", "r+"):
        with zarrfs.open_raw(str(root), "a", mode=mode) as view:
            assert view.read(0, 4) == bytes(4)
            assert descriptors_in(root)
        assert descriptors_in(root) == []


def descriptors_of_deleted_files() -> list[str]:
    return [link for link in descriptors() if link.endswith(" (deleted)")]


def test_replaced_and_deleted_values_are_freed_after_the_publish(tmp_path):
    """A publish holds the values it replaces so that freeing them is not its cost; once the
    release thread is done, nothing holds them."""
    store = LocalStore(tmp_path)
    store.set_many({f"c/{i}": os.urandom(5000) for i in range(20)})
    store.set_many({**{f"c/{i}": b"new" for i in range(10)}, **{f"c/{i}": None for i in range(10, 20)}})
    releases.settle()
    assert [store.get(f"c/{i}") for i in range(20)] == [b"new"] * 10 + [None] * 10
    assert not [link for link in descriptors_of_deleted_files() if str(tmp_path) in link]


def test_a_fifo_where_a_value_goes_is_replaced_without_being_opened(tmp_path):
    """Taking hold of the value being replaced opens nothing for reading: a FIFO in a hostile
    store would block an open for ever."""
    store = LocalStore(tmp_path)
    (tmp_path / "c").mkdir()
    os.mkfifo(tmp_path / "c" / "0")
    writer = Worker(store.set, "c/0", b"value").start()
    assert writer.wait(10), "publish waited on the FIFO"
    writer.join()  # raises what set() raised
    assert store.get("c/0") == b"value"


PUBLISH_WITH_FEW_DESCRIPTORS = r"""
import os, resource, sys
from zarrfs.stores.local import LocalStore
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
store = LocalStore(sys.argv[1])
keys = [f"c/{i // 6}/{i}" for i in range(720)]  # a publish keeps each directory open until it syncs it
store.set_many({key: b"old" for key in keys})
store.set_many({key: b"new" for key in keys})  # 720 values replaced in one publish
print(sum(store.get(key) == b"new" for key in keys))
"""


def test_a_publish_that_replaces_many_values_holds_few_descriptors(tmp_path):
    """A publish hands the values it replaces to the release thread as it goes: holding one
    descriptor per value, a large batch ran out of them (EMFILE) under a usual limit."""
    result = subprocess.run([sys.executable, "-c", PUBLISH_WITH_FEW_DESCRIPTORS, str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "720"


AFTER_FORK = r"""
import os, sys, threading
from zarrfs.stores.deferred_release import releases
directory = os.open(sys.argv[1], os.O_RDONLY)
releases.release([os.open(".", os.O_PATH, dir_fd=directory)])
releases.settle()  # the parent's release thread runs
pid = os.fork()
if pid == 0:
    held = [os.open(".", os.O_PATH, dir_fd=directory) for _ in range(10)]
    releases.release(held)
    done = threading.Event()
    threading.Thread(target=lambda: (releases.settle(), done.set()), daemon=True).start()
    settled = done.wait(10)
    still_open = sum(os.path.exists(f"/proc/self/fd/{fd}") for fd in held)
    os._exit(0 if settled and not still_open else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_drops_what_it_releases(tmp_path):
    """The release thread does not survive a fork: a child starts its own, instead of queueing
    for a thread that is not there (its references were never dropped, settle() never ended)."""
    result = subprocess.run([sys.executable, "-c", AFTER_FORK, str(tmp_path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_replaced_values_are_held_only_on_disk_file_systems(tmp_path):
    """NFS, SMB and FUSE file systems keep a held, unlinked file under a hidden name
    (.nfsXXXX, .fuse_hiddenXXXX): there a publish replaces values as it did before."""
    import zarr

    from mounting import mounted
    from zarrfs.stores.deferred_release import worth_holding

    assert worth_holding("/dev/shm")  # tmpfs
    assert LocalStore(tmp_path).hold_replaced == worth_holding(str(tmp_path))
    zarr.create_array(str(tmp_path / "a.zarr"), shape=(4,), chunks=(4,), dtype="u1")
    with mounted(tmp_path / "a.zarr", tmp_path) as mount:
        assert os.path.ismount(mount.path) and not worth_holding(str(mount.path))
