"""Real mounts for tests: start the daemon, wait until the mount is live, always unmount and reap."""

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ZARRFS = str(Path(sys.executable).parent / "zarrfs")
# zarrfs-recover, run as its console script runs it (pyproject.toml: zarrfs.cli.recover:main), from
# the tree under test whatever entry point the environment's installed script was made with
RECOVER = [sys.executable, "-m", "zarrfs.cli.recover"]


class Mount:
    def __init__(self, source, mountpoint, log_path, process):
        self.source, self.path, self.log_path, self.process = Path(source), Path(mountpoint), log_path, process

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")

    def settled_log(self, quiet: float = 0.5, timeout: float = 30.0) -> str:
        """The log once the daemon is idle: nothing written for `quiet` seconds. What the kernel
        sends after a call returns (read-ahead, release), and the daemon's background threads,
        are logged by then, so that requests or lines counted in it are all there are."""
        return settled(self.log_path, quiet, timeout)

    def __truediv__(self, name):
        return self.path / name


def wait_for(predicate, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


def settled(path, quiet: float = 0.5, timeout: float = 30.0) -> str:
    """The text of the log at `path` once it has stopped growing for `quiet` seconds ("" if it
    was never made); a log still growing after `timeout` fails the test (a mount, or a server,
    that is never idle is a defect)."""
    deadline = time.monotonic() + timeout
    size, since = None, time.monotonic()
    while True:
        now_size = os.path.getsize(path) if os.path.exists(path) else -1
        now = time.monotonic()
        if now_size != size:
            size, since = now_size, now
        elif now - since >= quiet:
            return Path(path).read_text(errors="replace") if size >= 0 else ""
        if now > deadline:
            raise TimeoutError(f"{path} kept growing for {timeout} s: its writer was never idle")
        time.sleep(0.05)


def unmount(mountpoint) -> None:
    """Unmount, even a mount whose daemon was killed (os.path.ismount says False for it: its
    stat fails with ENOTCONN)."""
    if not (os.path.ismount(mountpoint) or listed(mountpoint)):
        return
    if subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True).returncode:
        time.sleep(0.5)
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
    if os.path.ismount(mountpoint) or listed(mountpoint):
        subprocess.run(["fusermount3", "-uz", str(mountpoint)], capture_output=True)


def listed(mountpoint) -> bool:
    path = str(mountpoint).replace(" ", "\\040")
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == path for line in mounts)


def reap(process, timeout=20) -> None:
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def private_places(tmp_path, name, options=()) -> list[str]:
    """`options`, and the places a daemon writes by default made the test's own unless given:
    written data it cannot store is saved in tmp_path/NAME.recovery, not the machine's
    /var/lib/zarrfs/recovery."""
    given = {option.partition("=")[0] for option in options}
    places = {"recovery_dir": Path(tmp_path) / f"{name}.recovery"}
    return [*options, *(f"{option}={path}" for option, path in places.items() if option not in given)]


def daemon_places(tmp_path) -> str:
    """-o words for a daemon started without -f (mount -t, fstab): its recovery data and its log
    (a file wherever there is no /dev/log) in tmp_path, not in the machine's /var/lib and /var/log."""
    return f"recovery_dir={Path(tmp_path) / 'daemon.recovery'},log_file={Path(tmp_path) / 'daemon.log'}"


def failed_start(source, options, env, tmp_path) -> str:
    """The command as users run it (a daemon, without -f), expected to fail at start-up: the one
    line it printed, after checking that it exited non-zero with that line alone on stderr (no
    traceback, no panic). Always unmounted."""
    mountpoint = Path(tmp_path) / "m"
    mountpoint.mkdir(exist_ok=True)
    try:
        result = subprocess.run([ZARRFS, str(source), str(mountpoint), "-o", ",".join([*options, "timeout=4",
                                daemon_places(tmp_path)])], env=env, capture_output=True, text=True, timeout=90)
    finally:
        unmount(mountpoint)
    stderr = result.stderr
    assert result.returncode != 0, stderr
    assert "Traceback" not in stderr and "panicked" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zarrfs: "), stderr
    return lines[0]


@contextlib.contextmanager
def mounted(source, tmp_path, *options, name="mnt", env=None, timeout=15.0):
    """Mount `source` in the foreground (-f) on tmp_path/name; yields a Mount. `env`: the
    daemon's environment (object-store credentials)."""
    mountpoint = Path(tmp_path) / name
    mountpoint.mkdir(exist_ok=True)
    log_path = Path(tmp_path) / f"{name}.log"
    args = [ZARRFS, str(source), str(mountpoint), "-f", "-o", ",".join(private_places(tmp_path, name, options))]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env)
    try:
        wait_for(lambda: os.path.ismount(mountpoint) or process.poll() is not None, timeout, what="the mount")
        if process.poll() is not None:
            raise RuntimeError(f"zarrfs exited with {process.returncode}: {log_path.read_text()}")
        yield Mount(source, mountpoint, log_path, process)
    finally:
        unmount(mountpoint)
        reap(process)


class Remounts:
    """For stateful tests that mount `self.root` again and again, each time on a mount point of
    its own under `self.tmp`: `self.mount` is the live one, `self.mounts` how many there were.
    With `held` set (a file's path in the mount), that file is open read-write as `self.fd`
    while mounted: opened after each mount, closed before each unmount."""

    mounts = 0
    context = mount = fd = None
    held: str | None = None

    def _mount(self):
        self.mounts += 1
        self.context = mounted(self.root, self.tmp, name=f"m{self.mounts}")
        self.mount = self.context.__enter__()
        if self.held:
            self.fd = os.open(self.mount / self.held, os.O_RDWR)

    def _unmount(self):
        """Safe twice: hypothesis calls teardown after a rule that failed between the two."""
        fd, self.fd = self.fd, None
        context, self.context, self.mount = self.context, None, None
        try:
            if fd is not None:
                os.close(fd)
        finally:
            if context is not None:
                context.__exit__(None, None, None)


def fsynced_writes_then_kill_9(m: Mount, name: str, model: bytearray, rng, acknowledged: int,
                               unacknowledged: int) -> None:
    """`acknowledged` pwrites of 64 random bytes into `name`, each fsynced (and made in `model`),
    then `unacknowledged` of 64 bytes 0xFF that are not, then kill -9 of the daemon: what fsync
    acknowledged must be in the store, the rest may or may not be. Always unmounted."""
    fd = os.open(m.path / name, os.O_RDWR)
    for _ in range(acknowledged):
        offset = int(rng.integers(0, len(model) - 64))
        data = rng.integers(1, 255, 64, dtype="u1").tobytes()
        os.pwrite(fd, data, offset)
        os.fsync(fd)
        model[offset:offset + 64] = data
    for _ in range(unacknowledged):
        os.pwrite(fd, b"\xff" * 64, int(rng.integers(0, len(model) - 64)))
    kill_9_with_open(m, fd)


def kill_9_with_open(m: Mount, fd: int) -> None:
    """kill -9 of the daemon while `fd` of its mount is open; the descriptor closed (its error is
    the dead daemon's), the mount undone."""
    m.process.send_signal(signal.SIGKILL)
    reap(m.process)
    try:
        os.close(fd)
    except OSError:
        pass
    unmount(m.path)


def read_or_eio(path) -> bytes | None:
    """The file's bytes, or None where the read fails with EIO (any other error fails the test):
    for waiting until reads resume after an outage."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        assert e.errno == errno.EIO, e
        return None
