"""An Icechunk branch's session written in-process (stores/icechunk_store.py): what a write-back,
a node's making or deleting leaves in the saved fork (icechunk_saved.py), and how commits land."""

import sys

import numpy as np
import pytest

pytestmark = [pytest.mark.needs_python312,
              pytest.mark.skipif(sys.version_info < (3, 12), reason="needs Python >= 3.12 (icechunk 2)")]

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


def small_repository(path):
    """main: one commit of `a` (40 x 30 int32 in 10 x 10 chunks). Returns (repo, its head)."""
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    array = zarr.group(session.store).create_array("a", shape=(40, 30), chunks=(10, 10), dtype="<i4", fill_value=0)
    array[...] = np.arange(1200, dtype="<i4").reshape(40, 30)
    return repo, session.commit("a")


def branch_store(path, recovery, timeout=30.0):
    """A writable store of main whose writes not committed are saved in `recovery`."""
    from zarrfs.stores.icechunk_repository import open_repository

    repository = open_repository(str(path), str(path), timeout)
    return repository.branch_store(repository.version("@branch.main"), str(recovery))


def test_a_deleted_node_is_saved_against_a_crash(tmp_path):
    small_repository(tmp_path / "repo")
    store = branch_store(tmp_path / "repo", tmp_path / "recovery")
    store.delete_node("a")
    assert store.stat("a") is None
    # a crash now: the next mount takes back the saved fork, the delete in it
    assert branch_store(tmp_path / "repo", tmp_path / "recovery").stat("a") is None
