"""A local Icechunk repository held to the containment of symlinks (stores/icechunk_contained.py,
stores/icechunk_repository.py): icechunk's local storage opens whatever a symlink leads to."""

import errno
import os
import shutil
import sys

import numpy as np
import pytest

from zarrfs.errors import StoreError

pytestmark = [pytest.mark.needs_python312,
              pytest.mark.skipif(sys.version_info < (3, 12), reason="needs Python >= 3.12 (icechunk 2)")]

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


def repository_with_a_linked_chunk(tmp_path, target=None):
    """A repository of `a` (4096 uint8, one chunk, uncompressed: smaller ones icechunk keeps in its manifest) whose chunk object is a symlink:
    to its own bytes moved outside, or to `target`. Returns (path, the symlink)."""
    path = tmp_path / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    zarr.group(session.store).create_array("a", shape=(4096,), dtype="<u1", fill_value=0,
                                           compressors=None)[...] = np.arange(4096, dtype="<u1")
    session.commit("a")
    [chunk] = list((path / "chunks").iterdir())
    outside = tmp_path / "outside"
    shutil.move(chunk, outside)
    os.symlink(target or outside, chunk)
    return path, chunk


def test_a_symlink_among_the_objects_refuses_the_repository_unless_followed(tmp_path):
    from zarrfs.stores.icechunk_repository import open_repository

    path, link = repository_with_a_linked_chunk(tmp_path)
    with pytest.raises(StoreError) as refused:
        open_repository(str(path), str(path), 30.0)
    assert refused.value.errno == errno.EACCES
    assert str(link) in str(refused.value) and "symlinks=follow" in str(refused.value)
    repository = open_repository(str(path), str(path), 30.0, follow_symlinks=True)  # a trusted repository
    store = repository.store(repository.version("@branch.main"))
    assert store.get("a/c/0") == np.arange(4096, dtype="<u1").tobytes()


def test_a_symlink_into_dev_is_refused_even_followed(tmp_path):
    from zarrfs.stores.icechunk_repository import open_repository

    path, link = repository_with_a_linked_chunk(tmp_path, "/dev/zero")
    with pytest.raises(StoreError) as refused:
        open_repository(str(path), str(path), 30.0, follow_symlinks=True)
    assert refused.value.errno == errno.EACCES and "/dev" in str(refused.value)
