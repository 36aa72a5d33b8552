"""An unlink or rename of an array waits for its write-back in progress only within a bound:
past it the change is refused (EBUSY) and the array serves as before. In process, with the
write-back held inside its encoding."""

import errno
import logging
import os
import threading

import numpy as np
import pytest

from helpers import Worker, make_store
from zarrfs.edits import hierarchy_edits as shaping
from zarrfs.engine.writeback import WriteBack
from zarrfs.fs.filesystem import Options
from zarrfs.fuse.libfuse import mfusepy
from zarrfs.fuse.operations import Operations


def refused(code, method, *args):
    with pytest.raises(mfusepy.FuseOSError) as raised:
        method(*args)
    assert raised.value.errno == code


def hide_all_but_the_data_file(ops) -> None:
    """Unlink every file of array `a` but a.bin: the array is deleted with its last file."""
    for name in [name for name, *_ in ops.readdir("/", None) if name.startswith("a.") and name != "a.bin"]:
        ops.unlink(f"/{name}")


def test_a_write_back_that_outlasts_its_bound_refuses_rm_and_mv_and_loses_nothing(tmp_path, monkeypatch, caplog):
    root = make_store(tmp_path / "s.zarr")
    ops = Operations(str(root), Options(recovery_dir=str(tmp_path / "recovery")))  # not the machine's
    encoding, go_on = threading.Event(), threading.Event()
    original = WriteBack._encode

    def held_encode(write_back, coords, chunk):
        encoding.set()
        go_on.wait(10)  # bounded, so that code which waits for ever fails here instead of hanging
        return original(write_back, coords, chunk)

    monkeypatch.setattr(WriteBack, "_encode", held_encode)
    monkeypatch.setattr(shaping, "FLUSH_WAIT", 0.05)
    fh = ops.open("/a.bin", os.O_RDWR)
    ops.write("/a.bin", np.array([7, 8], "<i4").tobytes(), 0, fh)
    write_back = Worker(ops.fsync, "/a.bin", 0, fh).start()  # join() raises what the fsync raised
    try:
        assert encoding.wait(10)
        hide_all_but_the_data_file(ops)
        with caplog.at_level(logging.WARNING, logger="zarrfs"):
            refused(errno.EBUSY, ops.unlink, "/a.bin")
            refused(errno.EBUSY, ops.rename, "/a.bin", "/b.bin", 0)
        assert "array 'a'" in caplog.text and "write-back" in caplog.text
        assert write_back.is_alive()  # refused while the write-back was still held
        # the array serves as before: its handle reads and writes, its name stays
        ops.write("/a.bin", np.array([9], "<i4").tobytes(), 12, fh)
        assert np.frombuffer(ops.read("/a.bin", 16, 0, fh), "<i4").tolist() == [7, 8, 2, 9]
        assert "a.bin" in [name for name, *_ in ops.readdir("/", None)]
    finally:
        go_on.set()
        write_back.join()
    ops.rename("/a.bin", "/b.bin", 0)  # the write-back done, the same change goes through
    refused(errno.ESTALE, ops.write, "/b.bin", b"\0\0\0\0", 0, fh)
    ops.release("/a.bin", fh)
    fh = ops.open("/b.bin", os.O_RDONLY)
    assert np.frombuffer(ops.read("/b.bin", 16, 0, fh), "<i4").tolist() == [7, 8, 2, 9]
    ops.release("/b.bin", fh)
    assert not (root / "a").exists() and (root / "b" / "zarr.json").exists()


def test_an_edit_that_fails_and_whose_repair_fails_keeps_its_intent_record(tmp_path, monkeypatch):
    """A delete fails, and so does the repair of the consolidated metadata after it (a full
    disk): the caller gets the delete's own error, and the intent record stays for the next
    mount to finish the repair (deleting the record would still work on a full disk)."""
    from zarrfs.edits import editor as editing
    from zarrfs.errors import StoreError
    from zarrfs.stores.local import LocalStore

    root = make_store(tmp_path / "s.zarr", consolidated=True)
    ops = Operations(str(root), Options(recovery_dir=str(tmp_path / "recovery")))  # not the machine's

    def busy(store, path):
        raise StoreError(f"{path}: busy", errno.EBUSY)

    def full(editor, paths):
        raise StoreError("no space left", errno.ENOSPC)

    monkeypatch.setattr(LocalStore, "delete_node", busy)
    monkeypatch.setattr(editing.Editor, "_repair", full)
    hide_all_but_the_data_file(ops)
    refused(errno.EBUSY, ops.unlink, "/a.bin")
    assert (root / editing.INTENT).exists()
    monkeypatch.undo()
    ops.unlink("/a.bin")  # an edit that succeeds removes the record
    assert not (root / editing.INTENT).exists()


def test_the_wait_is_thirty_seconds_on_a_local_store_and_the_documented_150_on_an_object_store():
    """docs/writing.md: 30 s, and on an object store `timeout` times its five conflict retries."""
    from zarrfs.stores.contract import Capabilities
    from zarrfs.stores.source_url import RemoteOptions

    timeout = RemoteOptions().timeout
    assert shaping.flush_wait(Capabilities(), timeout) == 30.0
    assert shaping.flush_wait(Capabilities(remote=True), timeout) == 150.0
    assert shaping.flush_wait(Capabilities(remote=True), 60.0) == 300.0


def test_an_object_stores_rm_waits_past_the_local_bound_for_its_write_back(seaweed, tmp_path, monkeypatch):
    """On a real object store, an unlink waits for a write-back longer than a local store's bound:
    the write-back is held ten times the local bound, well within the remote one, and the unlink
    goes through once it is done."""
    import zarr

    from servers.seaweed import unique_prefix
    from zarrfs.stores.source_url import RemoteOptions

    prefix = unique_prefix("wait")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array("a", shape=(4,), chunks=(2,), dtype="<i4")
    for name, value in seaweed.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(shaping, "FLUSH_WAIT", 0.05)
    remote = RemoteOptions(endpoint=seaweed.endpoint, timeout=20.0)  # a bound of 100 s
    ops = Operations(seaweed.url(prefix), Options(remote=remote, recovery_dir=str(tmp_path / "recovery")))
    encoding, go_on = threading.Event(), threading.Event()
    original = WriteBack._encode

    def held_encode(write_back, coords, chunk):
        encoding.set()
        go_on.wait(10)
        return original(write_back, coords, chunk)

    monkeypatch.setattr(WriteBack, "_encode", held_encode)
    fh = ops.open("/a.bin", os.O_RDWR)
    ops.write("/a.bin", np.array([7, 8], "<i4").tobytes(), 0, fh)
    write_back = Worker(ops.fsync, "/a.bin", 0, fh).start()
    try:
        assert encoding.wait(10)
        threading.Timer(10 * shaping.FLUSH_WAIT, go_on.set).start()
        hide_all_but_the_data_file(ops)
        ops.unlink("/a.bin")  # refused with EBUSY after FLUSH_WAIT when the remote bound is not used
    finally:
        go_on.set()
        write_back.join()
    ops.release("/a.bin", fh)
    assert "a.bin" not in [name for name, *_ in ops.readdir("/", None)]
