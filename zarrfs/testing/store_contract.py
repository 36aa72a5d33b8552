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

A store that takes only some keys says which (`keys`): `AnyKeys` (the default) for a store of
any key, `ZarrKeys` for one that takes only a Zarr v3 hierarchy's keys and documents (Icechunk's
session store). The suite names its values as before ("a/v"); `keys` maps each to a key the
store takes, and every check holds on the mapped keys.

`other_writer(key, data)` stores `data` (None: deletes) at `key` behind the store's back, as
another process or machine would; a read-only store's tests also read what it wrote. Where stores
may differ, a test reads the store's declared capabilities, never its type.
"""

import errno
import json
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


class AnyKeys:
    """The keys of a store that takes any key (a directory, an object store): the suite's keys
    as it writes them, its values as they are, no document needed first."""

    # what the store holds before a test writes anything (at its root)
    root_documents: tuple[str, ...] = ()

    def key(self, name: str) -> str:
        """The key the store takes for the suite's `name`."""
        return name

    def value(self, key: str, data: bytes) -> bytes:
        """What is stored at `key` for the suite's `data`."""
        return data

    def node_document(self, key: str) -> tuple[str, bytes] | None:
        """The document (key, bytes) the node holding `key` must have before `key` is stored."""
        return None


class ZarrKeys(AnyKeys):
    """The keys of a store that takes only a Zarr v3 hierarchy's (Icechunk): a value the suite
    calls NODE/NAME is the chunk NODE/c/I of a one-dimensional array NODE (I: NAME's place in
    NAMES), whose zarr.json is stored first; a document is a real one (a group's at the root,
    `b` and `g`, an array's elsewhere) that holds the suite's bytes as an attribute. The store
    holds the root group's document before a test begins."""

    NAMES = ("v", "missing", "old", "keep", "new", "keep2", "mine", "foreign")
    GROUPS = ("", "b", "g")
    root_documents = ("zarr.json",)

    def key(self, name: str) -> str:
        node, _, leaf = name.rpartition("/")
        if leaf not in self.NAMES:
            return name  # a document, a chunk's key or a key no node has: as it is
        return f"{node or leaf}/c/{self.NAMES.index(leaf) if node else 0}"

    def value(self, key: str, data: bytes) -> bytes:
        if key != "zarr.json" and not key.endswith("/zarr.json"):
            return data
        node = key[:-len("zarr.json")].rstrip("/")
        return self.document(node, data.decode("latin-1"))

    def document(self, node: str, mark: str) -> bytes:
        attributes = {"suite": mark}
        if node in self.GROUPS:
            return json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attributes}).encode()
        return json.dumps({"zarr_format": 3, "node_type": "array", "shape": [len(self.NAMES)], "data_type": "uint8",
                           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
                           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                           "fill_value": 0, "codecs": [{"name": "bytes"}], "attributes": attributes}).encode()

    def node_document(self, key: str) -> tuple[str, bytes] | None:
        node, chunks, _ = key.partition("/c/")
        if not chunks or node.rpartition("/")[2].startswith("__"):  # not a chunk, or one of a node being made
            return None
        return f"{node}/zarr.json", self.document(node, "{}")


@dataclass
class Subject:
    """A store under test, another writer of the same values, and `source`: the SOURCE (a
    directory or URL) the store was opened from with stores.source_url.open_store, if it was."""

    store: Store
    other_writer: Callable[[str, bytes | None], None]
    source: str | None = None
    # Another process writing `key` through its own store of the same source (a read, then a
    # write conditional on it), where its writes to documents must be seen as another writer's:
    # a local store's, which are conditional among processes. None: other_writer stands for it.
    other_process: Callable[[str, bytes], None] | None = None


class StoreContractTests:
    """The suite; a subclass overrides make_store and the declared expectations."""

    # Writes through this store work; False: each write is refused with EROFS (a read-only
    # store), and the values the reads need come from the other writer.
    writable = True
    # Which keys the store takes (above).
    keys: AnyKeys = AnyKeys()
    # False: the store reads one snapshot, isolated from other writers until its session ends
    # (Icechunk's sessions): what another writer stores is not seen, and no version is needed.
    sees_other_writers = True

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

    def k(self, name: str) -> str:
        """The key the store takes for the suite's `name`."""
        return self.keys.key(name)

    def given(self, subject: Subject, name: str, data: bytes) -> None:
        """`name`'s key holds `data`: written through the store where it writes, else by the
        other writer (the document its node needs first, where the store needs one)."""
        key = self.k(name)
        write = subject.store.set if self.writable else subject.other_writer
        document = self.keys.node_document(key)
        if document is not None and subject.store.get(document[0]) is None:
            write(*document)
        write(key, self.keys.value(key, data))

    def put(self, store: Store, name: str, data: bytes) -> None:
        """`name`'s key holds `data`, written through the store (a writable one)."""
        self.given(Subject(store, lambda key, value: None), name, data)

    def stored(self, name: str, data: bytes) -> bytes:
        """The bytes a read of `name` gives after `data` was written there."""
        return self.keys.value(self.k(name), data)

    def names(self, *names: str) -> tuple[str, list[str]]:
        """(the directory of the keys of `names`, their names in it, sorted)."""
        keys = [self.k(name).rpartition("/") for name in names]
        assert len({directory for directory, _, _ in keys}) == 1
        return keys[0][0], sorted(leaf for _, _, leaf in keys)

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

    def test_a_second_close_does_nothing(self, store):
        """Whoever opened a store closes it (a file system at unmount, a test at its end), perhaps
        twice: the second close raises nothing."""
        store.close()
        store.close()

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
        v = self.k("a/v")
        assert store.get(v) == VALUE
        assert store.get(v, Range(10, 5)) == VALUE[10:15]
        assert store.get(v, Suffix(3)) == VALUE[-3:]
        assert store.get(v, Suffix(len(VALUE) + 1)) == VALUE  # longer than the value: all of it
        assert store.get(v, Range(98, 10)) == VALUE[98:]  # short at the end, as pread
        assert store.get(v, Range(200, 10)) == b""  # wholly past the end
        assert store.get(self.k("a/missing")) is None
        assert store.get("nowhere/at/all") is None

    def test_get_ranges_and_get_many(self, subject, store):
        self.given(subject, "a/v", VALUE)
        v, missing = self.k("a/v"), self.k("a/missing")
        assert store.get_ranges(v, [Range(0, 2), Range(50, 3)]) == [VALUE[:2], VALUE[50:53]]
        assert store.get_ranges(missing, [Range(0, 2)]) is None
        assert store.get_many([v, missing]) == {v: VALUE, missing: None}

    def test_a_whole_value_over_its_limit_is_eio_naming_the_key_and_sizes(self, subject, store):
        self.given(subject, "a/v", VALUE)
        v = self.k("a/v")
        assert store.get(v, limit=len(VALUE)) == VALUE
        for read in (lambda: store.get(v, limit=99), lambda: store.get_versioned(v, limit=99),
                     lambda: store.get_many([v], limit=99)):
            with pytest.raises(StoreError, match=rf"'{v}'.* 100 bytes, more than the 99 expected") as caught:
                read()
            assert caught.value.errno == errno.EIO
        assert store.get(v, Range(0, 50), limit=10) == VALUE[:50]  # a range is bounded by its length

    def test_open_value_only_where_values_are_files(self, subject, store):
        self.given(subject, "a/v", VALUE)
        if not store.capabilities.file_values:
            with pytest.raises(StoreError) as caught:
                store.open_value(self.k("a/v"))
            assert caught.value.errno == errno.ENOTSUP
            return
        fd = store.open_value(self.k("a/v"))
        try:
            assert os.pread(fd, 200, 0) == VALUE
        finally:
            os.close(fd)
        assert store.open_value(self.k("a/missing")) is None

    def test_publish_makes_every_staged_value_current_and_deletes(self, store):
        if not self.writes(store):
            return
        self.put(store, "a/old", b"old")
        self.put(store, "a/keep", b"keep")
        new, keep, old = self.k("a/new"), self.k("a/keep"), self.k("a/old")
        staged = [store.stage(new, b"new"), store.stage(keep, b"kept"), store.stage(old, None)]
        assert [s.key for s in staged] == [new, keep, old]
        assert store.get(new) is None and store.get(keep) == b"keep"  # nothing seen before publish
        store.publish(staged)
        assert store.get(new) == b"new" and store.get(keep) == b"kept" and store.get(old) is None
        directory, names = self.names("a/keep", "a/new")
        assert store.list_dir(directory) == (names if store.capabilities.listing else [])

    def test_discard_leaves_nothing(self, store):
        """Nothing a discarded stage made is left: not in the values' directory, nor anywhere
        else under the store's root (a staging place of the store's own, say)."""
        if not self.writes(store):
            return
        self.put(store, "a/keep", b"keep")
        before = sorted(key for key, _ in store.files("")) if store.capabilities.listing else []
        new, keep = self.k("a/new"), self.k("a/keep")
        staged = [store.stage(new, b"new"), store.stage(keep, b"changed"), store.stage(self.k("a/keep2"), None)]
        store.discard(staged)
        assert store.get(new) is None and store.get(keep) == b"keep"
        if store.capabilities.listing:
            directory, names = self.names("a/keep")
            assert store.list_dir(directory) == names
            assert [key for key, _ in store.files(directory)] == names
            after = sorted(key for key, _ in store.files(""))
            assert after == before, f"a discard left {sorted(set(after) - set(before))} under the store's root"

    def test_a_value_another_store_staged_is_refused(self, store: Store) -> None:
        """A store reads only the staged values it made (each store's are its own type): one made
        elsewhere is EINVAL naming its key, before anything of the publish is stored."""
        if not self.writes(store):
            return

        class Foreign(NamedTuple):  # another store's staged value
            key: str
            data: bytes | None

        foreign = self.k("a/foreign")
        mine = store.stage(self.k("a/mine"), b"mine")
        for call in (store.publish, store.discard):
            with pytest.raises(StoreError, match=f"'{foreign}'") as caught:
                call([mine, Foreign(foreign, b"theirs")])
            assert caught.value.errno == errno.EINVAL
        assert store.get(self.k("a/mine")) is None and store.get(foreign) is None
        store.discard([mine])

    def test_set_and_delete(self, store):
        if not self.writes(store):
            return
        self.put(store, "a/v", b"1")
        v = self.k("a/v")
        store.set(v, b"22")
        assert store.get(v) == b"22"
        store.delete(v)
        assert store.get(v) is None
        store.delete(v)  # deleting what is gone is no error

    def test_list_dir_is_sorted_names(self, subject, store):
        for key in ("zarr.json", "b/zarr.json", "a/zarr.json", "a/c/0", "a/c/1"):
            self.given(subject, key, b"{}")
        if not store.capabilities.listing:  # what it declares: nothing is listed
            assert store.list_dir("") == [] and store.list_dir("a") == [] and list(store.files("")) == []
            return
        assert store.list_dir("") == ["a", "b", "zarr.json"]
        assert store.list_dir("a") == ["c", "zarr.json"]
        assert store.list_dir("a/c") == ["0", "1"]
        assert store.list_dir("nothing") == []

    def test_a_node_being_built_is_never_listed(self, store):
        if not self.writes(store):
            return
        self.put(store, "zarr.json", b"{}")
        staging = store.begin_node("d")
        store.publish([store.stage(f"{staging}/c/0", b"x")])
        assert store.list_dir("") == (["zarr.json"] if store.capabilities.listing else [])
        store.abort_node(staging)

    def test_files_and_stat(self, subject, store):
        self.given(subject, "a/zarr.json", b"{}")
        self.given(subject, "a/c/0", b"12345")
        document, size = store.stat("a/zarr.json"), len(self.stored("a/zarr.json", b"{}"))
        assert stat.S_ISREG(document.st_mode) and document.st_size == size
        assert store.statvfs().f_bsize > 0
        if not store.capabilities.listing:  # a key that is no document may be a group: no stat says not
            return
        assert sorted((key, st.st_size) for key, st in store.files("a")) == [("c/0", 5), ("zarr.json", size)]
        found = dict(store.files("a", directories=True))  # ObjectStore lists no directories (yet)
        assert stat.S_ISREG(found["c/0"].st_mode)
        assert all(stat.S_ISDIR(found[k].st_mode) for k in found if k.endswith("/"))
        value = store.stat("a/c/0")
        assert stat.S_ISREG(value.st_mode) and value.st_size == 5 and value.st_mtime_ns > 0
        assert stat.S_ISDIR(store.stat("a").st_mode)
        assert store.stat(self.k("a/missing")) is None

    def test_a_node_appears_whole_on_commit(self, store):
        if not self.writes(store):
            return
        self.put(store, "g/zarr.json", b"{}")
        listed = ["zarr.json"] if store.capabilities.listing else []
        staging = store.begin_node("g/n")
        store.publish([store.stage(f"{staging}/c/0", b"chunk")])
        assert store.list_dir("g") == listed and store.get("g/n/c/0") is None
        document = self.stored("g/n/zarr.json", b"{}")
        store.commit_node(staging, "g/n", {"zarr.json": document})
        assert store.list_dir("g") == (["n", *listed] if store.capabilities.listing else [])
        assert store.get("g/n/zarr.json") == document and store.get("g/n/c/0") == b"chunk"

    def test_an_aborted_node_leaves_nothing(self, store):
        if not self.writes(store):
            return
        self.put(store, "g/zarr.json", b"{}")
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
        self.put(store, "g/n/zarr.json", b"old")
        staging = store.begin_node("g/n")
        with pytest.raises(StoreError) as caught:
            store.commit_node(staging, "g/n", {"zarr.json": self.stored("g/n/zarr.json", b"new")})
        assert caught.value.errno == errno.EEXIST
        store.abort_node(staging)
        assert store.get("g/n/zarr.json") == self.stored("g/n/zarr.json", b"old")

    def test_delete_node_removes_every_key_below(self, store):
        if not self.writes(store):
            return
        for key, data in (("g/zarr.json", b"{}"), ("g/n/zarr.json", b"{}"), ("g/n/c/0", b"chunk")):
            self.put(store, key, data)
        store.delete_node("g/n")
        # files(), not list_dir(): SeaweedFS keeps listing an emptied folder as a common prefix
        assert [key for key, _ in store.files("g")] == ["zarr.json"] and store.get("g/n/c/0") is None
        with pytest.raises(StoreError) as caught:
            store.delete_node("g/n")
        assert caught.value.errno == errno.ENOENT

    def test_move_node_and_its_refusals(self, store):
        if not self.writes(store):
            return
        for key, data in (("a/zarr.json", b"A"), ("a/c/0", b"chunk"), ("b/zarr.json", b"B"),
                          ("g/zarr.json", b"G")):  # a move goes into an existing group
            self.put(store, key, data)
        with pytest.raises(StoreError) as caught:
            store.move_node("a", "b")
        assert caught.value.errno == errno.EEXIST
        assert store.get("a/zarr.json") == self.stored("a/zarr.json", b"A")
        assert store.get("b/zarr.json") == self.stored("b/zarr.json", b"B")
        store.move_node("a", "g/a2")
        assert store.get("g/a2/zarr.json") == self.stored("a/zarr.json", b"A") and store.get("g/a2/c/0") == b"chunk"
        assert sorted(key for key, _ in store.files("")) == sorted([
            *self.keys.root_documents, "b/zarr.json", "g/a2/c/0", "g/a2/zarr.json", "g/zarr.json"])
        with pytest.raises(StoreError) as caught:
            store.move_node("a", "c")
        assert caught.value.errno == errno.ENOENT

    def test_remove_temporaries_finishes_interrupted_nodes(self, store):
        if not self.writes(store):
            return
        self.put(store, "g/zarr.json", b"{}")
        staging = store.begin_node("g/n")
        store.publish([store.stage(f"{staging}/c/0", b"chunk")])  # a creation interrupted here
        assert store.list_dir("g") == ["zarr.json"]  # a staged node is never listed as a node
        if store.capabilities.remote:
            # other machines may be mid-creation: a fresh staged node is left alone (a remote store
            # cleans only stale ones, in the background: tests/stores/test_store_nodes.py holds
            # that without a thread), and it is never listed as a node
            store.remove_temporaries()
            assert store.get(f"{staging}/c/0") == b"chunk" and store.list_dir("g") == ["zarr.json"]
            return
        assert store.remove_temporaries() >= 1
        assert [key for key, _ in store.files("g")] == ["zarr.json"]
        assert store.get(f"{staging}/c/0") is None

    def test_a_value_another_writer_changed_is_a_conflict_and_theirs_survives(self, subject, store):
        if not self.writes(store):
            return
        self.put(store, "a/v", b"first")
        v = self.k("a/v")
        if not store.capabilities.conditional_writes:  # what it declares instead: the last writer wins
            subject.other_writer(v, b"theirs")
            store.publish([store.stage(v, b"mine")])
            assert store.get(v) == b"mine"
            return
        assert store.get(v) == b"first"  # the version this writer builds on
        assert store.version_known(v)
        subject.other_writer(v, b"theirs")
        with pytest.raises(ConflictError) as caught:
            store.publish([store.stage(v, b"mine")])
        assert caught.value.keys == (v,) and v in str(caught.value)
        assert store.get(v) == b"theirs"

    def test_a_document_another_writer_changed_is_a_conflict_and_theirs_survives(self, subject, store):
        if not self.writes(store):
            return
        assert store.capabilities.conditional_documents or not store.capabilities.conditional_writes
        document = self.k("a/zarr.json")
        self.put(store, "a/zarr.json", b"first")
        if not store.capabilities.conditional_documents:  # what it declares instead: the last writer wins
            subject.other_writer(document, self.stored("a/zarr.json", b"theirs"))
            store.publish([store.stage(document, self.stored("a/zarr.json", b"mine"))])
            assert store.get(document) == self.stored("a/zarr.json", b"mine")
            return
        assert store.get_versioned(document)[0] == self.stored("a/zarr.json", b"first")  # the version built on
        assert store.version_known(document)
        (subject.other_process or subject.other_writer)(document, self.stored("a/zarr.json", b"theirs"))
        with pytest.raises(ConflictError) as caught:
            store.publish([store.stage(document, self.stored("a/zarr.json", b"mine"))])
        assert caught.value.keys == (document,) and document in str(caught.value)
        assert store.get(document) == self.stored("a/zarr.json", b"theirs")
        store.get_versioned(document)  # read again: the next write builds on theirs
        store.set(document, self.stored("a/zarr.json", b"mine"))
        assert store.get(document) == self.stored("a/zarr.json", b"mine")

    def test_a_document_the_store_deleted_itself_is_written_again_without_a_conflict(self, subject, store):
        """Its own delete is no other writer's change: a write after it builds on its absence."""
        if not self.writes(store):
            return
        document = self.k("a/zarr.json")
        self.put(store, "a/zarr.json", b"first")
        store.get_versioned(document)
        store.delete(document)
        store.set(document, self.stored("a/zarr.json", b"again"))
        assert store.get(document) == self.stored("a/zarr.json", b"again")

    def test_reads_that_ask_for_a_version_get_it_or_are_told_it_changed(self, subject, store):
        self.given(subject, "v", VALUE)
        v = self.k("v")
        data, version = store.get_versioned(v, Range(10, 5))
        if not self.sees_other_writers:  # isolated: another writer's value is never seen, no version needed
            subject.other_writer(v, b"new" * 20)
            assert data == VALUE[10:15] and store.get_versioned(v, Range(0, 4), expect=version)[0] == VALUE[:4]
            assert store.get(v) == VALUE
            return
        assert data == VALUE[10:15] and version is not None
        assert store.get_versioned(v, Suffix(3), expect=version) == (VALUE[-3:], version)
        assert store.get_versioned(v, None, expect=version)[0] == VALUE
        assert store.get_ranges(v, [Range(50, 3), Range(0, 2), Range(90, 10)], expect=version) == \
            [VALUE[50:53], VALUE[:2], VALUE[90:]]
        subject.other_writer(v, b"new" * 20)  # another size: a new version on every store
        for read in (lambda: store.get_versioned(v, Range(0, 4), expect=version),
                     lambda: store.get_versioned(v, Suffix(4), expect=version),
                     lambda: store.get_ranges(v, [Range(0, 2), Range(30, 2)], expect=version)):
            with pytest.raises(ValueChangedError, match="'?v'? was replaced|/v was replaced"):
                read()
        data, newer = store.get_versioned(v, Range(0, 3))
        assert data == b"new" and newer != version
        if self.writable:
            store.get(v)  # a conditional store deletes the version it read whole
            store.delete(v)
        else:
            subject.other_writer(v, None)
        with pytest.raises(ValueChangedError):
            store.get_versioned(v, Range(0, 3), expect=newer)
        assert store.get_versioned(v, Range(0, 3)) == (None, None)
