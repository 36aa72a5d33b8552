"""A user other than root who asks for allow_other (or allow_root) on a machine whose
/etc/fuse.conf does not say user_allow_other is told so in one line, before libfuse's two.

The command runs as a real user made here (always removed), as users run it (a daemon, without
-f): through the system's python3 with this checkout and the test environment's packages on
PYTHONPATH, since the environment's own interpreter lives where no other user may enter. It runs
in a mount namespace of its own where /etc/fuse.conf (and, for one test, /dev/fuse) are the
test's own, bound over the machine's: what it refuses is made here, whatever the machine says
(installing udev made this machine's /dev/fuse 0666, and an administrator may allow others)."""

import os
import shlex
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import zarr

import zarrfs
from helpers import another_user, reachable_directory
from mounting import unmount

SYSTEM_PYTHON = "/usr/bin/python3"
CHECKOUT = Path(zarrfs.__file__).resolve().parents[1]
COMMAND = "import sys; from zarrfs.cli.command import main; sys.exit(main())"  # as the console script does


@pytest.fixture
def user_home():
    """A real user with a group and a home of its own (reachable by root's tests), always deleted."""
    with reachable_directory("zarrfs-allow-other-") as shared, another_user(shared, "zao") as user:
        yield user


def as_user(user, *args, bound: dict[str, Path]) -> subprocess.CompletedProcess:
    """The command run by `user` in a mount namespace of its own in which each file of `bound`
    (machine path -> the test's file) is the test's (gone with the namespace when it exits)."""
    home = Path(user.pw_dir)
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(home),
                   "PYTHONPATH": f"{CHECKOUT}:{sysconfig.get_paths()['purelib']}"}
    binds = " && ".join(f"mount --bind {shlex.quote(str(ours))} {shlex.quote(machines)}" for machines, ours in bound.items())
    command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", f'{binds} && exec "$@"', "sh",
               "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--",
               SYSTEM_PYTHON, "-c", COMMAND, *args]
    return subprocess.run(command, env=environment, cwd=home, capture_output=True, text=True, timeout=120)


def fuse_conf(home: Path) -> Path:
    """An /etc/fuse.conf as Debian ships it: no user_allow_other."""
    path = home / "fuse.conf"
    path.write_text("# mount_max = 1000\n#user_allow_other\n")
    return path


def dev_fuse_of_root_alone(home: Path) -> Path:
    """/dev/fuse as some containers have it: crw------- root."""
    path = home / "fuse"
    real = os.stat("/dev/fuse").st_rdev
    os.mknod(path, stat.S_IFCHR | 0o600, real)
    os.chmod(path, 0o600)  # whatever the umask took
    return path


def start_as(user, *options, dev_fuse: Path | None = None) -> list[str]:
    """The lines on stderr of the command run by `user` on a hierarchy and a mount point of its
    own, as users run it (a daemon), after checking that it exited with status 1. Always unmounted."""
    home = Path(user.pw_dir)
    zarr.open_group(str(home / "data.zarr"), mode="w").create_array("a", shape=(4,), dtype="u1")[...] = 1
    (home / "m").mkdir()
    for path in (home / "data.zarr", *(home / "data.zarr").rglob("*"), home / "m"):
        os.chown(path, user.pw_uid, user.pw_gid)
    places = f"log_file={home / 'zarrfs.log'},recovery_dir={home / 'recovery'}"
    try:
        bound = {"/etc/fuse.conf": fuse_conf(home), **({"/dev/fuse": dev_fuse} if dev_fuse else {})}
        result = as_user(user, str(home / "data.zarr"), str(home / "m"), "-o", ",".join([*options, places]),
                         bound=bound)
    finally:
        unmount(home / "m")
    assert result.returncode == 1, result.stderr
    return result.stderr.strip().splitlines()


def system_python() -> str:
    return subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, timeout=60).stdout.strip()


# The packages this run has are built for its own Python, and the system's python3 loads them only
# where it is that same version (Debian 12's is 3.11): the other user cannot run this run's own
# interpreter (pyenv's live in /root). scripts/test's 3.11 pass runs these tests there.
THIS_PYTHON, SYSTEMS = "%d.%d" % sys.version_info[:2], system_python()
pytestmark = pytest.mark.skipif(
    SYSTEMS != THIS_PYTHON,
    reason=f"runs zarrfs as another user through {SYSTEM_PYTHON} ({SYSTEMS}), which cannot load this "
           f"run's packages (Python {THIS_PYTHON}): the pass on Python {SYSTEMS} runs it")


@pytest.mark.parametrize("option", ["allow_other", "allow_root"])
def test_allow_other_without_user_allow_other_is_one_line_naming_fuse_conf(user_home, option):
    assert start_as(user_home, option) == [
        f"zarrfs: -o {option} needs a line user_allow_other in /etc/fuse.conf for a user other than root: ask an "
        f"administrator to add it, or mount without {option}"]


def test_a_dev_fuse_this_user_may_not_open_is_one_line(user_home):
    """/dev/fuse root's alone (crw-------), as in some containers: libfuse said `failed to open
    /dev/fuse: Permission denied` and `libfuse error 4`."""
    assert start_as(user_home, dev_fuse=dev_fuse_of_root_alone(Path(user_home.pw_dir))) == [
        "zarrfs: /dev/fuse: this user may not open it (mode 600): ask an administrator to make it readable and "
        "writable by all (chmod 666 /dev/fuse, as distributions ship it), or mount as root"]
