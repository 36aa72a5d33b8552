"""The Python scripts/setup makes .venv with: the newest >= 3.11 found on PATH and among pyenv's
versions, PYTHON= over all of them, a Python older than 3.11 refused in one line; and a venv left
on another Python is made again, and said so.

pick-python is asked through a PATH and a PYENV_ROOT of the test's own, holding interpreters that
answer its question as a Python of the version named would (any machine runs these, whatever
Pythons it has); make-venv makes real venvs with the interpreter running the tests."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[2] / "scripts"


def interpreter(path: Path, version: str) -> Path:
    """An executable at `path` that answers pick-python's question (version, and that it can make
    a venv) as Python `version` installed there would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{version.replace(".", " ")} $0"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def places(tmp_path):
    """(a bin directory that is the whole PATH, a pyenv root with no versions yet)"""
    (tmp_path / "bin").mkdir()
    (tmp_path / "pyenv" / "versions").mkdir(parents=True)
    return tmp_path / "bin", tmp_path / "pyenv"


def on_path(bin_dir: Path, name: str, version: str) -> Path:
    return interpreter(bin_dir / name, version)


def in_pyenv(root: Path, version: str, name: str | None = None) -> Path:
    return interpreter(root / "versions" / (name or version) / "bin" / "python3", version)


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
    on_path(bin_dir, "python3", "3.11.2")
    on_path(bin_dir, "python3.12", "3.12.1")
    newest = in_pyenv(root, "3.13.0")
    in_pyenv(root, "3.10.13")
    not_running = bin_dir / "python3.13"  # as a pyenv shim of a version that is not active
    not_running.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n")
    not_running.chmod(0o755)
    result = pick(bin_dir, root)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"3.13.0 {newest}\n"


def test_without_home_or_pyenv_root_python3_on_path_is_found_and_nothing_said(places):
    """As a systemd unit or `env -i` runs setup: no HOME, so no pyenv to look in."""
    bin_dir, _ = places
    python3 = on_path(bin_dir, "python3", "3.11.2")
    result = pick(bin_dir, None)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"3.11.2 {python3}\n"


def test_pyenv_versions_that_are_not_plain_releases_are_passed_over(places):
    bin_dir, root = places
    release = in_pyenv(root, "3.12.1")
    in_pyenv(root, "3.13.0", name="3.13.0t")  # as a free-threaded build is named
    assert pick(bin_dir, root).stdout == f"3.12.1 {release}\n"


def test_python_wins_over_a_newer_one(places):
    bin_dir, root = places
    in_pyenv(root, "3.13.0")
    chosen = on_path(bin_dir, "python3", "3.11.2")
    result = pick(bin_dir, root, python=chosen)
    assert result.stdout == f"3.11.2 {chosen}\n"


def test_an_older_python_is_refused_in_one_line(places):
    bin_dir, root = places
    old = on_path(bin_dir, "python3", "3.10.13")
    result = pick(bin_dir, root, python=old)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"pick-python: PYTHON={old} is Python 3.10.13; zarrfs needs Python >= 3.11\n"
    result = pick(bin_dir, root)  # nothing newer anywhere
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("pick-python: no Python >= 3.11 found (the newest is 3.10.13 ")
    assert "PYTHON=" in result.stderr


def test_the_newest_of_one_minor_version_for_the_second_pass(places):
    bin_dir, root = places
    on_path(bin_dir, "python3", "3.11.2")  # as Debian's, older than pyenv's
    newest = in_pyenv(root, "3.11.7")
    in_pyenv(root, "3.13.0")
    result = pick(bin_dir, root, "3.11")
    assert result.stdout == f"3.11.7 {newest}\n"
    assert pick(bin_dir, root, "3.9").returncode == 1  # none here: nothing said, the caller says what it does


def test_the_real_pythons_of_this_machine_are_found(tmp_path):
    """pick-python's question, asked of a real interpreter (the one running this test), is answered."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys.executable)
    result = pick(tmp_path / "bin", None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "%d.%d.%d" % sys.version_info[:3]


def python_of(venv: Path) -> str:
    return subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(*sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.split()


def make_venv(venv: Path, python: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPTS / "make-venv"), str(venv), str(python)], capture_output=True,
                          text=True, timeout=300, check=True)


def identity(python) -> str:
    code = 'import os, sys; print("%d.%d.%d" % sys.version_info[:3], os.path.realpath(sys.base_prefix))'
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_a_venv_on_another_python_is_made_again_and_said_so(tmp_path):
    """The machine's own Python makes the venv and keeps it; another installation (one that
    answers make-venv's question as Python 3.99.0 in /opt/other would, and makes venvs with the
    machine's) makes it again, and says so."""
    venv, real = tmp_path / ".venv", Path(sys.executable)
    other = tmp_path / "other-python"
    other.write_text(f'#!/bin/sh\ncase "$2" in *base_prefix*) echo "3.99.0 /opt/other" ;; *) exec {real} "$@" ;; esac\n')
    other.chmod(0o755)
    assert make_venv(venv, real).stdout == ""
    assert python_of(venv) == [str(n) for n in sys.version_info[:2]]
    (venv / "kept").touch()
    assert make_venv(venv, real).stdout == ""  # the same Python: kept as it is
    assert (venv / "kept").exists()
    was = identity(real)
    said = make_venv(venv, other).stdout
    assert said == (f"make-venv: {venv} was made with Python {was.split()[0]} ({was.split()[1]}), "
                    "not Python 3.99.0 (/opt/other): made again\n")
    assert not (venv / "kept").exists() and (venv / "bin" / "python").exists()
