"""LocalStore: a staged value stays invisible until published, and temporaries never collide."""

import os

from zarrfs import store as store_module
from zarrfs.store import TEMP_PREFIX, LocalStore


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
