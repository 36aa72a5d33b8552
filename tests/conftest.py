import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import subprocess  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB file system of the test's own, to fill up; always unmounted."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    """One real S3-compatible server (SeaweedFS) for the session; tests use unique prefixes."""
    from zarrfs.testing.seaweed import Seaweed

    server = Seaweed(tmp_path_factory.mktemp("seaweed"))
    try:
        server.start()
        yield server
    finally:
        server.stop()
