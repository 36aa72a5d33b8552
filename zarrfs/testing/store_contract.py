"""The Store contract's suite (zarrfs/stores/contract.py), for a store's author to subclass, as
zarr-python's `zarr.testing.store.StoreTests`. It imports pytest, a test dependency
(`pip install zarrfs[test]`): only a store's tests import this module, never zarrfs itself.

A store's tests subclass `StoreContractTests`, make the store in `make_store` and declare what
it is expected to do; every test below then runs on it:

    from zarrfs.testing.store_contract import StoreContractTests, Subject

    class TestMyStore(StoreContractTests):
        writable = True  # False: every write is checked to be refused (EROFS)

        def make_store(self, tmp_path, request) -> Subject:
            store = MyStore(tmp_path / "data")
            return Subject(store, other_writer=lambda key, data: write_behind(tmp_path / "data", key, data))

`other_writer(key, data)` stores `data` (None: deletes) at `key` behind the store's back, as
another process or machine would; a read-only store's tests also read what it wrote. Where stores
may differ, a test reads the store's declared capabilities, never its type.
"""

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import pytest

from zarrfs.byte_ranges import Range, Suffix
from zarrfs.errors import ConflictError, StoreError, ValueChangedError
from zarrfs.stores.contract import Capabilities, Store
from zarrfs.stores.source_url import public_url

VALUE = bytes(range(100))


@dataclass
class Subject:
    """A store under test, another writer of the same values, and `source`: the SOURCE (a
    directory or URL) the store was opened from with stores.source_url.open_store, if it was."""

    store: Store
    other_writer: Callable[[str, bytes | None], None]
    source: str | None = None


class StoreContractTests:
    """The suite; a subclass overrides make_store and the declared expectations."""

    # Writes through this store work; False: each write is refused with EROFS (a read-only
    # store), and the values the reads need come from the other writer.
    writable = True

    def make_store(self, tmp_path, request) -> Subject:
        """The store under test, made fresh for each test (`request` gives other fixtures:
        request.getfixturevalue("my_server"))."""
        raise NotImplementedError(f"{type(self).__name__} must override make_store")

    @pytest.fixture
    def subject(self, tmp_path, request) -> Subject:
        return self.make_store(tmp_path, request)

    @pytest.fixture
    def store(self, subject) -> Store:
        return subject.store

    # helpers

    def given(self, subject: Subject, key: str, data: bytes) -> None:
        """`key` holds `data`: written through the store where it writes, else by the other writer."""
        if self.writable:
            subject.store.set(key, data)
        else:
            subject.other_writer(key, data)

    def writes(self, store: Store) -> bool:
        """Whether this store takes writes; where it is declared not to, checks that each kind of
        write is refused with EROFS naming the key, and the calling test ends there."""
        if self.writable:
            return True
        for write in (lambda: store.set("w/v", b"x"), lambda: store.stage("w/v", b"x"),
                      lambda: store.delete("w/v"), lambda: store.begin_node("w/n"),
                      lambda: store.delete_node("w/n"), lambda: store.move_node("w/n", "w/m")):
            with pytest.raises(StoreError, match="'w/[vnm]'") as caught:
                write()
            assert caught.value.errno == errno.EROFS
        return False

    # the tests

    def test_implements_the_protocol(self, store):
        assert isinstance(store, Store)
        assert isinstance(store.capabilities, Capabilities)
        assert store.read_only == (not self.writable)

    def test_check_writable_says_whether_writes_are_refused(self, store):
        if self.writable:
            assert store.check_writable("w/v") is None
            return
        with pytest.raises(StoreError, match="'w/v'") as caught:
            store.check_writable("w/v")
        assert caught.value.errno == errno.EROFS

    def test_root_names_the_source_without_credentials(self, subject):
        store = subject.store
        assert store.path("a/v").startswith(store.root.rstrip("/")) and store.path("a/v").endswith("/a/v")
        if subject.source is not None:  # SOURCE -> store -> the URL it shows, no user:password in it
            assert store.root == public_url(subject.source)
            assert "@" not in store.root

    def test_bad_keys_are_refused(self, store):
        for key in ("/abs", "a/../b", "a//b", "./a"):
            with pytest.raises(StoreError) as caught:
                store.get(key)
            assert caught.value.errno == errno.EINVAL

    def test_get_whole_range_suffix_past_the_end_and_missing(self, subject, store):
        self.given(subject, "a/v", VALUE)
        assert store.get("a/v") == VALUE
        assert store.get("a/v", Range(10, 5)) == VALUE[10:15]
        assert store.get("a/v", Suffix(3)) == VALUE[-3:]
        assert store.get("a/v", Range(98, 10)) == VALUE[98:]  # short at the end, as pread
        assert store.get("a/v", Range(200, 10)) == b""  # wholly past the end
        assert store.get("a/missing") is None
        assert store.get("nowhere/at/all") is None

    def test_get_ranges_and_get_many(self, subject, store):
        self.given(subject, "a/v", VALUE)
        assert store.get_ranges("a/v", [Range(0, 2), Range(50, 3)]) == [VALUE[:2], VALUE[50:53]]
        assert store.get_ranges("a/missing", [Range(0, 2)]) is None
        assert store.get_many(["a/v", "a/missing"]) == {"a/v": VALUE, "a/missing": None}

    def test_a_whole_value_over_its_limit_is_eio_naming_the_key_and_sizes(self, subject, store):
        self.given(subject, "a/v", VALUE)
        assert store.get("a/v", limit=len(VALUE)) == VALUE
        for read in (lambda: store.get("a/v", limit=99), lambda: store.get_versioned("a/v", limit=99),
                     lambda: store.get_many(["a/v"], limit=99)):
            with pytest.raises(StoreError, match=r"'a/v'.* 100 bytes, more than the 99 expected") as caught:
                read()
            assert caught.value.errno == errno.EIO
        assert store.get("a/v", Range(0, 50), limit=10) == VALUE[:50]  # a range is bounded by its length

    def test_open_value_only_where_values_are_files(self, subject, store):
        self.given(subject, "a/v", VALUE)
        if not store.capabilities.file_values:
            with pytest.raises(StoreError) as caught:
                store.open_value("a/v")
            assert caught.value.errno == errno.ENOTSUP
            return
        fd = store.open_value("a/v")
        try:
            assert os.pread(fd, 200, 0) == VALUE
        finally:
            os.close(fd)
        assert store.open_value("a/missing") is None

    def test_publish_makes_every_staged_value_current_and_deletes(self, store):
        if not self.writes(store):
            return
        store.set("a/old", b"old")
        store.set("a/keep", b"keep")
        staged = [store.stage("a/new", b"new"), store.stage("a/keep", b"kept"), store.stage("a/old", None)]
        assert [s.key for s in staged] == ["a/new", "a/keep", "a/old"]
        assert store.get("a/new") is None and store.get("a/keep") == b"keep"  # nothing seen before publish
        store.publish(staged)
        assert store.get("a/new") == b"new" and store.get("a/keep") == b"kept" and store.get("a/old") is None
        assert store.list_dir("a") == (["keep", "new"] if store.capabilities.listing else [])

    def test_discard_leaves_nothing(self, store):
        if not self.writes(store):
            return
        store.set("a/keep", b"keep")
        staged = [store.stage("a/new", b"new"), store.stage("a/keep", b"changed"), store.stage("a/keep2", None)]
        store.discard(staged)
        assert store.get("a/new") is None and store.get("a/keep") == b"keep"
        if store.capabilities.listing:
            assert store.list_dir("a") == ["keep"]
            assert [key for key, _ in store.files("")] == ["a/keep"]

    def test_a_value_another_store_staged_is_refused(self, store: Store) -> None:
        """A store reads only the staged values it made (each store's are its own type): one made
        elsewhere is EINVAL naming its key, before anything of the publish is stored."""
        if not self.writes(store):
            return

        class Foreign(NamedTuple):  # another store's staged value
            key: str
            data: bytes | None

        mine = store.stage("a/mine", b"mine")
        for call in (store.publish, store.discard):
            with pytest.raises(StoreError, match="'a/foreign'") as caught:
                call([mine, Foreign("a/foreign", b"theirs")])
            assert caught.value.errno == errno.EINVAL
        assert store.get("a/mine") is None and store.get("a/foreign") is None
        store.discard([mine])

    def test_set_and_delete(self, store):
        if not self.writes(store):
            return
        store.set("a/v", b"1")
        store.set("a/v", b"22")
        assert store.get("a/v") == b"22"
        store.delete("a/v")
        assert store.get("a/v") is None
        store.delete("a/v")  # deleting what is gone is no error

    def test_list_dir_is_sorted_names(self, subject, store):
        for key in ("zarr.json", "b/zarr.json", "a/zarr.json", "a/c/0/0", "a/c/0/1"):
            self.given(subject, key, b"{}")
        if not store.capabilities.listing:  # what it declares: nothing is listed
            assert store.list_dir("") == [] and store.list_dir("a") == [] and list(store.files("")) == []
            return
        assert store.list_dir("") == ["a", "b", "zarr.json"]
        assert store.list_dir("a") == ["c", "zarr.json"]
        assert store.list_dir("a/c/0") == ["0", "1"]
        assert store.list_dir("nothing") == []

    def test_a_node_being_built_is_never_listed(self, store):
        if not self.writes(store):
            return
        store.set("zarr.json", b"{}")
        staging = store.begin_node("d")
        store.publish([store.stage(f"{staging}/c/0", b"x")])
        assert store.list_dir("") == (["zarr.json"] if store.capabilities.listing else [])
        store.abort_node(staging)

    def test_files_and_stat(self, subject, store):
        self.given(subject, "a/zarr.json", b"{}")
        self.given(subject, "a/c/0", b"12345")
        document = store.stat("a/zarr.json")
        assert stat.S_ISREG(document.st_mode) and document.st_size == 2
        assert store.statvfs().f_bsize > 0
        if not store.capabilities.listing:  # a key that is no document may be a group: no stat says not
            return
        assert sorted((key, st.st_size) for key, st in store.files("a")) == [("c/0", 5), ("zarr.json", 2)]
        found = dict(store.files("a", directories=True))  # ObjectStore lists no directories (yet)
        assert stat.S_ISREG(found["c/0"].st_mode)
        assert all(stat.S_ISDIR(found[k].st_mode) for k in found if k.endswith("/"))
        value = store.stat("a/c/0")
        assert stat.S_ISREG(value.st_mode) and value.st_size == 5 and value.st_mtime_ns > 0
        assert stat.S_ISDIR(store.stat("a").st_mode)
        assert store.stat("a/missing") is None

    def test_a_node_appears_whole_on_commit(self, store):
        if not self.writes(store):
            return
        staging = store.begin_node("g/n")
        store.publish([store.stage(f"{staging}/c/0", b"chunk")])
        assert store.list_dir("g") == [] and store.get("g/n/c/0") is None
        store.commit_node(staging, "g/n", {"zarr.json": b"{}"})
        assert store.list_dir("g") == (["n"] if store.capabilities.listing else [])
        assert store.get("g/n/zarr.json") == b"{}" and store.get("g/n/c/0") == b"chunk"

    def test_an_aborted_node_leaves_nothing(self, store):
        if not self.writes(store):
            return
        store.set("g/zarr.json", b"{}")
        staging = store.begin_node("g/n")
        store.publish([store.stage(f"{staging}/c/0", b"chunk")])
        store.abort_node(staging)
        assert store.get(f"{staging}/c/0") is None
        if store.capabilities.listing:
            assert store.list_dir("g") == ["zarr.json"]
            assert [key for key, _ in store.files("g")] == ["zarr.json"]

    def test_a_node_is_not_created_over_an_existing_one(self, store):
        if not self.writes(store):
            return
        store.set("g/n/zarr.json", b"old")
        staging = store.begin_node("g/n")
        with pytest.raises(StoreError) as caught:
            store.commit_node(staging, "g/n", {"zarr.json": b"new"})
        assert caught.value.errno == errno.EEXIST
        store.abort_node(staging)
        assert store.get("g/n/zarr.json") == b"old"

    def test_delete_node_removes_every_key_below(self, store):
        if not self.writes(store):
            return
        store.set("g/zarr.json", b"{}")
        store.set("g/n/zarr.json", b"{}")
        store.set("g/n/c/0", b"chunk")
        store.delete_node("g/n")
        # files(), not list_dir(): SeaweedFS keeps listing an emptied folder as a common prefix
        assert [key for key, _ in store.files("g")] == ["zarr.json"] and store.get("g/n/c/0") is None
        with pytest.raises(StoreError) as caught:
            store.delete_node("g/n")
        assert caught.value.errno == errno.ENOENT

    def test_move_node_and_its_refusals(self, store):
        if not self.writes(store):
            return
        store.set("a/zarr.json", b"A")
        store.set("a/c/0", b"chunk")
        store.set("b/zarr.json", b"B")
        store.set("g/zarr.json", b"G")  # a move goes into an existing group
        with pytest.raises(StoreError) as caught:
            store.move_node("a", "b")
        assert caught.value.errno == errno.EEXIST
        assert store.get("a/zarr.json") == b"A" and store.get("b/zarr.json") == b"B"
        store.move_node("a", "g/a2")
        assert store.get("g/a2/zarr.json") == b"A" and store.get("g/a2/c/0") == b"chunk"
        assert sorted(key for key, _ in store.files("")) == ["b/zarr.json", "g/a2/c/0", "g/a2/zarr.json",
                                                              "g/zarr.json"]
        with pytest.raises(StoreError) as caught:
            store.move_node("a", "c")
        assert caught.value.errno == errno.ENOENT

    def test_remove_temporaries_finishes_interrupted_nodes(self, store):
        if not self.writes(store):
            return
        store.set("g/zarr.json", b"{}")
        staging = store.begin_node("g/n")
        store.publish([store.stage(f"{staging}/c/0", b"chunk")])  # a creation interrupted here
        assert store.list_dir("g") == ["zarr.json"]  # a staged node is never listed as a node
        if store.capabilities.remote:
            # other machines may be mid-creation: a remote store cleans only stale staged nodes,
            # in the background (tests/stores/test_store_nodes.py holds that without a thread)
            return
        assert store.remove_temporaries() >= 1
        assert [key for key, _ in store.files("g")] == ["zarr.json"]
        assert store.get(f"{staging}/c/0") is None

    def test_a_value_another_writer_changed_is_a_conflict_and_theirs_survives(self, subject, store):
        if not self.writes(store):
            return
        if not store.capabilities.conditional_writes:  # what it declares instead: the last writer wins
            store.set("a/v", b"first")
            subject.other_writer("a/v", b"theirs")
            store.publish([store.stage("a/v", b"mine")])
            assert store.get("a/v") == b"mine"
            return
        store.set("a/v", b"first")
        assert store.get("a/v") == b"first"  # the version this writer builds on
        assert store.version_known("a/v")
        subject.other_writer("a/v", b"theirs")
        with pytest.raises(ConflictError) as caught:
            store.publish([store.stage("a/v", b"mine")])
        assert caught.value.keys == ("a/v",) and "a/v" in str(caught.value)
        assert store.get("a/v") == b"theirs"

    def test_reads_that_ask_for_a_version_get_it_or_are_told_it_changed(self, subject, store):
        self.given(subject, "v", VALUE)
        data, version = store.get_versioned("v", Range(10, 5))
        assert data == VALUE[10:15] and version is not None
        assert store.get_versioned("v", Suffix(3), expect=version) == (VALUE[-3:], version)
        assert store.get_versioned("v", None, expect=version)[0] == VALUE
        assert store.get_ranges("v", [Range(50, 3), Range(0, 2), Range(90, 10)], expect=version) == \
            [VALUE[50:53], VALUE[:2], VALUE[90:]]
        subject.other_writer("v", b"new" * 20)  # another size: a new version on every store
        for read in (lambda: store.get_versioned("v", Range(0, 4), expect=version),
                     lambda: store.get_versioned("v", Suffix(4), expect=version),
                     lambda: store.get_ranges("v", [Range(0, 2), Range(30, 2)], expect=version)):
            with pytest.raises(ValueChangedError, match="'?v'? was replaced|/v was replaced"):
                read()
        data, newer = store.get_versioned("v", Range(0, 3))
        assert data == b"new" and newer != version
        if self.writable:
            store.get("v")  # a conditional store deletes the version it read whole
            store.delete("v")
        else:
            subject.other_writer("v", None)
        with pytest.raises(ValueChangedError):
            store.get_versioned("v", Range(0, 3), expect=newer)
        assert store.get_versioned("v", Range(0, 3)) == (None, None)
