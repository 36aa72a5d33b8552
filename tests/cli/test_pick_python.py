"""The Python scripts/setup makes .venv with: the newest >= 3.11 found on PATH and among pyenv's
versions, PYTHON= over all of them, a Python older than 3.11 refused in one line; and a venv left
on another Python is made again, and said so. The interpreters are the machine's real ones
(pyenv's 3.10 to 3.13 and Debian's 3.11), seen through a PATH and a PYENV_ROOT of the test's own."""

import os
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[2] / "scripts"
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"


def installed(minor: str) -> Path:
    """The directory of pyenv's newest release of `minor` (these machines have 3.10 to 3.13)."""
    found = sorted(PYENV.glob(f"{minor}.*"), key=lambda p: [int(x) for x in p.name.split(".")])
    assert found, f"pyenv has no Python {minor} in {PYENV}: the machine's image brings 3.10 to 3.13"
    return found[-1]


def version(directory: Path) -> str:
    return directory.name


@pytest.fixture
def places(tmp_path):
    """(a bin directory that is the whole PATH, a pyenv root with no versions yet)"""
    (tmp_path / "bin").mkdir()
    (tmp_path / "pyenv" / "versions").mkdir(parents=True)
    return tmp_path / "bin", tmp_path / "pyenv"


def on_path(bin_dir: Path, name: str, target: Path) -> Path:
    (bin_dir / name).symlink_to(target)
    return bin_dir / name


def in_pyenv(root: Path, directory: Path, name: str | None = None) -> Path:
    (root / "versions" / (name or directory.name)).symlink_to(directory)
    return root / "versions" / (name or directory.name) / "bin" / "python3"


def pick(bin_dir, pyenv_root, *args, python=None) -> subprocess.CompletedProcess:
    environment = {"PATH": str(bin_dir)}
    if pyenv_root is not None:
        environment.update(PYENV_ROOT=str(pyenv_root), HOME=str(pyenv_root))
    if python:
        environment["PYTHON"] = str(python)
    return subprocess.run(["/bin/bash", str(SCRIPTS / "pick-python"), *args], env=environment,
                          capture_output=True, text=True, timeout=60)


def test_the_newest_found_on_path_or_in_pyenv_is_chosen(places):
    bin_dir, root = places
    on_path(bin_dir, "python3", installed("3.11") / "bin" / "python3")
    on_path(bin_dir, "python3.12", installed("3.12") / "bin" / "python3")
    newest = in_pyenv(root, installed("3.13"))
    in_pyenv(root, installed("3.10"))
    not_running = bin_dir / "python3.13"  # as a pyenv shim of a version that is not active
    not_running.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n")
    not_running.chmod(0o755)
    result = pick(bin_dir, root)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{version(installed('3.13'))} {newest}\n"


def test_without_home_or_pyenv_root_python3_on_path_is_found_and_nothing_said(places):
    """As a systemd unit or `env -i` runs setup: no HOME, so no pyenv to look in."""
    bin_dir, _ = places
    python3 = on_path(bin_dir, "python3", installed("3.11") / "bin" / "python3")
    result = pick(bin_dir, None)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{version(installed('3.11'))} {python3}\n"


def test_pyenv_versions_that_are_not_plain_releases_are_passed_over(places):
    bin_dir, root = places
    release = in_pyenv(root, installed("3.12"))
    in_pyenv(root, installed("3.13"), name=version(installed("3.13")) + "t")  # as a free-threaded build is named
    assert pick(bin_dir, root).stdout == f"{version(installed('3.12'))} {release}\n"


def test_python_wins_over_a_newer_one(places):
    bin_dir, root = places
    in_pyenv(root, installed("3.13"))
    chosen = on_path(bin_dir, "python3", installed("3.11") / "bin" / "python3")
    result = pick(bin_dir, root, python=chosen)
    assert result.stdout == f"{version(installed('3.11'))} {chosen}\n"


def test_an_older_python_is_refused_in_one_line(places):
    bin_dir, root = places
    old = on_path(bin_dir, "python3", installed("3.10") / "bin" / "python3")
    result = pick(bin_dir, root, python=old)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (f"pick-python: PYTHON={old} is Python {version(installed('3.10'))}; "
                             "zarrfs needs Python >= 3.11\n")
    result = pick(bin_dir, root)  # nothing newer anywhere
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"pick-python: no Python >= 3.11 found (the newest is {version(installed('3.10'))} ")
    assert "PYTHON=" in result.stderr


def test_the_newest_of_one_minor_version_for_the_second_pass(places):
    bin_dir, root = places
    on_path(bin_dir, "python3", Path("/usr/bin/python3"))  # Debian's 3.11, older than pyenv's
    newest = in_pyenv(root, installed("3.11"))
    in_pyenv(root, installed("3.13"))
    result = pick(bin_dir, root, "3.11")
    assert result.stdout == f"{version(installed('3.11'))} {newest}\n"
    assert pick(bin_dir, root, "3.9").returncode == 1  # none here: nothing said, the caller says what it does


def python_of(venv: Path) -> str:
    return subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(*sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.split()


def make_venv(venv: Path, python: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPTS / "make-venv"), str(venv), str(python)], capture_output=True,
                          text=True, timeout=300, check=True)


def test_a_venv_on_another_python_is_made_again_and_said_so(tmp_path):
    venv = tmp_path / ".venv"
    older, newer = installed("3.11") / "bin" / "python3", installed("3.12") / "bin" / "python3"
    assert make_venv(venv, older).stdout == ""
    assert python_of(venv) == ["3", "11"]
    (venv / "kept").touch()
    assert make_venv(venv, older).stdout == ""  # the same Python: kept as it is
    assert (venv / "kept").exists()
    said = make_venv(venv, newer).stdout
    assert said == (f"make-venv: {venv} was made with Python {version(installed('3.11'))} ({installed('3.11')}), "
                    f"not Python {version(installed('3.12'))} ({installed('3.12')}): made again\n")
    assert python_of(venv) == ["3", "12"] and not (venv / "kept").exists()

