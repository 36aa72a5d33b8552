"""The store's node interface (begin_node, commit_node, abort_node, delete_node, move_node): the
contract every store keeps. The `store` fixture returns a fresh empty store; parametrize it over
more stores and the same tests hold for each."""

import errno
import os

import pytest

from servers.seaweed import unique_prefix
from zarrfs.errors import StoreError
from zarrfs.stores.local import TEMP_PREFIX, LocalStore
from zarrfs.stores.object_store import ObjectStore


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "s3":  # a real S3-compatible server (SeaweedFS), a fresh prefix per test
        seaweed = request.getfixturevalue("seaweed")
        prefix = unique_prefix("nodes")
        return ObjectStore(seaweed.store(prefix), seaweed.url(prefix))
    return local(tmp_path)


@pytest.fixture
def local_store(tmp_path):
    return local(tmp_path)


def local(tmp_path) -> LocalStore:
    root = tmp_path / "store"
    root.mkdir()
    return LocalStore(str(root))


def read_only_twin(store):
    if isinstance(store, ObjectStore):
        return ObjectStore(store.store, store.root, read_only=True)
    return LocalStore(store.root, read_only=True)


def keys(store, prefix=""):
    return sorted(key for key, _ in store.files(prefix))


def make(store, path, documents, chunks=None):
    staging = store.begin_node(path)
    for key, data in (chunks or {}).items():
        store.set(f"{staging}/{key}", data)
    store.commit_node(staging, path, documents)


def test_a_staged_node_is_invisible_until_committed(store):
    staging = store.begin_node("a")
    store.set(f"{staging}/c/0", b"chunk")
    assert store.list_dir("") == [] and keys(store) == [] and store.get("a/c/0") is None
    store.commit_node(staging, "a", {"zarr.json": b"{}"})
    assert store.list_dir("") == ["a"]
    assert keys(store) == ["a/c/0", "a/zarr.json"] and store.get("a/c/0") == b"chunk"


def test_commit_onto_an_existing_name_fails_and_changes_nothing(store):
    make(store, "a", {"zarr.json": b"old"})
    staging = store.begin_node("a")
    store.set(f"{staging}/c/0", b"new chunk")
    with pytest.raises(StoreError) as raised:
        store.commit_node(staging, "a", {"zarr.json": b"new"})
    assert raised.value.errno == errno.EEXIST
    store.abort_node(staging)
    assert keys(store) == ["a/zarr.json"] and store.get("a/zarr.json") == b"old"
    assert store.remove_temporaries() == 0  # abort left nothing behind


def test_a_leftover_prefix_is_never_taken_over(store):
    store.set("a/c/0", b"a chunk some other program left")
    staging = store.begin_node("a")
    with pytest.raises(StoreError) as raised:
        store.commit_node(staging, "a", {"zarr.json": b"{}"})
    assert raised.value.errno == errno.EEXIST
    store.abort_node(staging)
    assert keys(store) == ["a/c/0"]


def test_delete_removes_every_key_below_and_nothing_else(store):
    make(store, "g/a", {"zarr.json": b"a"}, {"c/0/0": b"x", "c/1/0": b"y"})
    make(store, "g/ab", {"zarr.json": b"ab"})
    store.delete_node("g/a")
    assert keys(store) == ["g/ab/zarr.json"]
    with pytest.raises(StoreError) as raised:
        store.delete_node("")
    assert raised.value.errno == errno.EPERM


def test_move_carries_every_key_and_refuses_an_existing_target(store):
    make(store, "a", {"zarr.json": b"a"}, {"c/0": b"x"})
    make(store, "g", {"zarr.json": b"g"})
    store.move_node("a", "g/b")
    assert keys(store) == ["g/b/c/0", "g/b/zarr.json", "g/zarr.json"]
    make(store, "c", {"zarr.json": b"c"})
    with pytest.raises(StoreError) as raised:
        store.move_node("c", "g/b")
    assert raised.value.errno == errno.EEXIST
    assert store.get("g/b/zarr.json") == b"a" and store.get("c/zarr.json") == b"c"
    with pytest.raises(StoreError) as raised:
        store.move_node("nothing", "d")
    assert raised.value.errno == errno.ENOENT


def test_read_only_stores_refuse_every_change(tmp_path, store):
    make(store, "a", {"zarr.json": b"a"})
    read_only = read_only_twin(store)
    for change in (lambda: read_only.begin_node("b"), lambda: read_only.delete_node("a"),
                   lambda: read_only.move_node("a", "b")):
        with pytest.raises(StoreError) as raised:
            change()
        assert raised.value.errno == errno.EROFS
    assert keys(store) == ["a/zarr.json"]


def test_interrupted_creations_and_deletions_are_cleaned_at_the_next_mount(local_store):
    """What a kill -9 leaves: a staged node never committed, a deleted node renamed aside but
    not removed. Neither is listed; remove_temporaries removes both."""
    store = local_store
    make(store, "g", {"zarr.json": b"g"})
    staging = store.begin_node("g/new")
    store.set(f"{staging}/c/0", b"x")
    make(store, "g/old", {"zarr.json": b"old"}, {"c/0": b"y"})
    root = store.root
    os.rename(os.path.join(root, "g", "old"), os.path.join(root, "g", f"{TEMP_PREFIX}deleted-1-1"))
    assert store.list_dir("g") == ["zarr.json"] and keys(store) == ["g/zarr.json"]
    assert store.remove_temporaries() == 2
    assert sorted(os.listdir(os.path.join(root, "g"))) == ["zarr.json"]


def test_node_removal_follows_no_symlink(local_store, tmp_path):
    store = local_store
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"keep")
    make(store, "a", {"zarr.json": b"a"})
    os.symlink(outside, os.path.join(store.root, "a", "link"))
    store.delete_node("a")
    assert (outside / "precious").read_bytes() == b"keep" and keys(store) == []


def test_an_object_stores_interrupted_creations_and_deletions_are_finished_later(seaweed):
    """What a killed mount leaves in an object store: a staged node never committed, and a
    deletion cut short after its node vanished (its tombstone and a chunk left). Neither is
    listed; clean_leftovers (run in the background at mount) removes both once they are stale,
    and never a node whose deletion failed before it vanished."""
    from zarrfs.stores import object_nodes as objecttree
    prefix = unique_prefix("leftovers")
    store = ObjectStore(seaweed.store(prefix), seaweed.url(prefix))
    make(store, "g", {"zarr.json": b"g"})
    staging = store.begin_node("g/new")
    store.set(f"{staging}/c/0", b"x")
    store.set(f"g/old/{objecttree.TOMBSTONE}", b"")
    store.set("g/old/c/0", b"left behind")
    make(store, "g/alive", {"zarr.json": b"a"})
    store.set(f"g/alive/{objecttree.TOMBSTONE}", b"")  # its deletion failed before the document went
    assert store.list_dir("g") == ["alive", "old", "zarr.json"]  # a prefix with chunks only: not a node
    assert objecttree.clean_leftovers(store, stale=3600) == 0  # another machine may be at it
    assert objecttree.clean_leftovers(store, stale=0) == 3
    assert keys(store) == ["g/alive/zarr.json", "g/zarr.json"]
