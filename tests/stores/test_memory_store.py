"""The in-memory store's own test tools: faults armed for N calls on matching keys, and bounded."""

import pytest

from servers.memory_store import FAULTS_KEPT, VERSIONS_KEPT, MemoryStore
from zarrfs.errors import StoreError
from zarrfs.stores.contract import Capabilities


def test_a_fault_hits_only_matching_keys_and_only_n_times():
    store = MemoryStore()
    store.set("c/0", b"x")
    store.set("zarr.json", b"{}")
    store.fail("get", "c/*", times=2)
    assert store.get("zarr.json") == b"{}"  # not matching: untouched
    for _ in range(2):
        with pytest.raises(StoreError, match="'c/0'"):
            store.get("c/0")
    assert store.get("c/0") == b"x"


def test_faults_are_bounded_and_name_real_operations():
    store = MemoryStore()
    with pytest.raises(ValueError):
        store.fail("gte")
    for _ in range(FAULTS_KEPT):
        store.fail("stat")
    with pytest.raises(ValueError):
        store.fail("stat")


def test_versions_remembered_are_bounded():
    store = MemoryStore(Capabilities(conditional_writes=True))
    for i in range(VERSIONS_KEPT + 10):
        store.get(f"c/{i}")
    assert not store.version_known("c/0") and store.version_known(f"c/{VERSIONS_KEPT + 9}")

