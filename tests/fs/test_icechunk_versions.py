"""The version directories of an Icechunk mount without FUSE (fs/versions.py): what each version's
file system holds, and what letting one go gives back."""

import os
import sys

import numpy as np
import pytest

pytestmark = [pytest.mark.needs_python312,
              pytest.mark.skipif(sys.version_info < (3, 12), reason="needs Python >= 3.12 (icechunk 2)")]

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
