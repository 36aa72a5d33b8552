"""The saved writes of an Icechunk branch (stores/icechunk_saved.py): read back only from a file
of this user's that nobody else may write, and a torn one refused with one line."""

import errno
import os
import pickle

import pytest

from zarrfs.errors import StoreError
from zarrfs.stores.icechunk_saved import SavedSession


def saved(tmp_path) -> SavedSession:
    """A saved session holding a plain value (a fork pickles as any object does)."""
    session = SavedSession(str(tmp_path / "recovery"), "/data/repo", "main")
    session.save({"changed": ["a/c/0/0"]})
    return session


def test_a_saved_session_is_taken_back(tmp_path):
    assert saved(tmp_path).load() == {"changed": ["a/c/0/0"]}
    assert SavedSession(str(tmp_path / "recovery"), "/data/repo", "dev").load() is None  # another branch's: none


@pytest.mark.parametrize("change", ["another owner", "group-writable", "other-writable"])
def test_a_file_another_user_could_have_written_is_refused_unread(tmp_path, change):
    session = saved(tmp_path)
    if change == "another owner":
        os.chown(session.path, os.getuid() + 4242, -1)  # the tests run as root (scripts/test)
    else:
        os.chmod(session.path, 0o620 if change == "group-writable" else 0o602)
    with pytest.raises(StoreError) as refused:
        session.load()
    assert refused.value.errno == errno.EACCES
    assert session.path in str(refused.value) and "branch main" in str(refused.value)
    assert os.path.exists(session.path)  # left for a person to look at


def test_a_torn_file_is_one_line_and_left_in_place(tmp_path):
    session = saved(tmp_path)
    whole = open(session.path, "rb").read()
    assert pickle.loads(whole)  # what it held, whole
    with open(session.path, "r+b") as f:
        f.truncate(len(whole) // 2)  # a crash mid-write of a file not replaced atomically
    with pytest.raises(StoreError) as refused:
        session.load()
    assert refused.value.errno == errno.EIO
    said = str(refused.value)
    assert session.path in said and "cannot be read" in said and "\n" not in said
    assert os.path.getsize(session.path) == len(whole) // 2
