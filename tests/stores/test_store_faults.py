"""Faults on the way to the store, injected by a proxy (tests/servers/fault_proxy.py) between a
real mount and a real server (SeaweedFS for S3, Azurite for Azure): PUTs cut while their body is
sent, answers lost after the PUT landed, 503 and 500 storms, reset, truncated and stalled GETs,
a server gone during fsync and back, DELETEs of fill-only chunks and hierarchy edits under
resets; and at the store level, a retried PUT that meets another writer's value (a conflict) or
its own (success). Nothing written is lost or torn, errors are EIO with a line naming the key,
and what the store held all along is never sent again."""

import contextlib
import errno
import os
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import obstore
import pytest
import zarr
from zarr.storage import ObjectStore

from helpers import delete_array
from mounting import mounted, read_or_eio, wait_for
from servers.emulators import AZURE_ACCOUNT, AZURE_KEY
from servers.fault_proxy import CUT, LOSE, RESET, STALL, TRUNCATE, FaultProxy
from servers.seaweed import unique_prefix
from zarrfs.errors import ConflictError
from zarrfs.stores import object_store, resend

OLD, NEW = np.full(64, 1, "u1"), np.arange(2, 66, dtype="u1")  # an array of 8 chunks of 8


@dataclass
class Backend:
    """A server, and how a mount through a proxy in front of it is made."""

    name: str
    target: tuple[str, int]
    source: str
    env: dict
    store: object  # obstore's store of the mount's root, straight to the server
    via: Callable  # endpoint -> obstore's store of the mount's root through that endpoint
    account_path: str = ""  # Azurite's endpoint names the account in its path

    def options(self, proxy: FaultProxy, *more: str) -> tuple[str, ...]:
        return (f"endpoint={proxy.endpoint}{self.account_path}", "timeout=4", *more)

    def deletion(self) -> tuple[str, str]:
        """(method, path) of the request deleting a key: a batch of deletions in either API."""
        return ("POST", "?delete") if self.name == "s3" else ("POST", "comp=batch")

    def zarr_store(self):
        return ObjectStore(self.store)

    def keys(self, below: str) -> list[str]:
        return sorted(m["path"] for page in obstore.list(self.store, f"{below}/") for m in page)


def _seaweed(seaweed) -> Backend:
    prefix = unique_prefix("faults")
    host, port = seaweed.endpoint.removeprefix("http://").split(":")
    return Backend("s3", (host, int(port)), seaweed.url(prefix), seaweed.env(), seaweed.store(prefix),
                   lambda endpoint: seaweed.store(prefix, endpoint=endpoint))


def _azurite(azurite) -> Backend:
    container = f"c{uuid.uuid4().hex[:12]}"
    azurite.make_container(container)
    host, port = azurite.endpoint.removeprefix("http://").split("/")[0].split(":")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AWS_"))}
    env.update(AZURE_STORAGE_ACCOUNT_NAME=AZURE_ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY=AZURE_KEY)
    def via(endpoint):
        from obstore.store import AzureStore

        return AzureStore(container, prefix="data", endpoint=f"{endpoint}/{AZURE_ACCOUNT}", account_name=AZURE_ACCOUNT,
                          account_key=AZURE_KEY, client_options={"allow_http": True})

    return Backend("azure", (host, int(port)), f"az://{container}/data", env, azurite.store(container, "data"), via,
                   f"/{AZURE_ACCOUNT}")


@pytest.fixture(params=["s3", "azure"])
def backend(request) -> Backend:
    return _seaweed(request.getfixturevalue("seaweed")) if request.param == "s3" \
        else _azurite(request.getfixturevalue("azurite"))


@pytest.fixture
def s3(seaweed) -> Backend:
    return _seaweed(seaweed)


@contextlib.contextmanager
def through_proxy(backend: Backend, tmp_path, *options):
    """A mount of `backend` whose every request passes the fault proxy; faults are cleared
    before the unmount, so its last write-back reaches the server."""
    with FaultProxy(backend.target) as proxy:
        with mounted(backend.source, tmp_path, *backend.options(proxy, *options), env=backend.env) as m:
            try:
                yield proxy, m
            finally:
                proxy.down = False
                proxy.clear()


def make_array(backend: Backend, name: str = "a", values=OLD):
    array = zarr.create_array(backend.zarr_store(), name=name, shape=values.shape, chunks=(8,), dtype="u1",
                              fill_value=0, compressors=None)
    array[...] = values
    return array


def stored(backend: Backend, name: str = "a") -> np.ndarray:
    return zarr.open_array(backend.zarr_store(), path=name, mode="r")[...]


def written(m, values, name: str = "a.bin", faults=None):
    """Open, read (so each PUT is conditional on the version read), arm `faults`, write, fsync."""
    fd = os.open(m / name, os.O_RDWR)
    try:
        assert os.pread(fd, values.nbytes, 0) == OLD.tobytes()
        if faults:
            faults()
        os.pwrite(fd, values.tobytes(), 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_a_put_cut_while_its_body_is_sent_is_sent_again(backend, tmp_path):
    """Three chunk PUTs (If-Match) reset halfway through their bodies: each is sent again, fsync
    returns 0, and each chunk is PUT whole exactly once."""
    make_array(backend)
    with through_proxy(backend, tmp_path) as (proxy, m):
        written(m, NEW, faults=lambda: proxy.add(CUT, "PUT", "/a/c/", times=3))
        assert proxy.count("PUT", "/a/c/", CUT) == 3
        assert [proxy.count("PUT", f"/a/c/{i}", None) for i in range(8)] == [1] * 8
    assert np.array_equal(stored(backend), NEW)


def test_after_a_failed_fsync_only_the_chunk_not_stored_is_sent_again(backend, tmp_path):
    """One chunk's PUT is cut on every try: fsync is EIO naming it, the other seven are stored.
    The next fsync sends that chunk alone (before: all eight again)."""
    make_array(backend)
    with through_proxy(backend, tmp_path) as (proxy, m):
        fd = os.open(m / "a.bin", os.O_RDWR)
        try:
            os.pread(fd, 64, 0)
            proxy.add(CUT, "PUT", "/a/c/3", times=resend.TRIES)
            os.pwrite(fd, NEW.tobytes(), 0)
            with pytest.raises(OSError) as raised:
                os.fsync(fd)
            assert raised.value.errno == errno.EIO
            os.fsync(fd)
        finally:
            os.close(fd)
        assert [proxy.count("PUT", f"/a/c/{i}", None) for i in range(8)] == [1] * 8
        assert "a/c/3" in m.log()
    assert np.array_equal(stored(backend), NEW)


def test_a_put_that_landed_but_whose_answer_was_lost_is_not_a_conflict(backend, tmp_path):
    """The server stored two PUTs, but their answers never came: the PUTs sent again meet their
    own new versions (412); the bytes stored are ours, so it is success, with no merge."""
    make_array(backend)
    with through_proxy(backend, tmp_path) as (proxy, m):
        written(m, NEW, faults=lambda: proxy.add(LOSE, "PUT", "/a/c/", times=2))
        assert proxy.count("PUT", "/a/c/", LOSE) == 2
        log = m.log()
    assert "another writer" not in log and "could not be stored" not in log, log
    assert np.array_equal(stored(backend), NEW)


def test_a_retried_put_that_meets_another_writers_value_is_still_a_conflict(backend):
    """Store level: our PUT is cut; the other writer's value was stored before it. The retry is
    refused (412), the value read back is not ours, so the conflict stands and names the key
    (the write-back merges it), and what the other writer stored is kept."""
    with FaultProxy(backend.target) as proxy:
        store = object_store.ObjectStore(backend.via(proxy.endpoint), backend.source)
        store.set("k", b"ours, first")
        assert bytes(store.get_versioned("k")[0]) == b"ours, first"  # the next PUT: If-Match this version
        obstore.put(backend.store, "k", b"the other writer's")
        proxy.add(CUT, "PUT", "/k")
        with pytest.raises(ConflictError) as raised:
            store.publish([store.stage("k", b"ours, second")])
        assert raised.value.keys == ("k",)
        assert proxy.count("PUT", "/k", CUT) == 1 and proxy.count("PUT", "/k", None) == 2  # the set, the retry
        assert bytes(obstore.get(backend.store, "k").bytes()) == b"the other writer's"


def test_a_put_whose_answer_was_lost_is_stored_with_its_version_known(backend):
    """Store level: the server stored our PUT but the answer was lost; the retry's 412 is ours,
    so publish succeeds, and the version remembered is the one stored: the next conditional PUT
    goes through at the first try."""
    with FaultProxy(backend.target) as proxy:
        store = object_store.ObjectStore(backend.via(proxy.endpoint), backend.source)
        store.set("k", b"first")
        proxy.add(LOSE, "PUT", "/k")
        store.publish([store.stage("k", b"second")])
        proxy.clear()
        store.publish([store.stage("k", b"third")])
        assert [s.fault for s in proxy.seen if s.method == "PUT"] == [None, LOSE, None, None]
        assert bytes(obstore.get(backend.store, "k").bytes()) == b"third"


def test_a_server_gone_during_fsync_is_eio_naming_a_chunk_then_fsync_stores_it(backend, tmp_path):
    make_array(backend)
    with through_proxy(backend, tmp_path) as (proxy, m):
        fd = os.open(m / "a.bin", os.O_RDWR)
        try:
            os.pread(fd, 64, 0)
            os.pwrite(fd, NEW.tobytes(), 0)
            proxy.down = True
            with pytest.raises(OSError) as raised:
                os.fsync(fd)
            assert raised.value.errno == errno.EIO
            assert np.array_equal(stored(backend), OLD)  # nothing reached the server
            proxy.down = False
            try:
                os.fsync(fd)
            except OSError as e:  # a background write-back failed during the outage too: said once
                assert e.errno == errno.EIO
                os.fsync(fd)
        finally:
            os.close(fd)
        assert "a/c/" in m.log()  # the error named a chunk key
    assert np.array_equal(stored(backend), NEW)


def test_503_and_500_storms_are_retried(s3, tmp_path):
    make_array(s3)
    with through_proxy(s3, tmp_path) as (proxy, m):
        written(m, NEW, faults=lambda: (proxy.add(503, "PUT", "/a/c/", times=3),
                                        proxy.add(500, "PUT", "/a/c/", times=2)))
        assert proxy.count("PUT", "/a/c/", 503) == 3 and proxy.count("PUT", "/a/c/", 500) == 2
    assert np.array_equal(stored(s3), NEW)


def test_reset_and_truncated_gets_give_the_right_bytes_or_eio(s3, tmp_path):
    """Never wrong bytes: a reset GET is sent again; a truncated one is sent again or EIO, and
    the next read is right."""
    make_array(s3, values=NEW)
    with through_proxy(s3, tmp_path, "ro") as (proxy, m):
        proxy.add(RESET, "GET", "/a/c/", times=2)
        proxy.add(TRUNCATE, "GET", "/a/c/", times=2)
        with open(m / "a.bin", "rb", buffering=0) as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
            for i in range(8):
                try:
                    got = os.pread(f.fileno(), 8, 8 * i)
                except OSError as e:
                    assert e.errno == errno.EIO
                    got = os.pread(f.fileno(), 8, 8 * i)
                assert got == NEW[8 * i:8 * i + 8].tobytes()
        assert proxy.count("GET", "/a/c/", RESET) == 2 and proxy.count("GET", "/a/c/", TRUNCATE) == 2


def test_a_stalled_get_is_eio_after_one_attempt_and_reads_resume_once_it_answers(s3, tmp_path):
    """A stream's read() with every chunk GET stalled: the kernel's read-ahead fails at the
    timeout, and its synchronous re-read of the first page fails at once instead of waiting
    again (before: a second GET of c/0, 1.5 timeouts in all at the default 30 s). Reads resume
    once the server answers, without a remount."""
    values = np.arange(1 << 20, dtype="u1")
    zarr.create_array(s3.zarr_store(), name="s", shape=values.shape, chunks=(64 << 10,), dtype="u1",
                      compressors=None)[...] = values
    with through_proxy(s3, tmp_path, "ro", "timeout=2") as (proxy, m):
        os.listdir(m.path)
        proxy.add(STALL, "GET", "/s/c/", times=1000)
        # a separate process: were the request unbounded, the test would still end
        reader = subprocess.run(["dd", f"if={m / 's.bin'}", "of=/dev/null", "bs=1M", "count=1"],
                                capture_output=True, text=True, timeout=60)
        assert reader.returncode != 0 and "Input/output error" in reader.stderr
        assert proxy.count("GET", "/s/c/0", STALL) == 1  # the re-read asked nothing
        assert "s/c/0" in m.log()
        proxy.clear()
        wait_for(lambda: read_or_eio(m / "s.bin") == values.tobytes(), what="reads to resume")


def test_a_fill_only_chunk_is_deleted_through_a_reset(backend, tmp_path):
    make_array(backend)
    values = OLD.copy()
    values[8:16] = 0  # chunk 1 all fill value: its object is deleted
    with through_proxy(backend, tmp_path) as (proxy, m):
        method, path = backend.deletion()
        written(m, values, faults=lambda: proxy.add(RESET, method, path, times=2))
        assert proxy.count(method, path, RESET) == 2
    assert "a/c/1" not in backend.keys("a")
    assert np.array_equal(stored(backend), values)


def test_hierarchy_edits_through_cut_puts_and_reset_requests(backend, tmp_path):
    """mkdir (its zarr.json PUT with If-None-Match, cut), mv (copies and deletes, reset) and rm
    (deletes, reset): each succeeds, and the store holds exactly the hierarchy made."""
    make_array(backend)
    with through_proxy(backend, tmp_path, "metadata_ttl=0") as (proxy, m):
        proxy.add(CUT, "PUT", "/g/zarr.json", times=1)
        (m / "g").mkdir()
        assert proxy.count("PUT", "/g/zarr.json", CUT) == 1
        proxy.add(RESET, "PUT", "/g/b/", times=2)  # a copy is a PUT with a copy source
        proxy.add(RESET, *backend.deletion(), times=2)
        os.rename(m / "a.bin", m / "g/b.bin")
        proxy.add(RESET, *backend.deletion(), times=2)
        assert np.frombuffer((m / "g/b.bin").read_bytes(), "u1").tolist() == OLD.tolist()
        delete_array(m / "g", "b")  # rm b.*: the array goes with its last file
        assert "b.bin" not in os.listdir(m / "g")
        assert proxy.count(fault=RESET) == 6  # every reset armed met a request
    assert backend.keys("g") == ["g/zarr.json"] and backend.keys("a") == []
