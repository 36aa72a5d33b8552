"""Icechunk repositories (stores/icechunk_repository.py, stores/icechunk_store.py, fs/versions.py):
repositories written by icechunk-python itself, mounted, every version directory compared with
icechunk's own read of that snapshot."""

import errno
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from mounting import failed_start, mounted

pytestmark = [pytest.mark.needs_python312,
              pytest.mark.skipif(sys.version_info < (3, 12), reason="needs Python >= 3.12 (icechunk 2)")]

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


def commit(repo, branch: str, message: str, change) -> str:
    session = repo.writable_session(branch)
    change(zarr.open_group(session.store, mode="a"))
    return session.commit(message)


def write_a(values):
    def change(group):
        group["a"][...] = values
    return change


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """main: c1 (a), c2 (a changed); dev from c1: d1 (a changed, b added); tags v1 = c1, v2 = c2,
    v3 = d1. Returns (path, repo, {name: snapshot id})."""
    path = tmp_path_factory.mktemp("icechunk") / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))

    def first(group):
        group.create_array("a", shape=(40, 30), chunks=(10, 10), dtype="<i4", fill_value=0)
        group["a"][...] = np.arange(1200, dtype="<i4").reshape(40, 30)
    session = repo.writable_session("main")
    zarr.group(session.store)
    first(zarr.open_group(session.store, mode="a"))
    c1 = session.commit("first: a")
    c2 = commit(repo, "main", "second: a doubled", write_a(np.arange(1200, dtype="<i4").reshape(40, 30) * 2))
    repo.create_branch("dev", c1)

    def on_dev(group):
        group["a"][:10, :10] = -1
        group.create_array("b", shape=(7,), chunks=(3,), dtype="<f8", fill_value=0.5)[:4] = [1.5, 2.5, 3.5, 4.5]
    d1 = commit(repo, "dev", "dev: a corner, b", on_dev)
    for tag, snapshot in (("v1", c1), ("v2", c2), ("v3", d1)):
        repo.create_tag(tag, snapshot)
    return path, repo, {"c1": c1, "c2": c2, "d1": d1}


def icechunk_bytes(repo, snapshot: str, name: str) -> bytes | None:
    """The array's flat little-endian C-order bytes as icechunk-python and zarr read them (None:
    no such array; the repository's first snapshot holds no group at all)."""
    try:
        group = zarr.open_group(repo.readonly_session(snapshot_id=snapshot).store, mode="r")
    except zarr.errors.GroupNotFoundError:
        return None
    return np.ascontiguousarray(group[name][...]).tobytes() if name in group else None


def test_every_version_directory_shows_its_snapshot_as_icechunk_reads_it(repository, tmp_path):
    path, repo, ids = repository
    with mounted(path, tmp_path, "ro") as m:
        names = os.getxattr(m.path, "user.icechunk.versions").decode().split()
        assert {"@branch.main", "@branch.dev", "@tag.v1", "@tag.v2", "@tag.v3"} <= set(names)
        assert {f"@{s}" for s in ids.values()} <= set(names)
        ids_only = [name for name in names if not name.startswith(("@branch.", "@tag."))]
        empty = [name for name in ids_only if icechunk_bytes(repo, name[1:], "a") is None]
        assert [repo.lookup_snapshot(name[1:]).parent_id for name in empty] == [None]  # Repository.create's
        assert os.listdir(m.path / empty[0]) == []
        for name in names:
            snapshot = os.getxattr(m.path / name, "user.icechunk.snapshot").decode()
            for array in ("a", "b"):
                expected = icechunk_bytes(repo, snapshot, array)
                if expected is None:
                    assert not (m.path / name / f"{array}.bin").exists(), (name, array)
                    continue
                assert (m.path / name / f"{array}.bin").read_bytes() == expected, (name, array)
                assert subprocess.run(["cmp", m.path / name / f"{array}.bin", m.path / name / f"{array}.npy"],
                                      capture_output=True).returncode == 1  # the .npy has a header first
        # the mount itself: the head of main
        assert (m.path / "a.bin").read_bytes() == icechunk_bytes(repo, ids["c2"], "a")
        assert not (m.path / "b.bin").exists()


def test_a_version_directory_has_its_commit_time_message_parent_and_own_inodes(repository, tmp_path):
    path, repo, ids = repository
    with mounted(path, tmp_path, "ro") as m:
        for name, snapshot in (("@tag.v3", ids["d1"]), (f"@{ids['c2']}", ids["c2"]), ("@branch.main", ids["c2"])):
            info = repo.lookup_snapshot(snapshot)
            directory = m.path / name
            assert os.getxattr(directory, "user.icechunk.message").decode() == info.message
            assert os.getxattr(directory, "user.icechunk.parent").decode() == info.parent_id
            assert os.getxattr(directory, "user.icechunk.snapshot").decode() == snapshot
            written = int(info.written_at.timestamp() * 1e9)
            assert abs(os.stat(directory).st_mtime_ns - written) < 1000
            assert abs(os.stat(directory / "a.bin").st_mtime_ns - written) < 1000
        assert os.getxattr(m.path, "user.icechunk.snapshot").decode() == ids["c2"]  # the mount's own version
        assert os.stat(m.path / "a.bin").st_ino != os.stat(m.path / "@tag.v2" / "a.bin").st_ino  # diff compares
        assert os.stat(m.path / "@tag.v1" / "a.bin").st_ino != os.stat(m.path / "@tag.v2" / "a.bin").st_ino
        assert subprocess.run(["diff", "-q", m.path / "@tag.v1" / "a.bin", m.path / "@tag.v2" / "a.bin"],
                              capture_output=True).returncode == 1
        assert subprocess.run(["cmp", m.path / "a.bin", m.path / "@tag.v2" / "a.bin"]).returncode == 0


def test_version_directories_are_found_by_name_not_listed_and_read_only(repository, tmp_path):
    path, repo, ids = repository
    with mounted(path, tmp_path, "ro") as m:
        assert not [name for name in os.listdir(m.path) if name.startswith("@")]
        assert sorted(os.listdir(m.path / "@branch.dev")) == sorted(os.listdir(m.path / "@tag.v3"))
        assert "b.bin" in os.listdir(m.path / "@tag.v3")
        assert not (m.path / "@branch.nosuch").exists()
        assert not (m.path / "@tag.nosuch").exists()
        with pytest.raises(OSError) as refused:
            os.open(m.path / "@tag.v1" / "a.bin", os.O_WRONLY)
        assert refused.value.errno == errno.EROFS
        with pytest.raises(OSError) as refused:
            os.mkdir(m.path / "@tag.v1" / "new")
        assert refused.value.errno == errno.EROFS


@pytest.mark.parametrize("option, version", [("branch=dev", "d1"), ("tag=v1", "c1"), ("snapshot", "c2")])
def test_the_mount_shows_the_version_chosen(repository, tmp_path, option, version):
    path, repo, ids = repository
    option = f"snapshot={ids['c2']}" if option == "snapshot" else option
    with mounted(path, tmp_path, "ro", option) as m:
        assert (m.path / "a.bin").read_bytes() == icechunk_bytes(repo, ids[version], "a")
        assert os.getxattr(m.path, "user.icechunk.snapshot").decode() == ids[version]


def test_a_version_that_does_not_exist_is_one_line(repository, tmp_path):
    path, _, _ = repository
    said = failed_start(path, ["ro", "branch=nosuch"], None, tmp_path)
    assert "@branch.nosuch" in said and str(path) in said


def test_a_zarr_node_named_like_a_version_wins(tmp_path):
    """The v3 spec forbids no '@' in a node name: a root group called '@tag.v1' is data, and data
    is never hidden; the version of that name has no directory in this mount."""
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repo.writable_session("main")
    zarr.group(session.store).create_group("@tag.v1").create_array("x", shape=(3,), dtype="<u2", fill_value=7)
    repo.create_tag("v1", session.commit("a group named @tag.v1"))
    with mounted(tmp_path / "repo", tmp_path, "ro") as m:
        assert "@tag.v1" in os.listdir(m.path)
        assert "x.bin" in os.listdir(m.path / "@tag.v1")  # the group's own directory, not the tag's root
        assert (m.path / "@tag.v1" / "x.bin").read_bytes() == np.full(3, 7, "<u2").tobytes()


class CountingSessionStore:
    """icechunk's session store, every get recorded: (key, byte range asked)."""

    def __init__(self, store):
        self._store, self.gets = store, []

    async def get(self, key, prototype, byte_range=None):
        self.gets.append((key, byte_range))
        return await self._store.get(key, prototype, byte_range)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_a_read_gets_only_the_chunks_it_touches(tmp_path):
    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import mount_core

    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    session = repo.writable_session("main")
    array = zarr.group(session.store).create_array("a", shape=(100, 100), chunks=(10, 10), dtype="<f4",
                                                   compressors=[zarr.codecs.ZstdCodec()])
    array[...] = np.arange(10000, dtype="<f4").reshape(100, 100)
    session.commit("a")
    core = mount_core(str(tmp_path / "repo"), Options(read_only=True), HierarchyEdits)
    counting = core.main.store._store = CountingSessionStore(core.main.store._store)
    fh = core.open("/a.bin", os.O_RDONLY)
    counting.gets.clear()
    row, column = 57, 33
    data = core.read(fh, (row * 100 + column) * 4, 4)
    assert np.frombuffer(data, "<f4")[0] == row * 100 + column
    assert [key for key, _ in counting.gets] == ["a/c/5/3"]


@pytest.fixture(scope="module")
def long_history(tmp_path_factory):
    """A repository of 1,000 commits on main; the time to list its versions, as the mount lists
    them (IcechunkRepository.versions), measured here and reported (not asserted: machines differ)."""
    from zarrfs.stores.icechunk_repository import open_repository

    path = tmp_path_factory.mktemp("history") / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    zarr.group(session.store).create_array("n", shape=(1,), dtype="<i8", fill_value=0)
    session.commit("0")
    for i in range(1, 1000):
        session = repo.writable_session("main")
        zarr.open_array(session.store, path="n", mode="a")[0] = i
        session.commit(str(i))
    started = time.perf_counter()
    versions = open_repository(str(path), str(path), 30.0).versions()
    elapsed = time.perf_counter() - started
    print(f"\nlisting the versions of a repository of 1,000 commits took {elapsed:.3f} s", file=sys.stderr)
    return path, repo, versions


def test_the_versions_of_a_long_history_are_every_snapshot(long_history, tmp_path):
    path, repo, versions = long_history
    snapshots = [info.id for info in repo.ancestry(branch="main")]
    assert len(snapshots) == 1001  # the repository's first, empty snapshot too
    assert set(versions) == {"@branch.main", *(f"@{s}" for s in snapshots)}
    with mounted(path, tmp_path, "ro") as m:
        middle = snapshots[500]
        assert np.frombuffer((m.path / f"@{middle}" / "n.bin").read_bytes(), "<i8")[0] == \
            int(repo.lookup_snapshot(middle).message)

