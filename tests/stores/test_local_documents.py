"""A local store's conditional writes of metadata documents among zarrfs processes
(stores/local.py, stores/directory_locks.py): the other writer is a real second process, which
holds the lock of the document's directory while it writes."""

import errno
import multiprocessing
import multiprocessing.synchronize
import os
import subprocess
import sys
import threading

import pytest

from zarrfs.errors import ConflictError, StoreError
from zarrfs.stores import directory_locks
from zarrfs.stores.local import LocalStore

DOCUMENT = "a/zarr.json"


def hold_and_write(root: str, held: multiprocessing.synchronize.Event, go: multiprocessing.synchronize.Event,
                   data: bytes | None) -> None:
    """Another zarrfs process: holds the document's directory, and on `go` writes `data` there
    (None: writes nothing) and lets the lock go."""
    store = LocalStore(root)
    with store.exclusive(DOCUMENT):
        held.set()
        go.wait(120)
        if data is not None:
            store.get_versioned(DOCUMENT)
            store.set(DOCUMENT, data)


class OtherProcess:
    def __init__(self, root: str, data: bytes | None):
        spawn = multiprocessing.get_context("spawn")
        self.held, self.go = spawn.Event(), spawn.Event()
        self.process = spawn.Process(target=hold_and_write, args=(root, self.held, self.go, data))

    def __enter__(self):
        self.process.start()
        assert self.held.wait(120)
        return self

    def __exit__(self, *exc):
        self.go.set()
        self.process.join(120)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        assert exc[0] is not None or self.process.exitcode == 0


def test_a_document_write_waits_for_the_other_process_and_loses_to_its_write(tmp_path):
    store = LocalStore(str(tmp_path))
    store.set(DOCUMENT, b"first")
    outcome: list[BaseException | None] = []
    read = threading.Event()

    def publish() -> None:  # a write is conditional on what its own thread read
        try:
            assert store.get_versioned(DOCUMENT)[0] == b"first"
            read.set()
            store.set(DOCUMENT, b"mine")
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    with OtherProcess(str(tmp_path), b"theirs") as other:
        writer = threading.Thread(target=publish)
        writer.start()  # it waits for the other process's lock, which then writes
        assert read.wait(60)
        other.go.set()
        writer.join(120)
    assert isinstance(outcome[0], ConflictError) and DOCUMENT in str(outcome[0])
    assert store.get(DOCUMENT) == b"theirs"
    assert not [p.name for p in (tmp_path / "a").iterdir() if p.name != "zarr.json"]  # no temporary left


def test_a_lock_held_past_the_deadline_fails_the_write_naming_the_directory(tmp_path):
    store = LocalStore(str(tmp_path), lock_deadline=0.2)
    store.set(DOCUMENT, b"first")
    with OtherProcess(str(tmp_path), None) as other:
        with pytest.raises(StoreError) as caught:
            store.set(DOCUMENT, b"mine")
    assert caught.value.errno == errno.ETIMEDOUT
    assert str(caught.value) == (f"{tmp_path / 'a'}: process {other.process.pid} held the lock of its documents "
                                 f"for 0.2 s; nothing was written")
    assert store.get(DOCUMENT) == b"first"
    assert not [p.name for p in (tmp_path / "a").iterdir() if p.name != "zarr.json"]


def test_a_chunk_is_written_whatever_another_process_holds(tmp_path):
    store = LocalStore(str(tmp_path), lock_deadline=0.2)
    store.set(DOCUMENT, b"first")
    with OtherProcess(str(tmp_path), None):
        store.set("a/c/0", b"chunk")  # chunks are not conditional: no lock taken
    assert store.get("a/c/0") == b"chunk"


def test_a_file_system_without_flock_writes_documents_unlocked_and_says_so_once(tmp_path, monkeypatch, caplog):
    # no file system here refuses flock on a directory (tmpfs, ext4, FUSE all take it; NFS takes it locally)
    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(directory_locks.fcntl, "flock", no_flock)
    store = LocalStore(str(tmp_path))
    store.set(DOCUMENT, b"first")
    store.get_versioned(DOCUMENT)
    store.set(DOCUMENT, b"second")  # conditional still: on the bytes read
    with store.exclusive(DOCUMENT):
        store.set(DOCUMENT, b"third")
    assert store.get(DOCUMENT) == b"third"
    lines = [r.getMessage() for r in caplog.records if "takes no lock" in r.getMessage()]
    assert lines == [f"{tmp_path / 'a'}: its file system takes no lock (No locks available): other zarrfs "
                     f"processes' writes of its documents are not held off"]


def test_the_holds_of_directories_written_are_let_go_with_their_locks(tmp_path):
    """A long-lived mount writes documents in ever new directories (arrays made, moved,
    deleted): what it keeps of each directory's lock goes with its last hold, so its memory
    does not grow with every directory it ever wrote."""
    store = LocalStore(str(tmp_path))
    for i in range(50):
        store.set(f"a{i}/zarr.json", b"{}")
        with store.exclusive(f"a{i}/zarr.json"), store.exclusive(f"a{i}/zarr.json"):
            store.set(f"a{i}/zarr.json", b"{ }")
    assert directory_locks._held == {}


HOLD_FOREVER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_any_program_that_holds_the_directory_fails_the_write_in_time_and_is_named(tmp_path):
    """Whoever can open the directory can hold its lock (another user's `flock DIR sleep`): a
    document write then fails within the deadline, and its message names the holder, for the
    operator to find it."""
    store = LocalStore(str(tmp_path), lock_deadline=0.2)
    store.set(DOCUMENT, b"first")
    with subprocess.Popen([sys.executable, "-c", HOLD_FOREVER, str(tmp_path / "a")], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout.readline() == "held\n"
            with pytest.raises(StoreError) as caught:
                store.set(DOCUMENT, b"mine")
        finally:
            holder.stdin.close()
    assert caught.value.errno == errno.ETIMEDOUT
    assert f"{tmp_path / 'a'}: process {holder.pid} held the lock" in str(caught.value)
    store.set(DOCUMENT, b"mine")  # once it let go
    assert store.get(DOCUMENT) == b"mine"


def test_of_two_threads_that_read_one_document_the_second_to_write_is_a_conflict(tmp_path):
    """A process's threads share the directory's lock, so what keeps one thread's write from
    undoing another's is the comparison: each write is conditional on what its own thread read
    (an attribute edit and a growth's new shape of one zarr.json, in one mount). The second
    writer's document, built on the bytes before the first one's, is a conflict, not stored."""
    store = LocalStore(str(tmp_path))
    store.set(DOCUMENT, b"first")
    read, written = threading.Event(), threading.Event()
    outcome: list[BaseException | None] = []

    def edit() -> None:  # reads, then writes once the other thread has written
        store.get_versioned(DOCUMENT)
        read.set()
        written.wait(60)
        try:
            store.set(DOCUMENT, b"built on first")
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    editor = threading.Thread(target=edit)
    editor.start()
    assert read.wait(60)
    store.get_versioned(DOCUMENT)
    store.set(DOCUMENT, b"grown")
    written.set()
    editor.join(60)
    assert isinstance(outcome[0], ConflictError) and store.get(DOCUMENT) == b"grown"
