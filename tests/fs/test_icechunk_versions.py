"""The version directories of an Icechunk mount without FUSE (fs/versions.py): what each version's
file system holds, and what letting one go gives back; a commit's refusals."""

import os
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.needs_python312  # skipped on 3.11, saying so (tests/conftest.py)

if sys.version_info >= (3, 12):
    import icechunk
    import zarr


def history(path, commits: int) -> list[str]:
    """main: `commits` snapshots of a 1-D float32 array of 4 MiB in 64 KiB chunks; their ids, oldest first."""
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    ids = []
    for i in range(commits):
        session = repo.writable_session("main")
        group = zarr.group(session.store) if i == 0 else zarr.open_group(session.store, mode="a")
        array = group.create_array("a", shape=(1 << 20,), chunks=(1 << 14,), dtype="<f4") if i == 0 else group["a"]
        array[...] = np.arange(1 << 20, dtype="<f4") + i
        ids.append(session.commit(str(i)))
    return ids


def test_a_version_let_go_frees_its_chunks_decoded_ahead_and_their_threads(tmp_path):
    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import KEPT, mount_core

    ids = history(tmp_path / "repo", KEPT + 2)
    core = mount_core(str(tmp_path / "repo"), Options(read_only=True), HierarchyEdits)
    first = f"/@{ids[0]}/a.bin"
    fh = core.open(first, os.O_RDONLY)
    for offset in range(0, 4 << 16, 1 << 16):  # a stream's start: the chunks after it are decoded ahead
        assert core.read(fh, offset, 1 << 16) == (np.arange(offset // 4, offset // 4 + (1 << 14), dtype="<f4")).tobytes()
    core.release(fh)
    shown = core._shown[f"@{ids[0]}"]
    ahead = shown.core.cache.ahead
    assert ahead.max_bytes <= Options().ahead_bytes // KEPT  # each version within its share, like the cache
    ahead.settle(30)
    assert ahead.nbytes > 0  # decoded, not taken
    for snapshot in ids[1:]:  # KEPT more versions looked up: the first, least recent, is let go
        core.getattr(f"/@{snapshot}/a.bin")
    assert f"@{ids[0]}" not in core._shown
    assert ahead.nbytes == 0 and ahead.closed


def test_stopping_the_mount_stops_every_versions_file_system(tmp_path):
    """At unmount (the core's stop) every version's file system stops, one with a file still open
    included: its chunks decoded ahead are freed and its threads go. Only the mount's own file
    system was stopped, and a version's decode-ahead threads and buffers outlived the core."""
    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import mount_core

    ids = history(tmp_path / "repo", 2)
    core = mount_core(str(tmp_path / "repo"), Options(read_only=True), HierarchyEdits)
    core.start()
    held = core.open(f"/@{ids[0]}/a.bin", os.O_RDONLY)  # open still when the mount stops
    for offset in range(0, 4 << 16, 1 << 16):  # a stream's start: the chunks after it are decoded ahead
        assert core.read(held, offset, 1 << 16) == np.arange(offset // 4, offset // 4 + (1 << 14), dtype="<f4").tobytes()
    core.getattr(f"/@{ids[1]}/a.bin")  # looked up, no file open
    aheads = [core._shown[f"@{snapshot}"].core.cache.ahead for snapshot in ids]
    aheads[0].settle(30)
    assert aheads[0].nbytes > 0  # decoded, not taken
    core.stop()
    assert [(ahead.closed, ahead.nbytes) for ahead in aheads] == [(True, 0), (True, 0)]
    core.release(held)  # a file closed after the stop: nothing left to stop, nothing fails


def test_a_file_opened_as_its_branch_moves_on_opens_in_the_new_head(tmp_path):
    """A branch's head moves on between an open's lookup of @branch.main and the open itself,
    and another lookup replaces the older head, with no file open, meanwhile: the open is made in
    the new head. It was made in the older head's file system, stopped by then (its chunks
    decoded ahead gone, its file released later stopping it once more), and read the old values."""
    from dataclasses import replace

    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import mount_core

    history(tmp_path / "repo", 1)
    options = Options(read_only=True)
    core = mount_core(str(tmp_path / "repo"), replace(options, remote=replace(options.remote, metadata_ttl=0)),
                      HierarchyEdits)  # every lookup asks for the branch's head
    path = "/@branch.main/a.bin"
    core.getattr(path)
    older = core._shown["@branch.main"]
    opening = older.core.open

    def open_as_the_branch_moves(inner, flags):
        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
        session = repo.writable_session("main")
        zarr.open_array(session.store, path="a", mode="a")[...] = np.arange(1 << 20, dtype="<f4") + 100
        session.commit("moved on")
        core.getattr(path)  # another lookup: the new head replaces the older one
        return opening(inner, flags)

    older.core.open = open_as_the_branch_moves
    fh = core.open(path, os.O_RDONLY)
    try:
        assert core._shown["@branch.main"] is not older
        assert core.read(fh, 0, 1 << 16) == (np.arange(1 << 14, dtype="<f4") + 100).tobytes()
    finally:
        core.release(fh)
        core.stop()


@pytest.mark.parametrize("read_only", [False, True])
def test_a_commit_needs_a_message_and_a_branch_mounted_writable(tmp_path, read_only):
    import errno

    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.errors import ZarrfsError
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import mount_core

    ids = history(tmp_path / "repo", 1)
    core = mount_core(str(tmp_path / "repo"), Options(read_only=read_only, recovery_dir=str(tmp_path / "recovery")),
                      HierarchyEdits)
    try:
        for message in ("", "  \n"):
            with pytest.raises(ZarrfsError) as refused:
                core.commit(message)
            assert refused.value.errno == (errno.EROFS if read_only else errno.EINVAL)
        if read_only:
            with pytest.raises(ZarrfsError) as refused:
                core.setxattr("/", "user.icechunk.commit", b"a message", 0)  # setfattr on a read-only mount
            assert refused.value.errno == errno.EROFS
        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
        assert repo.lookup_branch("main") == ids[-1]  # nothing committed
    finally:
        core.stop()


def test_a_branch_whose_head_cannot_be_looked_up_again_is_shown_as_it_was(tmp_path, caplog):
    """A branch's head asked again (after metadata_ttl) and not found out (the repository's
    refs unreadable now): its directory shows the head it had, in one line saying so; a
    branch never shown has no head to fall back on, and its lookup fails."""
    import errno
    from dataclasses import replace

    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.errors import ZarrfsError
    from zarrfs.fs.filesystem import Options
    from zarrfs.fs.versions import mount_core

    ids = history(tmp_path / "repo", 1)
    options = Options(read_only=True)
    core = mount_core(str(tmp_path / "repo"), replace(options, remote=replace(options.remote, metadata_ttl=0)),
                      HierarchyEdits)  # every lookup asks for the branch's head
    path = "/@branch.main/a.bin"
    try:
        before = core.getattr(path)
        shown = core._shown["@branch.main"]
        (tmp_path / "repo" / "repo").write_bytes(b"not a repository file")  # its branches unreadable
        caplog.clear()
        assert core.getattr(path) == before
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "@branch.main" in said[0] and ids[0] in said[0], said
        assert core._shown["@branch.main"] is shown
        fh = core.open(path, os.O_RDONLY)
        assert core.read(fh, 0, 16) == np.arange(4, dtype="<f4").tobytes()
        core.release(fh)
        with pytest.raises(ZarrfsError) as failed:
            core.getattr("/@branch.other/a.bin")
        assert failed.value.errno == errno.EIO
    finally:
        core.stop()


def test_a_file_whose_branch_moves_on_at_every_open_is_refused_stale(tmp_path, monkeypatch):
    """A branch whose head is replaced between each lookup and its open, OPEN_TRIES times: the
    open is refused (ESTALE), and no file is left open in any head."""
    import errno
    from dataclasses import replace

    from zarrfs.edits.hierarchy_edits import HierarchyEdits
    from zarrfs.errors import ZarrfsError
    from zarrfs.fs.filesystem import FileSystem, Options
    from zarrfs.fs.versions import OPEN_TRIES, mount_core

    history(tmp_path / "repo", 1)
    options = Options(read_only=True)
    core = mount_core(str(tmp_path / "repo"), replace(options, remote=replace(options.remote, metadata_ttl=0)),
                      HierarchyEdits)  # every lookup asks for the branch's head
    path = "/@branch.main/a.bin"
    opening, heads = FileSystem.open, []

    def open_as_the_branch_moves(fs, inner, flags):
        if fs is not core.main:
            repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
            session = repo.writable_session("main")
            zarr.open_array(session.store, path="a", mode="a")[:4] = len(heads) + 100
            heads.append(session.commit("moved on"))
            core.getattr(path)  # another lookup: the new head replaces the one being opened
        return opening(fs, inner, flags)

    try:
        core.getattr(path)
        with monkeypatch.context() as patch:
            patch.setattr(FileSystem, "open", open_as_the_branch_moves)
            with pytest.raises(ZarrfsError) as refused:
                core.open(path, os.O_RDONLY)
        assert refused.value.errno == errno.ESTALE and len(heads) == OPEN_TRIES
        assert not core._handles and all(shown.handles == 0 for shown in core._shown.values())
        fh = core.open(path, os.O_RDONLY)  # the branch stands still: opened in its last head
        assert core.read(fh, 0, 16) == np.full(4, OPEN_TRIES + 99, dtype="<f4").tobytes()
        core.release(fh)
    finally:
        core.stop()
