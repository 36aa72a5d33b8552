"""Icechunk repositories (stores/icechunk_repository.py, stores/icechunk_store.py, fs/versions.py):
repositories written by icechunk-python itself, mounted, every version directory compared with
icechunk's own read of that snapshot."""

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import delete_array, small_icechunk_repository
from mounting import ZARRFS, failed_start, mounted, wait_for
from zarrfs.cli.command import READ_AHEAD_KB

pytestmark = pytest.mark.needs_python312  # skipped on 3.11, saying so (tests/conftest.py)

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


def s3_repository(seaweed, name: str):
    """A new repository on SeaweedFS under a prefix of its own: (prefix, repository)."""
    from servers.seaweed import BUCKET, USERS, unique_prefix

    prefix = unique_prefix(name)
    key, secret, _ = USERS["admin"]
    storage = icechunk.s3_storage(bucket=BUCKET, prefix=prefix, endpoint_url=seaweed.endpoint, allow_http=True,
                                  force_path_style=True, region="us-east-1", access_key_id=key,
                                  secret_access_key=secret)
    return prefix, icechunk.Repository.create(storage)


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
        names = (m.path / "@versions").read_text().split()
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
    with mounted(path, tmp_path) as m:  # a branch mounted writable: its versions stay read-only
        assert not [name for name in os.listdir(m.path) if name.startswith("@")]  # @versions neither
        assert "@tag.v3" in (m.path / "@versions").read_text().split()
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
    try:
        counting = core.main.store._store = CountingSessionStore(core.main.store._store)
        fh = core.open("/a.bin", os.O_RDONLY)
        counting.gets.clear()
        row, column = 57, 33
        data = core.read(fh, (row * 100 + column) * 4, 4)
        assert np.frombuffer(data, "<f4")[0] == row * 100 + column
        assert [key for key, _ in counting.gets] == ["a/c/5/3"]
    finally:
        core.stop()  # its repository's loop, thread and watch let go


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
    with contextlib.closing(open_repository(str(path), str(path), 30.0)) as repository:
        versions = repository.versions()
    elapsed = time.perf_counter() - started
    print(f"\nlisting the versions of a repository of 1,000 commits took {elapsed:.3f} s", file=sys.stderr)
    return path, repo, versions


def test_the_versions_of_a_long_history_are_every_snapshot(long_history, tmp_path):
    path, repo, versions = long_history
    snapshots = [info.id for info in repo.ancestry(branch="main")]
    assert len(snapshots) == 1001  # the repository's first, empty snapshot too
    assert set(versions) == {"@branch.main", *(f"@{s}" for s in snapshots)}
    with mounted(path, tmp_path, "ro") as m:
        listed = subprocess.run(["cat", m.path / "@versions"], capture_output=True, text=True, check=True).stdout
        assert listed.split() == list(versions)  # a file: an xattr would hold at most 64 KiB, ~3,000 names
        middle = snapshots[500]
        assert np.frombuffer((m.path / f"@{middle}" / "n.bin").read_bytes(), "<i8")[0] == \
            int(repo.lookup_snapshot(middle).message)



# writes on a branch, and commits


def write_elements(path, model: np.ndarray, at: list[tuple[int, int]], value: int) -> None:
    """Write `value` at the elements `at` of the array file `path` and into `model`, then fsync."""
    fd = os.open(path, os.O_RDWR)
    try:
        for row, column in at:
            os.pwrite(fd, np.array([value], "<i4").tobytes(), (row * model.shape[1] + column) * 4)
            model[row, column] = value
        os.fsync(fd)
    finally:
        os.close(fd)


def head(repo, branch="main"):
    return repo.lookup_snapshot(repo.lookup_branch(branch))


def read_a(repo, branch="main") -> np.ndarray:
    return zarr.open_array(repo.readonly_session(branch).store, path="a", mode="r")[...]


@pytest.mark.parametrize("how", ["setfattr", "zarrfs commit"])
def test_a_commit_through_the_mount_is_one_snapshot_with_its_parent_and_message(tmp_path, how):
    repo, first = small_icechunk_repository(tmp_path / "repo")
    model = read_a(repo)
    rng = np.random.default_rng(38)
    with mounted(tmp_path / "repo", tmp_path) as m:
        write_elements(m.path / "a.bin", model, [tuple(p) for p in rng.integers(0, (40, 30), (20, 2))], 4242)
        assert head(repo).id == first  # written into the session: no commit yet
        if how == "setfattr":
            subprocess.run(["setfattr", "-n", "user.icechunk.commit", "-v", "through the mount", m.path], check=True)
        else:
            said = subprocess.run([ZARRFS, "commit", m.path, "-m", "through the mount"], capture_output=True,
                                  text=True, check=True)
            assert said.stdout.strip() == head(repo).id
        assert os.getxattr(m.path, "user.icechunk.snapshot").decode() == head(repo).id
        assert os.getxattr(m.path, "user.icechunk.parent").decode() == first
    assert [info.message for info in repo.ancestry(branch="main")] == ["through the mount", "a",
                                                                     "Repository initialized"]
    assert head(repo).parent_id == first
    np.testing.assert_array_equal(read_a(repo), model)


def test_writes_are_committed_at_unmount_only_when_asked(tmp_path):
    repo, first = small_icechunk_repository(tmp_path / "repo")
    model = read_a(repo)
    with mounted(tmp_path / "repo", tmp_path, name="plain") as m:
        write_elements(m.path / "a.bin", model.copy(), [(0, 0), (39, 29)], -5)
    assert head(repo).id == first  # fsynced, not committed (kept in plain.recovery for the next mount)
    with mounted(tmp_path / "repo", tmp_path, "commit_on_unmount=at the end", name="committing") as m:
        write_elements(m.path / "a.bin", model, [(0, 0), (39, 29)], -6)
    assert head(repo).message == "at the end" and head(repo).parent_id == first
    np.testing.assert_array_equal(read_a(repo), model)


def test_two_mounts_of_one_branch_commit_what_does_not_conflict_and_lose_nothing_that_does(tmp_path):
    repo, first = small_icechunk_repository(tmp_path / "repo")
    base = read_a(repo)
    with mounted(tmp_path / "repo", tmp_path, name="one") as one, mounted(tmp_path / "repo", tmp_path, name="two") as two:
        ours, theirs = base.copy(), base.copy()
        write_elements(one.path / "a.bin", ours, [(0, 0)], 1)  # chunk 0/0
        write_elements(two.path / "a.bin", theirs, [(39, 29)], 2)  # chunk 3/2
        os.setxattr(one.path, "user.icechunk.commit", b"one")
        os.setxattr(two.path, "user.icechunk.commit", b"two")  # rebased over one's
        assert [info.message for info in repo.ancestry(branch="main")][:2] == ["two", "one"]
        expected = base.copy()
        expected[0, 0], expected[39, 29] = 1, 2
        np.testing.assert_array_equal(read_a(repo), expected)

        write_elements(one.path / "a.bin", ours, [(5, 5)], 3)  # both write chunk 0/0
        write_elements(two.path / "a.bin", theirs, [(6, 6)], 4)
        os.setxattr(one.path, "user.icechunk.commit", b"one again")
        with pytest.raises(OSError) as refused:
            os.setxattr(two.path, "user.icechunk.commit", b"two again")
        assert refused.value.errno == errno.EBUSY
        kept = [b for b in repo.list_branches() if b.startswith("main.conflict-")]
        assert len(kept) == 1
        lines = [line for line in two.settled_log().splitlines() if "commit refused" in line]
        assert len(lines) == 1 and kept[0] in lines[0]
        expected[5, 5] = 3
        np.testing.assert_array_equal(read_a(repo), expected)  # one's commit stands
        np.testing.assert_array_equal(read_a(repo, kept[0])[6, 6], 4)  # two's write is kept on its branch
        assert (two.path / "a.bin").read_bytes() == read_a(repo, kept[0]).tobytes()
        write_elements(two.path / "a.bin", theirs, [(7, 7)], 5)  # the mount now writes that branch
        os.setxattr(two.path, "user.icechunk.commit", b"on the kept branch")
        assert head(repo, kept[0]).message == "on the kept branch"
        assert head(repo).message == "one again"


def test_a_branchs_directory_follows_the_branch_within_metadata_ttl(tmp_path):
    """A branch's directory shows a newer head once metadata_ttl has passed (its files' pages
    of the old head are not shown); a file opened in the old head still reads (the kernel's
    pages of that path are one cache: of either head)."""
    repo, first = small_icechunk_repository(tmp_path / "repo")
    repo.create_branch("dev", first)
    with mounted(tmp_path / "repo", tmp_path, "ro", "metadata_ttl=1") as m:
        before = (m.path / "@branch.dev" / "a.bin").read_bytes()
        assert before == read_a(repo, "dev").tobytes()
        fd = os.open(m.path / "@branch.dev" / "a.bin", os.O_RDONLY)
        try:
            later = commit(repo, "dev", "dev moves on", write_a(np.full((40, 30), 5, "<i4")))
            wait_for(lambda: os.getxattr(m.path / "@branch.dev", "user.icechunk.snapshot").decode() == later,
                     what="the branch's new head")
            after = np.full((40, 30), 5, "<i4").tobytes()
            assert (m.path / "@branch.dev" / "a.bin").read_bytes() == after
            assert os.getxattr(m.path / "@branch.dev", "user.icechunk.message") == b"dev moves on"
            assert os.pread(fd, len(before), 0) in (before, after)
        finally:
            os.close(fd)
        assert (m.path / f"@{first}" / "a.bin").read_bytes() == before


def test_a_tag_mounted_writable_is_one_line(repository, tmp_path):
    path, _, _ = repository
    said = failed_start(path, ["tag=v1"], None, tmp_path)
    assert "@tag.v1" in said and "-o ro" in said


def test_new_groups_and_arrays_deletes_and_attribute_edits_are_committed(tmp_path):
    import io

    repo, first = small_icechunk_repository(tmp_path / "repo")
    session = repo.writable_session("main")
    zarr.open_group(session.store, mode="a").create_array("b", shape=(4,), dtype="<i2", fill_value=3)
    session.commit("b")
    with mounted(tmp_path / "repo", tmp_path) as m:
        delete_array(m.path, "b")  # as rm b.*: an array goes with the last of its files
        os.setxattr(m.path / "a.bin", "user.zarr.attr.units", b'"K"')
        os.mkdir(m.path / "g")
        npy = io.BytesIO()
        new = np.arange(3000, dtype="<i2").reshape(30, 100)
        np.save(npy, new)
        (m.path / "g" / "new.npy").write_bytes(npy.getvalue())  # a new array with data
        assert (m.path / "g" / "new.bin").read_bytes() == new.tobytes()
        assert list((tmp_path / "mnt.recovery").glob("zarrfs-staged-*"))  # where its chunks waited for it
        os.setxattr(m.path, "user.icechunk.commit", b"edits")
    group = zarr.open_group(repo.readonly_session("main").store, mode="r")
    assert sorted(group.keys()) == ["a", "g"] and group["a"].attrs["units"] == "K"
    assert isinstance(group["g"], zarr.Group) and list(group["g"].keys()) == ["new"]
    np.testing.assert_array_equal(group["g"]["new"][...], new)
    assert head(repo).message == "edits"
    assert not list((tmp_path / "mnt.recovery").glob("zarrfs-staged-*"))  # gone at unmount


def test_a_move_commits_the_writes_before_it_then_itself(tmp_path):
    """icechunk moves nodes only in a rearrange session committed alone: `mv` of an array or a
    group is a snapshot of its own, after one of the writes not committed before it."""
    repo, first = small_icechunk_repository(tmp_path / "repo")
    session = repo.writable_session("main")
    group = zarr.open_group(session.store, mode="a").create_group("g")
    group.create_array("inner", shape=(3,), dtype="<u1", fill_value=0)[...] = [7, 8, 9]
    before = session.commit("g")
    model = read_a(repo)
    with mounted(tmp_path / "repo", tmp_path) as m:
        write_elements(m.path / "a.bin", model, [(2, 3)], 77)
        os.rename(m.path / "a.bin", m.path / "c.bin")
        names = os.listdir(m.path)
        assert {"c.bin", "c.json", "g"} <= set(names) and not [n for n in names if n.startswith("a.")]
        assert (m.path / "c.bin").read_bytes() == model.tobytes()
        os.rename(m.path / "g", m.path / "h")  # a group and what is in it
        assert (m.path / "h" / "inner.bin").read_bytes() == bytes([7, 8, 9])
        assert os.getxattr(m.path, "user.icechunk.snapshot").decode() == head(repo).id
    history = [info.message for info in repo.ancestry(branch="main")]
    assert history[:4] == ["zarrfs: moved /g to /h", "zarrfs: moved /a to /c", "zarrfs: the writes before moving /a to /c",
                           "g"]
    assert repo.lookup_snapshot(history_id(repo, 2)).parent_id == before
    group = zarr.open_group(repo.readonly_session("main").store, mode="r")
    assert sorted(group.keys()) == ["c", "h"] and list(group["h"].keys()) == ["inner"]
    np.testing.assert_array_equal(group["c"][...], model)


def history_id(repo, back: int) -> str:
    """The id of the snapshot `back` commits behind main's head."""
    return [info.id for info in repo.ancestry(branch="main")][back]


def test_a_repository_on_s3_mounts_with_its_versions_and_takes_commits(seaweed, tmp_path):

    prefix, repo = s3_repository(seaweed, "icechunk")
    session = repo.writable_session("main")
    zarr.group(session.store).create_array("a", shape=(20, 20), chunks=(10, 10), dtype="<i4", fill_value=0)[...] = 1
    first = session.commit("ones")
    second = commit(repo, "main", "twos", write_a(np.full((20, 20), 2, "<i4")))
    options = seaweed.mount_options("icechunk")
    with mounted(seaweed.url(prefix), tmp_path, *options, env=seaweed.env()) as m:
        # libfuse's init ran whole (it raises the kernel's read-ahead last): a remote store that
        # trusts its metadata for the whole mount (metadata_ttl None) made it fail half-way
        device = os.stat(m.path).st_dev
        read_ahead = f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb"
        wait_for(lambda: int(open(read_ahead).read()) == READ_AHEAD_KB, what="the raised read-ahead")
        assert "Uncaught exception" not in m.log()
        assert (m.path / f"@{first}" / "a.bin").read_bytes() == icechunk_bytes(repo, first, "a")
        assert (m.path / "a.bin").read_bytes() == icechunk_bytes(repo, second, "a")
        model = read_a(repo)
        write_elements(m.path / "a.bin", model, [(3, 4), (19, 0)], 9)
        subprocess.run([ZARRFS, "commit", m.path, "-m", "through S3"], check=True, capture_output=True)
    assert head(repo).message == "through S3" and head(repo).parent_id == second
    np.testing.assert_array_equal(read_a(repo), model)


def test_fsynced_writes_survive_a_crash_and_the_next_mount_commits_them(tmp_path):
    repo, first = small_icechunk_repository(tmp_path / "repo")
    model = read_a(repo)
    with mounted(tmp_path / "repo", tmp_path) as m:
        write_elements(m.path / "a.bin", model, [(1, 2), (22, 13)], 31)  # fsynced: in the session, saved
        m.process.send_signal(signal.SIGKILL)
        m.process.wait()
    assert head(repo).id == first  # nothing committed
    with mounted(tmp_path / "repo", tmp_path) as m:  # the same recovery_dir
        assert (m.path / "a.bin").read_bytes() == model.tobytes()
        assert "took back the writes" in m.log()
        os.setxattr(m.path, "user.icechunk.commit", b"after the crash")
    assert head(repo).message == "after the crash" and head(repo).parent_id == first
    np.testing.assert_array_equal(read_a(repo), model)
    assert not list((tmp_path / "mnt.recovery").glob("icechunk-*"))  # committed: nothing left to take back


def test_a_killed_mounts_chunks_of_a_node_being_made_are_removed_at_the_next_mount(tmp_path):
    """A new array's chunks are kept in a directory of this machine until its node is committed
    (icechunk_store.py): one a daemon killed -9 left is removed by the next mount of that place,
    and a live mount's never is."""
    repo, first = small_icechunk_repository(tmp_path / "repo")
    repo.create_branch("dev", first)
    np.save(tmp_path / "n.npy", np.arange(64, dtype="<u1"))
    recovery = tmp_path / "mnt.recovery"
    with mounted(tmp_path / "repo", tmp_path) as m:
        subprocess.run(["cp", str(tmp_path / "n.npy"), str(m.path)], check=True)  # a node made: chunks kept first
        left = [p for p in recovery.iterdir() if p.is_dir()]
        assert left, list(recovery.iterdir())
        m.process.send_signal(signal.SIGKILL)
        m.process.wait()
    with mounted(tmp_path / "repo", tmp_path) as m:  # the same recovery_dir
        assert not [p for p in left if p.exists()], left
        assert "removed 1 temporary" in m.log()
        subprocess.run(["cp", str(tmp_path / "n.npy"), str(m.path / "o.npy")], check=True)
        live = [p for p in recovery.iterdir() if p.is_dir()]
        with mounted(tmp_path / "repo", tmp_path, "branch=dev", f"recovery_dir={recovery}", name="dev") as other:
            assert "temporary" not in other.log()
            assert all(p.exists() for p in live), live
        assert (m.path / "o.bin").read_bytes() == np.arange(64, dtype="<u1").tobytes()


class InFlightSessionStore:
    """icechunk's session store, each get held 20 ms (a round trip): how many were under way at once."""

    def __init__(self, store):
        self._store, self.now, self.most = store, 0, 0

    async def get(self, key, prototype, byte_range=None):
        import asyncio

        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.02)
            return await self._store.get(key, prototype, byte_range)
        finally:
            self.now -= 1

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_a_stream_from_a_remote_repository_fetches_ahead_with_few_requests_at_once(seaweed, tmp_path, monkeypatch):
    """icechunk multiplexes its own requests: a stream is fetched ahead by STREAM_FETCHERS
    threads, not by the file system's many for an object store (more streamed slower)."""
    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import mount_core
    from zarrfs.stores.icechunk_repository import IcechunkChoice
    from zarrfs.stores.icechunk_store import STREAM_FETCHERS
    from zarrfs.stores.source_url import RemoteOptions

    prefix, repo = s3_repository(seaweed, "icechunk-stream")
    session = repo.writable_session("main")
    values = np.arange(48 * 65536, dtype="<f4")  # 48 chunks of 256 KiB
    zarr.group(session.store).create_array("a", shape=values.shape, chunks=(65536,), dtype="<f4",
                                           compressors=[zarr.codecs.ZstdCodec()])[...] = values
    session.commit("a")
    for name, value in seaweed.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    options = Options(read_only=True, remote=RemoteOptions(endpoint=seaweed.endpoint),
                      icechunk=IcechunkChoice(forced=True))
    core = mount_core(seaweed.url(prefix), options, HierarchyEdits)
    core.start()
    try:
        watched = core.main.store._store = InFlightSessionStore(core.main.store._store)
        fh = core.open("/a.bin", os.O_RDONLY)
        streamed = b"".join(core.read(fh, offset, 1 << 20) for offset in range(0, values.nbytes, 1 << 20))
        assert streamed == values.tobytes()
        assert 2 <= watched.most <= STREAM_FETCHERS + 1  # ahead of the stream a few at once, and the reader's own
    finally:
        core.stop()


def test_a_repository_that_stops_answering_is_an_error_within_the_timeout(seaweed, tmp_path):
    """Every call into icechunk is waited for at most -o timeout: a hung server makes a lookup fail
    with one line, never a hung request (the daemon goes on serving when the server is back)."""

    prefix, repo = s3_repository(seaweed, "icechunk-hung")
    session = repo.writable_session("main")
    zarr.group(session.store).create_array("a", shape=(8,), dtype="<i4", fill_value=3)
    first = session.commit("a")
    second = commit(repo, "main", "b", lambda group: group.create_array("b", shape=(2,), dtype="<i4", fill_value=0))
    with mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options("icechunk", "ro", "timeout=2"),
                 env=seaweed.env()) as m:
        assert (m.path / "b.json").exists()
        with seaweed.paused():
            with pytest.raises(OSError):
                os.listdir(m.path / f"@{first}")  # a snapshot not looked up yet: icechunk asks the server
        said = [line for line in m.settled_log().splitlines() if "no answer within 2 s" in line]
        assert len(said) == 1 and first in said[0]
        assert "a.bin" in os.listdir(m.path / f"@{first}")  # the server is back: the same lookup works
        assert (m.path / f"@{first}" / "a.bin").read_bytes() == np.full(8, 3, "<i4").tobytes()
        assert second == os.getxattr(m.path, "user.icechunk.snapshot").decode()


def test_virtual_chunks_are_read_from_containers_within_the_repository_and_refused_outside(tmp_path):
    """Virtual chunks (references into other files) follow the symlinks' containment: a file://
    container inside the repository's directory is read, one outside is refused with one line."""
    from icechunk.credentials import LocalFileSystemAccess

    path, outside = tmp_path / "repo", tmp_path / "outside"
    inner, outer = f"file://{path}/raw/", f"file://{outside}/"
    config = icechunk.RepositoryConfig.default()
    for prefix in (inner, outer):
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(
            prefix[len("file://"):])))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)), config=config,
                                      authorize_virtual_chunk_access={inner: LocalFileSystemAccess,
                                                                      outer: LocalFileSystemAccess})
    (path / "raw").mkdir()  # beside icechunk's own objects (a repository is made in an empty place)
    outside.mkdir()
    values = np.arange(16, dtype="<i4") * 3
    values.tofile(path / "raw" / "in.bin")
    (values + 1).tofile(outside / "out.bin")
    session = repo.writable_session("main")
    group = zarr.group(session.store)
    for name, location in (("inside", f"{inner}in.bin"), ("outside", f"{outer}out.bin")):
        group.create_array(name, shape=(16,), chunks=(8,), dtype="<i4", fill_value=0, compressors=None)
        for chunk in (0, 1):
            session.store.set_virtual_ref(f"{name}/c/{chunk}", location, offset=chunk * 32, length=32)
    session.commit("virtual")
    with mounted(path, tmp_path, "ro") as m:
        assert (m.path / "inside.bin").read_bytes() == values.tobytes()
        with pytest.raises(OSError) as refused:
            (m.path / "outside.bin").read_bytes()
        assert refused.value.errno == errno.EIO
        log = m.settled_log()
        assert len([line for line in log.splitlines() if outer in line and "outside the repository" in line]) == 1
        refusals = [line for line in log.splitlines() if "read_buf /outside.bin" in line]
        assert refusals and all("outside/c/0: a virtual chunk" in line for line in refusals)  # the kernel may ask twice
    with mounted(path, tmp_path, "ro", "symlinks=follow", name="trusted") as m:
        assert (m.path / "outside.bin").read_bytes() == (values + 1).tobytes()
