"""On Python 3.11, where icechunk 2 does not install, zarrfs runs and says in one line why it
cannot mount an Icechunk repository (test_icechunk.py mounts them on 3.12 and later)."""

import os
import sys

import pytest

from mounting import failed_start


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="icechunk installs here: test_icechunk.py mounts repositories")
def test_an_icechunk_repository_on_python_311_is_one_line(tmp_path):
    repository = tmp_path / "repo"  # an Icechunk repository's layout (format 2): the repo object, snapshots/
    (repository / "snapshots").mkdir(parents=True)
    (repository / "repo").write_bytes(b"\0")
    said = failed_start(repository, ["ro"], dict(os.environ), tmp_path)
    assert "icechunk needs Python >= 3.12" in said
