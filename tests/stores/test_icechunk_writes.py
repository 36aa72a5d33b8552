"""An Icechunk branch's session written in-process (stores/icechunk_store.py): what a write-back,
a node's making or deleting leaves in the saved fork (icechunk_saved.py), and how commits land."""

import sys

import numpy as np
import pytest

from helpers import small_icechunk_repository

pytestmark = pytest.mark.needs_python312  # skipped on 3.11, saying so (tests/conftest.py)

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


TIMEOUT = 60.0  # the store's bound on each call: generous, as a loaded machine's commits may be slow


def branch_store(path, recovery, closed_after, timeout=TIMEOUT):
    """A writable store of main whose writes not committed are saved in `recovery` (its
    repository closed at the test's end)."""
    from zarrfs.stores.icechunk_repository import open_repository

    repository = closed_after(open_repository(str(path), str(path), timeout))
    return repository.branch_store(repository.version("@branch.main"), str(recovery))


def test_a_deleted_node_is_saved_against_a_crash(tmp_path, closed_after):
    small_icechunk_repository(tmp_path / "repo")
    store = branch_store(tmp_path / "repo", tmp_path / "recovery", closed_after)
    store.delete_node("a")
    assert store.stat("a") is None
    # a crash now: the next mount takes back the saved fork, the delete in it
    assert branch_store(tmp_path / "repo", tmp_path / "recovery", closed_after).stat("a") is None


class CountingSaves:
    """A SavedSession that counts its saves."""

    def __init__(self, saved):
        self.saved, self.saves = saved, 0
        self.path, self.directory = saved.path, saved.directory

    def save(self, fork):
        self.saves += 1
        self.saved.save(fork)

    def load(self):
        return self.saved.load()

    def remove(self):
        self.saved.remove()


def test_a_new_array_of_many_chunks_is_written_and_saved_once(tmp_path, closed_after):
    import json

    small_icechunk_repository(tmp_path / "repo")
    store = branch_store(tmp_path / "repo", tmp_path / "recovery", closed_after)
    counting = store._saved = CountingSaves(store._saved)
    values = np.arange(64, dtype="<u1")
    staging = store.begin_node("n")
    for chunk in range(16):
        store.set(f"{staging}/c/{chunk}", values[chunk * 4:chunk * 4 + 4].tobytes())
    document = {"zarr_format": 3, "node_type": "array", "shape": [64], "data_type": "uint8",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "codecs": [{"name": "bytes"}], "fill_value": 0, "attributes": {}}
    store.commit_node(staging, "n", {"zarr.json": json.dumps(document).encode()})
    assert counting.saves == 1  # not once per chunk: a node of N chunks pickled the fork N + 1 times
    taken_back = branch_store(tmp_path / "repo", tmp_path / "recovery", closed_after)  # a crash now loses none of it
    assert [taken_back.get(f"n/c/{chunk}") for chunk in range(16)] == \
        [values[chunk * 4:chunk * 4 + 4].tobytes() for chunk in range(16)]


class SlowCommitSession:
    """icechunk's session whose commit has no answer within the store's timeout: after
    committing (`landed`), or before (not). The store's wait ends as at its timeout (the loop's
    TimeoutError), at once rather than after a real timeout that the real commit would race."""

    def __init__(self, session, landed: bool):
        self._session, self._landed = session, landed

    async def commit_async(self, message, **options):
        if self._landed:
            await self._session.commit_async(message, **options)
        raise TimeoutError  # the answer lost: what the store's wait sees at its timeout

    def __getattr__(self, name):
        return getattr(self._session, name)


def write(store, value: int) -> None:
    """Chunk a/c/0/0 of `a` all `value`."""
    store.set("a/c/0/0", np.full((10, 10), value, "<i4").tobytes())


def test_a_commit_that_landed_after_the_timeout_is_taken_as_landed(tmp_path, closed_after):
    repo, first = small_icechunk_repository(tmp_path / "repo")
    store = branch_store(tmp_path / "repo", tmp_path / "recovery", closed_after)
    write(store, 7)
    store._session = SlowCommitSession(store._session, landed=True)
    snapshot = store.commit("late")
    head = repo.lookup_snapshot(repo.lookup_branch("main"))
    assert (snapshot, head.message, head.parent_id) == (head.id, "late", first)
    assert store.snapshot == snapshot and not store.changed()
    write(store, 8)  # the store goes on from the landed snapshot: no conflict with its own commit
    again = store.commit("after")
    assert repo.lookup_snapshot(again).parent_id == snapshot


def test_a_commit_that_timed_out_unlanded_is_the_timeout(tmp_path, closed_after):
    import errno

    from zarrfs.errors import StoreError

    repo, first = small_icechunk_repository(tmp_path / "repo")
    store = branch_store(tmp_path / "repo", tmp_path / "recovery", closed_after)
    write(store, 7)
    store._session = SlowCommitSession(store._session, landed=False)
    with pytest.raises(StoreError) as timed_out:
        store.commit("late")
    assert timed_out.value.errno == errno.ETIMEDOUT
    assert repo.lookup_branch("main") == first and store.changed()


def test_a_remote_repository_leaves_a_fresh_staged_node_at_remove_temporaries(seaweed, tmp_path, monkeypatch,
                                                                             closed_after):
    """The contract's rule for a remote store (store_contract.py,
    test_remove_temporaries_finishes_interrupted_nodes), on a repository on S3."""
    from servers.seaweed import BUCKET, USERS, unique_prefix
    from zarrfs.stores.icechunk_repository import IcechunkChoice
    from zarrfs.stores.source_url import RemoteOptions, open_source

    prefix = unique_prefix("icechunk-staged")
    key, secret, _ = USERS["admin"]
    storage = icechunk.s3_storage(bucket=BUCKET, prefix=prefix, endpoint_url=seaweed.endpoint, allow_http=True,
                                  force_path_style=True, region="us-east-1", access_key_id=key,
                                  secret_access_key=secret)
    session = icechunk.Repository.create(storage).writable_session("main")
    zarr.group(session.store).create_group("g")
    session.commit("g")
    for name, value in seaweed.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    source = open_source(seaweed.url(prefix), False, RemoteOptions(endpoint=seaweed.endpoint),
                         icechunk=IcechunkChoice(forced=True), recovery_dir=str(tmp_path / "recovery"))
    closed_after(source.repository)
    store = source.store
    try:
        assert store.capabilities.remote
        staging = store.begin_node("g/n")
        store.publish([store.stage(f"{staging}/c/0", b"chunk")])
        assert store.remove_temporaries() == 0
        assert store.get(f"{staging}/c/0") == b"chunk" and store.list_dir("g") == ["zarr.json"]
    finally:
        store.close()


class SlowRearranging:
    """icechunk's repository whose rearrange sessions answer their commit late, after it landed."""

    def __init__(self, repository):
        self._repository = repository

    async def rearrange_session_async(self, branch):
        return SlowCommitSession(await self._repository.rearrange_session_async(branch), landed=True)

    def __getattr__(self, name):
        return getattr(self._repository, name)


def test_a_move_that_landed_after_the_timeout_is_taken_as_landed(tmp_path, closed_after):
    repo, first = small_icechunk_repository(tmp_path / "repo")
    store = branch_store(tmp_path / "repo", tmp_path / "recovery", closed_after)
    write(store, 7)  # committed first, by the move
    repository, branch = store._branch
    store._branch = (SlowRearranging(repository), branch)
    store.move_node("a", "b")
    history = list(repo.ancestry(branch="main"))
    assert [info.message for info in history[:2]] == ["zarrfs: moved /a to /b", "zarrfs: the writes before moving /a to /b"]
    assert store.snapshot == history[0].id and store.stat("a") is None and store.stat("b") is not None
    store._branch = (repository, branch)
    store.set("b/c/0/0", np.full((10, 10), 8, "<i4").tobytes())
    assert repo.lookup_snapshot(store.commit("after")).parent_id == history[0].id
