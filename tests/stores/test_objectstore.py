"""ObjectStore against a real S3-compatible server (SeaweedFS): ranged reads, listings, conditional
writes, and the engine merging with a writer that got there first."""

import errno
import logging
import time

import numpy as np
import obstore
import pytest
import zarr

from helpers import open_raw_file
from servers.seaweed import unique_prefix
from zarrfs.byte_ranges import Range, Suffix
from zarrfs.engine.writeback import CONFLICT_RETRIES
from zarrfs.errors import ConflictError, StoreError
from zarrfs.stores.object_store import ObjectStore
from zarrfs.stores.source_url import RemoteOptions, open_store


def object_store(seaweed, prefix, user="admin", **kwargs) -> ObjectStore:
    return ObjectStore(seaweed.store(prefix, user), seaweed.url(prefix), **kwargs)


def other_machine_first(store: ObjectStore, write) -> None:
    """`store`'s next publish is preceded by `write`: another machine storing the same values
    between this mount's read of them and its PUT (the real server sees both)."""
    publish = store.publish

    def raced(staged):
        store.publish = publish
        write()
        publish(staged)

    store.publish = raced


def test_reads_whole_ranged_suffix_and_missing(seaweed):
    prefix = unique_prefix("get")
    obstore.put(seaweed.store(prefix), "x/v", bytes(range(100)))
    store = object_store(seaweed, prefix)
    assert store.get("x/v") == bytes(range(100))
    assert store.get("x/v", Range(10, 5)) == bytes(range(10, 15))
    assert store.get("x/v", Suffix(3)) == bytes([97, 98, 99])
    assert store.get("x/v", Range(98, 10)) == bytes([98, 99])  # short at the end, as pread
    assert store.get("x/v", Range(200, 10)) == b""  # wholly past the end (416): empty, as pread
    assert store.get("x/missing") is None
    assert store.get_ranges("x/v", [Range(0, 2), Range(50, 3)]) == [b"\x00\x01", bytes([50, 51, 52])]
    assert store.get_many(["x/v", "x/missing"]) == {"x/v": bytes(range(100)), "x/missing": None}


def test_lists_names_stats_and_files(seaweed):
    prefix = unique_prefix("list")
    remote = seaweed.store(prefix)
    for key in ("zarr.json", "a/zarr.json", "a/c/0/0", "a/c/0/1", "b/zarr.json"):
        obstore.put(remote, key, b"{}" if key.endswith("json") else b"12345")
    store = object_store(seaweed, prefix)
    assert store.list_dir("") == ["a", "b", "zarr.json"]
    assert store.list_dir("a") == ["c", "zarr.json"]
    assert store.list_dir("nothing") == []
    assert store.stat("a/c/0/1").st_size == 5
    assert store.stat("a").st_mode & 0o170000 == 0o040000
    assert store.stat("a/zarr.json").st_size == 2
    assert store.stat("a/nope") is None
    assert sorted((k, st.st_size) for k, st in store.files("a")) == [("c/0/0", 5), ("c/0/1", 5), ("zarr.json", 2)]


def test_a_value_changed_by_another_writer_is_a_conflict_not_an_overwrite(seaweed):
    prefix = unique_prefix("cas")
    mine, theirs = object_store(seaweed, prefix), object_store(seaweed, prefix)
    mine.set("k", b"first")
    assert theirs.get("k") == b"first"
    assert mine.get("k") == b"first"
    theirs.set("k", b"theirs")
    with pytest.raises(ConflictError) as raised:
        mine.set("k", b"mine")  # If-Match on the ETag it read: refused
    assert "k" in str(raised.value)
    assert object_store(seaweed, prefix).get("k") == b"theirs"
    assert mine.get("k") == b"theirs"  # read again: now it may write
    mine.set("k", b"mine")
    assert object_store(seaweed, prefix).get("k") == b"mine"


def test_a_put_on_an_object_another_writer_deleted_is_a_conflict_not_a_success(seaweed, monkeypatch):
    """AWS S3 answers a PUT with If-Match on an object deleted since with 404 (SeaweedFS with
    412): that is a conflict to merge, not a write that went through."""
    from zarrfs.stores import object_store as objectstore
    prefix = unique_prefix("deleted")
    mine = object_store(seaweed, prefix)
    mine.set("k", b"first")
    obstore.delete(seaweed.store(prefix), "k")
    put, answered = objectstore.obstore.put, []

    def as_aws(store, key, data, **kwargs):
        if isinstance(kwargs.get("mode"), dict):  # If-Match
            answered.append(key)
            raise FileNotFoundError(f"NoSuchKey: {key}")
        return put(store, key, data, **kwargs)

    monkeypatch.setattr(objectstore.obstore, "put", as_aws)
    with pytest.raises(ConflictError):
        mine.set("k", b"mine")
    assert answered == ["k"]  # the 404 was what made it a conflict
    assert mine.get("k") is None  # read again: absent, so the next PUT creates it
    mine.set("k", b"mine")
    assert object_store(seaweed, prefix).get("k") == b"mine"


def test_a_key_created_by_another_writer_is_a_conflict(seaweed):
    prefix = unique_prefix("create")
    mine, theirs = object_store(seaweed, prefix), object_store(seaweed, prefix)
    assert mine.get("new") is None  # seen absent: a PUT with If-None-Match
    theirs.set("new", b"theirs")
    with pytest.raises(ConflictError):
        mine.set("new", b"mine")
    assert object_store(seaweed, prefix).get("new") == b"theirs"


class Clock:
    """The time module as the store sees it, its monotonic clock moved by the test alone: a
    document's lifetime ends when the test says, not when a loaded machine reaches the next line."""

    def __init__(self):
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


def test_metadata_documents_are_trusted_for_metadata_ttl(seaweed, monkeypatch):
    import zarrfs.stores.object_store

    clock = Clock()
    monkeypatch.setattr(zarrfs.stores.object_store, "time", clock)
    prefix = unique_prefix("ttl")
    remote = seaweed.store(prefix)
    obstore.put(remote, "zarr.json", b'{"a": 1}')
    store = object_store(seaweed, prefix, metadata_ttl=0.5)
    assert store.get("zarr.json") == b'{"a": 1}'
    obstore.put(remote, "zarr.json", b'{"a": 2}')
    clock.now += 0.4
    assert store.get("zarr.json") == b'{"a": 1}'  # within its lifetime: no request
    clock.now += 0.2
    assert store.get("zarr.json") == b'{"a": 2}'


def test_read_only_and_denied_writes(seaweed):
    prefix = unique_prefix("denied")
    with pytest.raises(StoreError) as raised:
        object_store(seaweed, prefix, read_only=True).set("k", b"v")
    assert raised.value.errno == errno.EROFS
    with pytest.raises(StoreError) as raised:
        object_store(seaweed, prefix, user="reader").set("k", b"v")
    assert raised.value.errno == errno.EACCES and "'k'" in str(raised.value)
    assert "secretreader" not in str(raised.value)


def test_a_flush_that_meets_another_writers_shard_merges_and_writes_again(seaweed, caplog):
    """The race a second machine makes: between this mount's read of the shard it merges with
    and its PUT, the other machine stores the shard. The conditional PUT fails; the flush reads
    the new shard and writes only its own inner chunks on top."""
    prefix = unique_prefix("race")
    zarr.create_array(seaweed.zarr_store(prefix), shape=(32,), chunks=(8,), shards=(32,), dtype="i4")[...] = 5
    store = object_store(seaweed, prefix)
    raw = open_raw_file(store)
    raw.write(0, np.full(8, 1, "<i4").tobytes())  # inner chunk 0 here

    other_machine_first(store, lambda: zarr.open_array(seaweed.zarr_store(prefix), mode="r+").__setitem__(
        slice(24, None), 3))  # inner chunk 3, just before our PUT
    with caplog.at_level(logging.WARNING):
        raw.array.flush()
    stored = zarr.open_array(seaweed.zarr_store(prefix), mode="r")[...]
    assert stored.tolist() == [1] * 8 + [5] * 16 + [3] * 8
    assert "changed by another writer" in caplog.text


def test_a_flush_that_meets_a_conflict_every_time_gives_up_after_its_retries_and_loses_nothing(seaweed):
    """Another machine changes the same chunk before each of this mount's PUTs: after
    CONFLICT_RETRIES attempts the ConflictError reaches the caller and the written elements stay
    dirty; the next flush, unraced, stores them merged with the other machine's last write."""
    prefix = unique_prefix("again")
    zarr.create_array(seaweed.zarr_store(prefix), shape=(32,), chunks=(8,), dtype="i4")[...] = 5
    store = object_store(seaweed, prefix)
    raw = open_raw_file(store)
    raw.write(0, np.full(4, 1, "<i4").tobytes())  # half of chunk 0
    publish, attempts = store.publish, []

    def always_raced(staged):
        attempts.append(staged)
        zarr.open_array(seaweed.zarr_store(prefix), mode="r+")[4:8] = 10 + len(attempts)  # the other half
        publish(staged)

    store.publish = always_raced
    with pytest.raises(ConflictError):
        raw.array.flush()
    assert len(attempts) == CONFLICT_RETRIES
    assert raw.array.dirty
    stored = zarr.open_array(seaweed.zarr_store(prefix), mode="r")[...]
    assert stored.tolist() == [5] * 4 + [10 + CONFLICT_RETRIES] * 4 + [5] * 24  # theirs, not yet ours
    store.publish = publish
    raw.array.flush()
    assert not raw.array.dirty
    stored = zarr.open_array(seaweed.zarr_store(prefix), mode="r")[...]
    assert stored.tolist() == [1] * 4 + [10 + CONFLICT_RETRIES] * 4 + [5] * 24


def test_a_conflict_whose_merge_failed_is_merged_before_the_chunk_is_written_again(seaweed):
    """A PUT meets another writer's change and the merge after it fails (the connection drops):
    the next flush must not write the chunk as it was over the other writer's values, even
    conditionally on the version a reader fetched meanwhile. It merges first."""
    prefix = unique_prefix("unmerged")
    zarr.create_array(seaweed.zarr_store(prefix), shape=(32,), chunks=(8,), dtype="i4")[...] = 5
    store = object_store(seaweed, prefix)
    raw = open_raw_file(store)
    raw.write(0, np.full(4, 1, "<i4").tobytes())  # half of chunk 0
    other_machine_first(store, lambda: zarr.open_array(seaweed.zarr_store(prefix), mode="r+").__setitem__(
        slice(4, 8), 9))  # the other half
    get_versioned = store.get_versioned

    def lost_once(key, byte_range=None, expect=None, limit=None):
        if key == "c/0" and byte_range is None:  # the merge's read
            store.get_versioned = get_versioned
            raise StoreError(f"cannot read {key!r}: connection reset", errno.ECONNRESET)
        return get_versioned(key, byte_range, expect, limit)

    store.get_versioned = lost_once
    with pytest.raises(StoreError):
        raw.array.flush()
    assert raw.array.dirty
    assert store.get("c/0") is not None  # a reader fetches the new version, whole
    raw.array.flush()
    assert not raw.array.dirty
    stored = zarr.open_array(seaweed.zarr_store(prefix), mode="r")[...]
    assert stored.tolist() == [1] * 4 + [9] * 4 + [5] * 24


def test_credentials_in_the_url_are_refused(seaweed):
    with pytest.raises(StoreError) as raised:
        open_store("s3://AKADMIN:secretadmin@test/x", False, RemoteOptions(endpoint=seaweed.endpoint))
    assert "secretadmin" not in str(raised.value) and "credentials in the URL" in str(raised.value)


def test_a_credentials_file_must_be_private(seaweed, tmp_path, monkeypatch):
    prefix = unique_prefix("creds")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKADMIN\naws_secret_access_key = secretadmin\n")
    credentials.chmod(0o644)
    options = RemoteOptions(endpoint=seaweed.endpoint, credentials_file=str(credentials))
    with pytest.raises(StoreError) as raised:
        open_store(seaweed.url(prefix), False, options)
    assert "chmod 600" in str(raised.value)
    credentials.chmod(0o600)
    store = open_store(seaweed.url(prefix), False, options)
    assert store.get("zarr.json") is not None


@pytest.mark.parametrize("when", ["before the PUT", "before the flush"])
@pytest.mark.parametrize("sharded", [False, True], ids=["chunk", "inner chunk"])
def test_two_writers_of_disjoint_elements_of_one_chunk_both_persist(seaweed, caplog, sharded, when):
    """Within one chunk (or one inner chunk of a shard): this mount writes the first half, the
    other machine the second half, just before this mount's PUT (the conflict merges elements)
    or before its flush begins (the flush keeps their half, whatever the version it reads the
    shard at)."""
    prefix = unique_prefix("elements")
    shards = {"shards": (16,)} if sharded else {}
    zarr.create_array(seaweed.zarr_store(prefix), shape=(16,), chunks=(8,), dtype="i4", **shards)[...] = 5
    store = object_store(seaweed, prefix)
    raw = open_raw_file(store)
    raw.write(0, np.full(4, 1, "<i4").tobytes())  # elements 0-3 of chunk 0

    def theirs():  # elements 4-7, same chunk
        zarr.open_array(seaweed.zarr_store(prefix), mode="r+")[4:8] = 2

    if when == "before the PUT":
        other_machine_first(store, theirs)
    else:
        theirs()
    with caplog.at_level(logging.WARNING):
        raw.array.flush()
    stored = zarr.open_array(seaweed.zarr_store(prefix), mode="r")[...]
    assert stored.tolist() == [1] * 4 + [2] * 4 + [5] * 8
    if when == "before the PUT":
        assert "changed by another writer" in caplog.text


def test_a_rewrite_within_the_same_second_still_moves_the_arrays_mtime(seaweed):
    """S3 times are whole seconds: the ETag (as st_ino) tells a rewrite of the same size apart,
    and the array's mtime moves on though no stored time did."""
    from zarrfs.fs.stored_usage import Usage
    prefix = unique_prefix("second")
    store = object_store(seaweed, prefix)
    store.set("a/zarr.json", b"{}")
    store.set("a/c/0", b"first")
    usage = Usage(store, lifetime=0)
    before = usage.of("a")
    obstore.put(seaweed.store(prefix), "a/c/0", b"other")  # same size, most likely the same second
    after = usage.of("a")
    assert after.version != before.version and after.mtime_ns > before.mtime_ns
    assert usage.of("a") == after  # nothing changed since: nothing moves


def test_the_versions_remembered_for_conditional_puts_are_bounded(seaweed, monkeypatch):
    """A long stream reads millions of chunks: only the last ETAGS keys' versions are kept."""
    from zarrfs.stores import object_store as objectstore
    monkeypatch.setattr(objectstore, "ETAGS", 3)
    prefix = unique_prefix("etags")
    remote = seaweed.store(prefix)
    for i in range(5):
        obstore.put(remote, f"k{i}", b"v")
    store = object_store(seaweed, prefix)
    for i in range(5):
        store.get(f"k{i}")
    assert list(store._etags) == ["k2", "k3", "k4"]
    obstore.put(remote, "k4", b"changed")
    with pytest.raises(ConflictError):  # a remembered version still guards its PUT
        store.set("k4", b"mine")


def test_a_chunk_written_in_part_whose_version_was_forgotten_is_merged_before_its_put(seaweed, monkeypatch):
    """The store remembers a bounded number of versions: when the one a partial write read is
    pushed out before the flush, the chunk is read again and merged, not PUT unconditionally
    over what another writer stored meanwhile."""
    from zarrfs.stores import object_store as objectstore
    monkeypatch.setattr(objectstore, "ETAGS", 2)
    prefix = unique_prefix("forgotten")
    zarr.create_array(seaweed.zarr_store(prefix), shape=(32,), chunks=(8,), dtype="i4")[...] = 5
    store = object_store(seaweed, prefix)
    raw = open_raw_file(store)
    raw.write(0, np.full(4, 1, "<i4").tobytes())  # half of chunk 0: read, its version remembered
    for i in (1, 2, 3):
        store.get(f"c/{i}")  # other reads push it out
    assert not store.version_known("c/0")
    zarr.open_array(seaweed.zarr_store(prefix), mode="r+")[4:8] = 9  # another machine, the other half
    raw.array.flush()
    stored = zarr.open_array(seaweed.zarr_store(prefix), mode="r")[...]
    assert stored.tolist() == [1] * 4 + [9] * 4 + [5] * 24


def test_a_move_carries_the_document_as_stored_not_as_cached(seaweed):
    prefix = unique_prefix("movedoc")
    remote = seaweed.store(prefix)
    obstore.put(remote, "a/zarr.json", b'{"old": 1}')
    store = object_store(seaweed, prefix)
    assert store.get("a/zarr.json") == b'{"old": 1}'  # trusted for metadata_ttl from now on
    obstore.put(remote, "a/zarr.json", b'{"edited elsewhere": 1}')
    store.move_node("a", "b")
    assert bytes(obstore.get(remote, "b/zarr.json").bytes()) == b'{"edited elsewhere": 1}'
