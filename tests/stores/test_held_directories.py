"""Scratch directories held by a lock while their process lives (stores/held_directories.py)."""

import errno
import fcntl
import logging
import os
import tempfile

from zarrfs.stores.held_directories import make_held, remove_left


def test_a_directory_another_mount_removes_as_it_is_made_is_made_anew(tmp_path, monkeypatch):
    """Another mount's remove_left may find a directory made and not yet held, and remove it:
    make_held then makes another, held, rather than fail."""
    made, mkdtemp = [], tempfile.mkdtemp

    def made_then_taken(*args, **kwargs):
        path = mkdtemp(*args, **kwargs)
        made.append(path)
        if len(made) == 1:  # another mount looks for left directories at that instant
            assert remove_left(str(tmp_path), "held-") == 1
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", made_then_taken)
    path, fd = make_held(str(tmp_path), "held-")
    try:
        assert path == made[1] and os.path.isdir(path) and not os.path.exists(made[0])
        assert remove_left(str(tmp_path), "held-") == 0  # held
    finally:
        os.close(fd)
    assert remove_left(str(tmp_path), "held-") == 1  # let go: left


def test_where_no_lock_can_be_taken_a_directory_is_made_and_never_removed(tmp_path, monkeypatch, caplog):
    """flock(2) refused for another reason than another holder (NFS emulates it with byte-range
    locks, and an exclusive one needs a descriptor open for writing, which a directory's never
    is: EBADF): the directory is made all the same, one line saying it is not held; and one left
    there is not removed (not provably left), in one line, rather than fail the mount."""
    lock = fcntl.flock

    def refused(fd, operation):
        if operation & fcntl.LOCK_EX:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        return lock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", refused)
    with caplog.at_level(logging.WARNING, "zarrfs.stores.held_directories"):
        path, fd = make_held(str(tmp_path), "held-")
        os.close(fd)
        assert os.path.isdir(path)
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and path in said[0] and os.strerror(errno.EBADF) in said[0], said
        caplog.clear()
        assert remove_left(str(tmp_path), "held-") == 0
        assert os.path.isdir(path)
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and str(tmp_path) in said[0] and os.strerror(errno.EBADF) in said[0], said


def test_on_a_file_system_other_machines_may_share_no_directory_is_removed(tmp_path, caplog):
    """NFS, SMB and FUSE file systems may show the same directory to processes of another
    machine, which this kernel's flock(2) does not bind (NFS's local_lock, a FUSE file system
    that handles no locks): an unheld directory there is not proof that it is left, and none is
    removed, in one line. Here a FUSE file system (a zarrfs mount, whose groups are directories)."""
    import zarr

    from mounting import mounted

    zarr.create_group(str(tmp_path / "s.zarr"))
    with mounted(tmp_path / "s.zarr", tmp_path) as m:
        os.mkdir(m / "held-left")  # a group
        with caplog.at_level(logging.WARNING, "zarrfs.stores.held_directories"):
            assert remove_left(str(m.path), "held-") == 0
        assert (m / "held-left").is_dir()
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and str(m.path) in said[0], said
    assert remove_left(str(tmp_path), "held-") == 0  # on this machine's disk: looked at (none there)
