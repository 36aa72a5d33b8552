"""The system's zarrfs link (what mount -t fuse.zarrfs runs) is never moved away from a zarrfs
that works: a test run from a temporary clone once pointed it into the clone, and once the
clone was gone mount(8) failed with "/bin/sh: 1: zarrfs: not found". A dangling one is repaired."""

import os
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[2] / "scripts"


def link_system(target, link, *flags):
    return subprocess.run(["bash", str(SCRIPTS / "link-system"), str(target), str(link), *flags],
                          capture_output=True, text=True, timeout=30, check=True)


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho zarrfs 0.1.0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def places(tmp_path):
    """(this checkout's zarrfs, another checkout's, the link)"""
    return (executable(tmp_path / "clone" / ".venv" / "bin" / "zarrfs"),
            executable(tmp_path / "main" / ".venv" / "bin" / "zarrfs"), tmp_path / "bin" / "zarrfs")


def test_a_link_that_works_is_left_where_it_points(places):
    here, elsewhere, link = places
    link.parent.mkdir()
    link.symlink_to(elsewhere)
    result = link_system(here, link)
    assert os.readlink(link) == str(elsewhere)
    assert "left as it is" in result.stdout and "--link" in result.stdout


def test_a_dangling_link_is_repaired_and_said_so(places, tmp_path):
    here, _, link = places
    link.parent.mkdir()
    link.symlink_to(tmp_path / "removed-clone" / ".venv" / "bin" / "zarrfs")
    result = link_system(here, link)
    assert os.readlink(link) == str(here)
    assert "does not run; repaired" in result.stdout and "removed-clone" in result.stdout


def test_a_missing_link_is_made_and_move_moves_a_working_one(places):
    here, elsewhere, link = places
    link.parent.mkdir()
    link_system(elsewhere, link)
    assert os.readlink(link) == str(elsewhere)
    link_system(here, link, "--move")
    assert os.readlink(link) == str(here)

