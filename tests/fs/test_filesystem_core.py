"""The file system core without FUSE: every request a mount serves, asked of FileSystem on a
local store, answered with records or typed errors; and the write bound, which the Python API
follows too."""

import errno
import os
import shutil
import stat
import threading

import numpy as np
import pytest
import zarr

import zarrfs
from core import core_of
from helpers import Worker, descriptors_in, make_store
from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.errors import ZarrfsError
from zarrfs.fs.filesystem import FileSystem, Options
from zarrfs.stores.local import LocalStore

MiB = 1 << 20


@pytest.fixture
def core(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    fs = FileSystem(str(root), Options(recovery_dir=str(tmp_path / "recovery")), HierarchyEdits)
    try:
        yield fs, root
    finally:
        fs.stop()  # the last write-back


def refused(code: int, method, *args) -> None:
    with pytest.raises(ZarrfsError) as raised:
        method(*args)
    assert raised.value.errno == code


def test_attributes_and_listings_are_records(core):
    fs, _ = core
    data = fs.getattr("/a.bin")
    assert stat.S_ISREG(data["st_mode"]) and data["st_mode"] & 0o200 and data["st_size"] == 16
    assert stat.S_ISDIR(fs.getattr("/sub")["st_mode"]) and fs.getattr("/sub")["st_nlink"] == 2
    names = [name for name, _ in fs.readdir("/")]
    assert names[:2] == [".", ".."] and {"a.bin", "a.json", "sub"} <= set(names)
    assert {fs.attributes(entry)["st_ino"] for _, entry in fs.readdir("/")[2:]} == \
        {fs.getattr(f"/{name}")["st_ino"] for name in names[2:]}
    refused(errno.ENOENT, fs.getattr, "/nothing.bin")
    refused(errno.ENOTDIR, fs.readdir, "/a.bin")


def test_open_read_write_fsync_release(core):
    fs, root = core
    fh = fs.open("/a.bin", os.O_RDWR)
    assert np.frombuffer(fs.read(fh, 0, 16), "<i4").tolist() == [0, 1, 2, 3]
    out = np.zeros(8, np.uint8)
    assert fs.read_into(fh, 8, out) == 8 and np.frombuffer(out.tobytes(), "<i4").tolist() == [2, 3]
    assert fs.write(fh, np.array([7, 8], "<i4").tobytes(), 4) == 8
    assert zarr.open_array(str(root / "a"))[:].tolist() == [0, 1, 2, 3]  # held until written back
    fs.fsync(fh)
    assert zarr.open_array(str(root / "a"))[:].tolist() == [0, 7, 8, 3]
    assert fs.write(fh, np.array([5, 6], "<i4").tobytes(), 12) == 4  # the part that fits
    refused(errno.EFBIG, fs.write, fh, b"\0\0\0\0", 16)
    fs.flush(fh)  # close() stores what the handle wrote
    assert zarr.open_array(str(root / "a"))[:].tolist() == [0, 7, 8, 5]
    fs.release(fh)
    refused(errno.EBADF, fs.read, fh, 0, 4)


def test_refusals_are_typed_errors(core):
    fs, _ = core
    refused(errno.EISDIR, fs.open, "/sub", os.O_RDONLY)
    fh = fs.open("/a.bin", os.O_RDONLY)
    refused(errno.EBADF, fs.write, fh, b"\0\0\0\0", 0)
    fs.release(fh)
    refused(errno.EPERM, fs.truncate, "/a.bin", 8)
    refused(errno.EPERM, fs.refuse_change, "/a.bin")


def test_hierarchy_edits_through_the_core(core):
    fs, root = core
    fs.mkdir("/g")
    assert stat.S_ISDIR(fs.getattr("/g")["st_mode"]) and (root / "g" / "zarr.json").exists()
    fs.rename("/sub", "/renamed")
    assert not (root / "sub").exists() and zarr.open_group(str(root / "renamed")).attrs["title"] == "inner"
    fh = fs.open("/a.bin", os.O_RDONLY)
    for name in files_of(fs, "/", "a"):
        fs.unlink(f"/{name}")
    assert not (root / "a").exists()
    refused(errno.ENOENT, fs.getattr, "/a.bin")
    refused(errno.ESTALE, fs.read, fh, 0, 4)  # deleted while open
    fs.release(fh)
    refused(errno.EEXIST, fs.rename, "/renamed", "/g", 0)
    refused(errno.EBUSY, fs.rmdir, "/")
    fs.rmdir("/g")
    assert not (root / "g").exists()


def files_of(fs, directory: str, stem: str) -> list[str]:
    return sorted(name for name, entry in fs.readdir(directory) if name.startswith(stem + ".") and entry.kind != "dir")


def test_an_array_goes_with_the_last_of_its_files(core):
    """Unlinking one of an array's files hides it and deletes no data; the array is deleted
    with the last of its files, in any order (a file manager stats each one before deleting it)."""
    fs, root = core
    names = files_of(fs, "/", "a")
    assert len(names) > 4 and names[0] == "a.bin"  # the data file first, as pcmanfm deletes a selection
    for i, name in enumerate(names[:-1]):
        fs.unlink(f"/{name}")
        refused(errno.ENOENT, fs.getattr, f"/{name}")
        refused(errno.ENOENT, fs.unlink, f"/{name}")
        assert files_of(fs, "/", "a") == names[i + 1:]
        for other in names[i + 1:]:
            fs.getattr(f"/{other}")
        assert zarr.open_array(str(root / "a"))[...].tolist() == [0, 1, 2, 3]
    fs.unlink(f"/{names[-1]}")
    assert not (root / "a").exists() and files_of(fs, "/", "a") == []
    np.save(root.parent / "a.npy", np.arange(3, dtype="<i8"))  # a new array of that name shows every file
    fh = fs.create("/a.npy")
    fs.write(fh, (root.parent / "a.npy").read_bytes(), 0)
    fs.flush(fh)
    fs.release(fh)
    assert files_of(fs, "/", "a") == names


def test_a_file_deleted_alone_stays_hidden_until_its_node_moves(core):
    fs, root = core
    fs.unlink("/a.vrt")
    fs.unlink("/sub/zarr.json")
    assert "a.vrt" not in dict(fs.readdir("/")) and "zarr.json" not in dict(fs.readdir("/sub"))
    refused(errno.ENOENT, fs.open, "/a.vrt", os.O_RDONLY)
    assert (root / "a" / "zarr.json").exists() and zarr.open_group(str(root / "sub")).attrs["title"] == "inner"
    fs.rename("/a.bin", "/b.bin")
    fs.rename("/sub", "/sub2")
    assert {"b.vrt", "b.bin"} <= set(dict(fs.readdir("/"))) and "zarr.json" in dict(fs.readdir("/sub2"))
    fs.unlink("/sub2/zarr.json")
    fs.rmdir("/sub2")  # its documents go with it
    assert not (root / "sub2").exists()


def copied_npy(fs, root, path: str, values: np.ndarray) -> None:
    """`cp x.npy PATH` through the core: the mount makes the array when the copy is closed."""
    np.save(root.parent / "in.npy", values)
    fh = fs.create(path)
    fs.write(fh, (root.parent / "in.npy").read_bytes(), 0)
    fs.flush(fh)
    fs.release(fh)


def test_a_node_made_where_one_with_hidden_files_was_shows_every_file(core):
    """Files hidden alone were kept by path until remount: an array another program deleted
    and made again, or one the mount made at that name (cp x.npy a.npy after rm a.json), came
    up with a.json hidden."""
    fs, root = core
    names = files_of(fs, "/", "a")
    fs.unlink("/a.json")
    shutil.rmtree(root / "a")  # another program deletes a: the next listing has no a
    assert files_of(fs, "/", "a") == []
    zarr.open_group(str(root)).create_array("a", shape=(4,), chunks=(2,), dtype="<i4", fill_value=0)
    assert files_of(fs, "/", "a") == names
    fs.unlink("/a.json")
    shutil.rmtree(root / "a")
    copied_npy(fs, root, "/a.npy", np.arange(4, dtype="<i4"))  # the mount makes a at once, no listing between
    assert files_of(fs, "/", "a") == names


def test_a_node_made_below_a_group_another_program_deleted_shows_every_file(core):
    """A listing that found a child group gone forgot the files hidden of that group only, not
    of the nodes below it: an array another program made again at the old place (rm -r sub,
    then a new sub/x) came up with the file deleted from the old sub/x hidden."""
    fs, root = core
    zarr.open_group(str(root / "sub")).create_array("x", shape=(4,), chunks=(2,), dtype="<i4", fill_value=0)
    names = files_of(fs, "/sub", "x")
    fs.unlink("/sub/x.json")
    shutil.rmtree(root / "sub")  # another program deletes the group: the next listing of / has no sub
    assert "sub" not in dict(fs.readdir("/"))
    zarr.open_group(str(root)).create_group("sub").create_array("x", shape=(4,), chunks=(2,), dtype="<i4",
                                                                  fill_value=0)
    assert files_of(fs, "/sub", "x") == names


class SlowListings(LocalStore):
    """The local store, but the next listing of `directory` is taken, then held until `go` is
    set: a listing that ran while other requests went on."""

    def __init__(self, root: str, directory: str):
        super().__init__(root)
        self.directory, self.taken, self.go = directory, threading.Event(), threading.Event()

    def list_dir(self, prefix: str) -> list[str]:
        names = super().list_dir(prefix)
        if prefix == self.directory and not self.taken.is_set():
            self.taken.set()
            self.go.wait(30)
        return names


def test_a_listing_forgets_no_file_hidden_after_it_began(tmp_path):
    """A listing that found a node gone forgot the files hidden of it, also those hidden while it
    ran: of an array made and deleted file by file meanwhile (rm NAME.*), the files hidden came
    back, the last unlink found files left, and the array stayed (then rmdir: ENOTEMPTY)."""
    root = make_store(tmp_path / "s.zarr")
    store = SlowListings(str(root), "sub")
    fs = FileSystem(str(root), Options(recovery_dir=str(tmp_path / "recovery")), HierarchyEdits, store=store)
    try:
        slow = Worker(fs.hierarchy.listing, "sub").start()  # its snapshot: no array in sub
        assert store.taken.wait(30)
        copied_npy(fs, root, "/sub/x.npy", np.arange(3, dtype="<i2"))
        names = files_of(fs, "/sub", "x")
        fs.unlink(f"/sub/{names[0]}")
        store.go.set()
        assert slow.wait(30)
        slow.join()  # what the listing raised, if it did
        for name in names[1:]:
            fs.unlink(f"/sub/{name}")
        assert not (root / "sub" / "x").exists()  # gone with its last file
        fs.rmdir("/sub")
    finally:
        store.go.set()
        fs.stop()


class HidingOnCommit(LocalStore):
    """The local store, where a file of each node made is hidden the moment the node is
    published: an unlink that came as soon as the new node showed."""

    hide = None

    def commit_node(self, staging: str, path: str, documents: dict[str, bytes]) -> None:
        super().commit_node(staging, path, documents)
        self.hide(path)


def test_a_file_hidden_as_soon_as_a_node_is_made_stays_hidden(tmp_path):
    """The mount forgot the files hidden at a path after it had made the node there: an unlink
    of the new node's file in between (a copy's release is not waited for) came back."""
    root = make_store(tmp_path / "s.zarr")
    store = HidingOnCommit(str(root))
    fs = FileSystem(str(root), Options(recovery_dir=str(tmp_path / "recovery")), HierarchyEdits, store=store)
    try:
        store.hide = lambda path: fs.hierarchy.hidden.hide(path, f"{path}.json")
        copied_npy(fs, root, "/x.npy", np.arange(3, dtype="<i2"))
        assert "x.bin" in dict(fs.readdir("/")) and "x.json" not in dict(fs.readdir("/"))
    finally:
        fs.stop()


def test_a_read_only_file_system_refuses_writes(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    fs = FileSystem(str(root), Options(read_only=True, recovery_dir=str(tmp_path / "recovery")), HierarchyEdits)
    refused(errno.EROFS, fs.open, "/a.bin", os.O_WRONLY)
    refused(errno.EROFS, fs.unlink, "/a.bin")
    refused(errno.EROFS, fs.mkdir, "/g")
    assert fs.getattr("/a.bin")["st_mode"] & 0o222 == 0


def written_back_while_writing(write, chunks: int, root) -> bool:
    """Writes `chunks` chunks of 1 MiB with `write(offset, data)`, nothing else: whether some of
    them were stored before any flush, fsync or close."""
    values = np.random.default_rng(5).integers(1, 255, chunks * MiB, dtype="u1")
    for offset in range(0, chunks * MiB, MiB):
        write(offset, values[offset:offset + MiB].tobytes())
    stored = zarr.open_array(str(root))[:]
    return bool(np.array_equal(stored[:MiB], values[:MiB]))


def test_the_write_bound_holds_in_the_core(tmp_path):
    root = tmp_path / "big.zarr"
    zarr.create_array(str(root), shape=(8 * MiB,), chunks=(MiB,), dtype="u1", fill_value=0)
    options = Options(recovery_dir=str(tmp_path / "recovery"), dirty_limit=2 * MiB, flush_interval=600.0)
    fs = FileSystem(str(root), options, HierarchyEdits)  # not started: no flusher thread, no timed write-back
    try:
        fh = fs.open("/big.zarr.bin", os.O_WRONLY)
        assert written_back_while_writing(lambda offset, data: fs.write(fh, data, offset), 4, root)
        fs.release(fh)
    finally:
        fs.stop()


def test_the_write_bound_holds_in_the_python_api(tmp_path):
    bounded, default = tmp_path / "bounded.zarr", tmp_path / "default.zarr"
    for root in (bounded, default):
        zarr.create_array(str(root), shape=(8 * MiB,), chunks=(MiB,), dtype="u1", fill_value=0)
    with zarrfs.open_raw(str(bounded), mode="r+", dirty_limit=2 * MiB) as view:
        assert written_back_while_writing(view.write, 4, bounded)
    with zarrfs.open_raw(str(default), mode="r+") as view:  # the default bound: 256 MiB may wait in memory
        assert not written_back_while_writing(view.write, 4, default)


def test_a_stopped_core_holds_no_descriptor_of_the_store_it_opened(tmp_path):
    """A test run makes a core per test, and a process may start and stop file systems: none
    keeps its store's directory open once stopped (a run held over a thousand, past select()'s
    1024), while a store it was given stays its giver's to close."""
    root = make_store(tmp_path / "s.zarr")
    for _ in range(5):
        with core_of(root, tmp_path) as mounted:
            assert mounted.read_bytes("/a.bin") == np.arange(4, dtype="<i4").tobytes()
    assert descriptors_in(root) == []
    given = LocalStore(str(root))
    with core_of(root, tmp_path, store=given):
        pass
    assert given.get("a/zarr.json") is not None
