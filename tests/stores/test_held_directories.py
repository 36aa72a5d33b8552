"""Scratch directories held by a lock while their process lives (stores/held_directories.py)."""

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

