"""A local Icechunk repository held to the containment of symlinks (stores/icechunk_contained.py,
stores/icechunk_repository.py): icechunk's local storage opens whatever a symlink leads to."""

import errno
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from leftovers import descriptors
from zarrfs.errors import StoreError

pytestmark = pytest.mark.needs_python312  # skipped on 3.11, saying so (tests/conftest.py)

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


def repository_with_a_linked_chunk(tmp_path, target=None):
    """A repository of `a` (4096 uint8, one chunk, uncompressed: smaller ones icechunk keeps in its manifest) whose chunk object is a symlink:
    to its own bytes moved outside, or to `target`. Returns (path, the symlink)."""
    path = tmp_path / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    zarr.group(session.store).create_array("a", shape=(4096,), dtype="<u1", fill_value=0,
                                           compressors=None)[...] = np.arange(4096, dtype="<u1")
    session.commit("a")
    [chunk] = list((path / "chunks").iterdir())
    outside = tmp_path / "outside"
    shutil.move(chunk, outside)
    os.symlink(target or outside, chunk)
    return path, chunk


def test_a_symlink_among_the_objects_refuses_the_repository_unless_followed(tmp_path, closed_after):
    from zarrfs.stores.icechunk_repository import open_repository

    path, link = repository_with_a_linked_chunk(tmp_path)
    with pytest.raises(StoreError) as refused:
        open_repository(str(path), str(path), 30.0)
    assert refused.value.errno == errno.EACCES
    assert str(link) in str(refused.value) and "symlinks=follow" in str(refused.value)
    repository = closed_after(open_repository(str(path), str(path), 30.0, follow_symlinks=True))  # a trusted repository
    store = repository.store(repository.version("@branch.main"))
    assert store.get("a/c/0") == np.arange(4096, dtype="<u1").tobytes()


def test_a_symlink_into_dev_is_refused_even_followed(tmp_path):
    from zarrfs.stores.icechunk_repository import open_repository

    path, link = repository_with_a_linked_chunk(tmp_path, "/dev/zero")
    with pytest.raises(StoreError) as refused:
        open_repository(str(path), str(path), 30.0, follow_symlinks=True)
    assert refused.value.errno == errno.EACCES and "/dev" in str(refused.value)


def test_a_symlink_made_after_the_repository_was_opened_is_not_followed(tmp_path, closed_after, caplog):
    """icechunk opens its objects by name: a symlink planted among them once the mount has
    walked them (a chunk object replaced, or a new directory holding one) is refused as one found
    at open is, while it is there; the value it hides is read again once it is gone."""
    from zarrfs.stores.icechunk_repository import open_repository

    path, chunk = repository_with_a_linked_chunk(tmp_path)
    outside = tmp_path / "outside"
    os.unlink(chunk)
    shutil.move(outside, chunk)  # a repository with no symlink: opened
    (tmp_path / "secret").write_bytes(bytes(4096))
    repository = closed_after(open_repository(str(path), str(path), 30.0))
    store = repository.store(repository.version("@branch.main"))
    assert store.get("a/zarr.json") is not None
    shutil.move(chunk, outside)
    os.symlink(tmp_path / "secret", chunk)  # planted after the walk
    for _ in range(2):  # and at every call while it is there
        with pytest.raises(StoreError) as refused:
            store.get("a/c/0")
        assert refused.value.errno == errno.EACCES and str(chunk) in str(refused.value)
    os.unlink(chunk)
    shutil.move(outside, chunk)
    assert store.get("a/c/0") == np.arange(4096, dtype="<u1").tobytes()
    (path / "chunks" / "more").mkdir()  # a directory made later is watched too
    os.symlink(tmp_path / "secret", path / "chunks" / "more" / "x")
    with pytest.raises(StoreError) as refused:
        store.get("a/c/0")
    assert str(path / "chunks" / "more" / "x") in str(refused.value)


def test_an_object_directory_replaced_by_a_symlink_after_open_is_refused(tmp_path, closed_after):
    """The repository's own directory is watched too, when SOURCE is a symlink to it: one of its
    object directories replaced by a symlink to elsewhere refuses the calls that follow."""
    from zarrfs.stores.icechunk_repository import open_repository

    path, chunk = repository_with_a_linked_chunk(tmp_path)
    os.unlink(chunk)
    shutil.move(tmp_path / "outside", chunk)
    source = tmp_path / "source"
    os.symlink(path, source)
    repository = closed_after(open_repository(str(source), str(source), 30.0))
    store = repository.store(repository.version("@branch.main"))
    assert store.get("a/c/0") == np.arange(4096, dtype="<u1").tobytes()
    os.rename(path / "chunks", tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", path / "chunks")
    with pytest.raises(StoreError) as refused:
        store.get("a/c/0")
    assert refused.value.errno == errno.EACCES and str(source / "chunks") in str(refused.value)


def test_a_symlink_into_dev_made_after_open_is_refused_even_followed(tmp_path, closed_after):
    from zarrfs.stores.icechunk_repository import open_repository

    path, chunk = repository_with_a_linked_chunk(tmp_path)
    repository = closed_after(open_repository(str(path), str(path), 30.0, follow_symlinks=True))
    store = repository.store(repository.version("@branch.main"))
    assert store.get("a/c/0") == np.arange(4096, dtype="<u1").tobytes()  # followed: a trusted repository
    os.unlink(chunk)
    os.symlink("/dev/zero", chunk)
    with pytest.raises(StoreError) as refused:
        store.get("a/c/0")
    assert refused.value.errno == errno.EACCES and "/dev" in str(refused.value)


def test_a_virtual_chunk_whose_file_leaves_its_container_is_not_read(tmp_path, closed_after, caplog):
    """A container inside the repository is read; a symlink in it to a file outside is found when
    the version's store is made: one line names it, and that version's virtual chunks are refused."""
    from icechunk.credentials import LocalFileSystemAccess

    from zarrfs.stores.icechunk_repository import open_repository

    path, raw, outside = tmp_path / "repo", tmp_path / "repo" / "raw", tmp_path / "outside"
    container = f"file://{raw}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(container, icechunk.local_filesystem_store(
        str(raw))))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)), config=config,
                                      authorize_virtual_chunk_access={container: LocalFileSystemAccess})
    raw.mkdir()
    outside.mkdir()
    values = np.arange(8, dtype="<i4")
    values.tofile(raw / "in.bin")
    (values + 100).tofile(outside / "secret.bin")
    os.symlink(outside / "secret.bin", raw / "linked.bin")

    def add(name: str, file: str) -> str:
        session = repo.writable_session("main")
        group = zarr.open_group(session.store, mode="a")
        group.create_array(name, shape=(8,), chunks=(8,), dtype="<i4", fill_value=0, compressors=None)
        session.store.set_virtual_ref(f"{name}/c/0", f"{container}{file}", offset=0, length=32)
        return session.commit(name)

    session = repo.writable_session("main")
    zarr.group(session.store)
    session.commit("root")
    first, second = add("inside", "in.bin"), add("linked", "linked.bin")
    repository = closed_after(open_repository(str(path), str(path), 30.0))
    version = repository.version(f"@{first}")
    assert repository.store(version).get("inside/c/0") == values.tobytes()  # nothing outside: read
    caplog.clear()
    store = repository.store(repository.version(f"@{second}"))
    said = [r.getMessage() for r in caplog.records if "outside its container" in r.getMessage()]
    assert len(said) == 1 and f"{container}linked.bin" in said[0]
    for key in ("linked/c/0", "inside/c/0"):
        with pytest.raises(StoreError) as refused:
            store.get(key)
        assert refused.value.errno == errno.EIO and key in str(refused.value)
    assert store.get("linked/zarr.json") is not None  # the documents are read
    trusted = closed_after(open_repository(str(path), str(path), 30.0, follow_symlinks=True))
    assert trusted.store(trusted.version(f"@{second}")).get("linked/c/0") == (values + 100).tobytes()


def objects_of(path, chunks: int):
    """A directory laid out as a local repository's objects, with `chunks` chunk objects."""
    (path / "chunks").mkdir(parents=True)
    for i in range(chunks):
        (path / "chunks" / f"C{i:04d}").write_bytes(b"")
    return path


def test_a_followed_repository_of_more_objects_than_the_bound_is_walked_no_further(tmp_path, monkeypatch, caplog):
    """-o symlinks=follow looks for symlinks into /proc, /sys and /dev among at most MAX_OBJECTS
    objects: past them the walk stops, and one line says so."""
    from zarrfs.stores import icechunk_contained

    monkeypatch.setattr(icechunk_contained, "MAX_OBJECTS", 5)
    path = objects_of(tmp_path / "repo", 20)
    with pytest.raises(StoreError) as refused:
        icechunk_contained.check_objects(str(path), "REPO", follow_symlinks=False)
    assert refused.value.errno == errno.EACCES and "more than 5 objects" in str(refused.value)
    caplog.clear()
    icechunk_contained.check_objects(str(path), "REPO", follow_symlinks=True)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "REPO" in said[0] and "more than 5 objects" in said[0], said


UNLISTABLE = r"""
import os, sys
from zarrfs.errors import StoreError
from zarrfs.stores.icechunk_contained import check_objects
import inotify_simple  # what the walk imports, imported as root: this Python's own library is root's alone
os.setgid(65534)
os.setuid(65534)  # nobody: the directory below is root's alone
try:
    check_objects(sys.argv[1], "REPO", follow_symlinks=sys.argv[2] == "follow")
except StoreError as e:
    print(e.errno, e)
"""


@pytest.mark.parametrize("follow", ["contain", "follow"])
def test_an_object_directory_that_cannot_be_listed_is_one_line(follow):
    """A directory among the objects the mount may not list: one line naming it, not a traceback."""
    from helpers import reachable_directory

    with reachable_directory("zarrfs-unlistable-") as shared:
        path = objects_of(shared / "repo", 2)
        (path / "chunks").chmod(0o700)
        result = subprocess.run([sys.executable, "-c", UNLISTABLE, str(path), follow], capture_output=True,
                                text=True, timeout=60)
    assert result.returncode == 0 and not result.stderr, result.stderr
    code, _, message = result.stdout.partition(" ")
    assert int(code) == errno.EACCES
    assert message.count("\n") == 1 and "REPO" in message and str(path / "chunks") in message, message


OPENED: list[str] = []  # the files Python opened while a test listens (an audit hook cannot be removed)
LISTENING: list[bool] = []


def _opened(event: str, args: tuple) -> None:
    if LISTENING and event == "open" and isinstance(args[0], str):
        OPENED.append(args[0])


def test_the_credentials_file_is_read_once_for_every_s3_container(tmp_path, closed_after, caplog):
    """Each s3:// virtual chunk container is read with the mount's S3 credentials: the file they
    are in is read once for the mount, not once per container, and nothing of it is logged."""
    from zarrfs.stores.source_url import RemoteOptions, open_source

    endpoint, secret = "http://127.0.0.1:9", "s3cr3t-never-logged"
    config = icechunk.RepositoryConfig.default()
    for name in ("one", "two", "three"):
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(f"s3://bucket/{name}/", icechunk.s3_store(
            region="us-east-1", endpoint_url=endpoint, allow_http=True, s3_compatible=True, force_path_style=True)))
    session = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")),
                                         config=config).writable_session("main")
    zarr.group(session.store)
    session.commit("root")
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[default]\naws_access_key_id = AKEY\naws_secret_access_key = {secret}\n")
    credentials.chmod(0o600)
    sys.addaudithook(_opened)
    OPENED.clear()
    LISTENING.append(True)
    try:
        source = open_source(str(tmp_path / "repo"), True, RemoteOptions(endpoint=endpoint,
                                                                         credentials_file=str(credentials)))
        closed_after(source.repository)
    finally:
        LISTENING.clear()
    assert OPENED.count(str(credentials)) == 1, OPENED
    assert source.store.get("zarr.json") is not None
    assert secret not in caplog.text


def instances(kind: str = "anon_inode:inotify") -> int:
    """This process's descriptors that are a `kind` (inotify instances unless told)."""
    return descriptors().count(kind)


def held() -> tuple[int, int, int]:
    """(inotify instances, epoll instances, loop threads) of this process: what a repository
    opened holds (its watch; its asyncio loop's selector and thread, async_loop.py)."""
    loops = sum(thread.name == "icechunk" for thread in threading.enumerate())
    return instances(), instances("anon_inode:[eventpoll]"), loops


def test_a_stopped_mount_and_a_refused_open_let_their_watch_and_loop_go(tmp_path):
    """A user has at most fs.inotify.max_user_instances (128 by default) of them, a process at
    most 1024 descriptors for select(): a process that mounts a local repository in turn (the
    Python API, a test run) must not keep a watch, a loop or its thread per mount, nor per
    repository it failed to open."""
    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import mount_core
    from zarrfs.stores.icechunk_repository import IcechunkChoice, open_repository

    path, chunk = repository_with_a_linked_chunk(tmp_path)
    before = held()
    with pytest.raises(StoreError):  # a symlink among its objects
        open_repository(str(path), str(path), 30.0)
    assert held() == before
    os.unlink(chunk)
    shutil.move(tmp_path / "outside", chunk)
    for read_only in (True, False):
        core = mount_core(str(path), Options(read_only=read_only, recovery_dir=str(tmp_path / "recovery")),
                          HierarchyEdits)
        assert held() == (before[0] + 1, before[1] + 1, before[2] + 1)  # watched and served while mounted
        core.stop()
        assert held() == before
    with pytest.raises(StoreError):  # no such branch
        mount_core(str(path), Options(read_only=True, icechunk=IcechunkChoice(branch="none")), HierarchyEdits)
    assert held() == before
    (path / "repo").write_bytes(b"not a repository file")
    with pytest.raises(StoreError):
        open_repository(str(path), str(path), 30.0)
    assert held() == before
