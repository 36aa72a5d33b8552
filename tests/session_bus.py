"""A D-Bus session bus of a test's own, and process groups ended by their leader's PID.

A desktop program (a file manager, `gio`) finds gvfs through the session bus: the bus starts
gvfsd by D-Bus activation (org.gtk.vfs.Daemon.service, found in XDG_DATA_DIRS/dbus-1/services),
and gvfsd starts its backends (gvfsd-trash, ...). The bus is started here in a process group of
its own, which every process it activates stays in (dbus-daemon forks them off as orphans, but
none makes a group of its own), so ending that group by the bus's PID ends gvfs with it, and
nothing the test did not start is touched."""

import glob
import os
import re
import select
import signal
import subprocess
from pathlib import Path

from mounting import wait_for

# GIO's modules, where Debian's package gvfs puts its two: the client of gvfsd (the trash://
# scheme and the others) and that of its volume monitors
GIO_MODULES = "gio/modules"
GVFS_MODULES = ("libgvfsdbus.so", "libgioremote-volume-monitor.so")
# The standard's default, said here so that the machine's environment cannot hide the activation
# files of /usr/share/dbus-1/services from the bus
DATA_DIRS = "/usr/local/share:/usr/share"
ENDED = 10.0  # seconds for a process group to end after SIGTERM, on a loaded machine
STARTED = 30.0  # seconds for dbus-daemon to listen and say where, on a loaded machine


def session_env(directory: Path) -> dict[str, str]:
    """The environment of a desktop session whose home, XDG directories and runtime directory
    are in `directory` (made here), so that nothing is read from or left in the machine's.
    GVFS_DISABLE_FUSE: where gvfs-fuse is installed (GNOME desktops have it), gvfsd would start
    gvfsd-fuse, a FUSE mount at XDG_RUNTIME_DIR/gvfs that a killed session leaves behind."""
    home, runtime = directory / "home", directory / "runtime"
    home.mkdir(parents=True)
    runtime.mkdir(mode=0o700)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local/state"), "XDG_RUNTIME_DIR": str(runtime), "LANG": "C.UTF-8",
            "GVFS_DISABLE_FUSE": "1"}


def home_trash(env: dict[str, str]) -> list[str]:
    """What is in the session's home trash (XDG_DATA_HOME/Trash), where GLib or gvfs would have
    moved what they trashed."""
    trash = Path(env["XDG_DATA_HOME"], "Trash")
    return sorted(str(p.relative_to(trash)) for p in trash.rglob("*")) if trash.exists() else []


class SessionBus:
    """`dbus-daemon --session` in a process group of its own, its log at `log_path`. Its address
    goes in a program's DBUS_SESSION_BUS_ADDRESS; the bus and what it activated end with close()."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
                                            env={"XDG_DATA_DIRS": DATA_DIRS, **env}, stdout=subprocess.PIPE,
                                            stderr=log, start_new_session=True)
        assert self.process.stdout is not None
        with self.process.stdout:  # its address, written once it listens
            waiting = select.poll()  # not select(): a long run's test process may hold descriptors past 1024
            waiting.register(self.process.stdout, select.POLLIN)
            said = waiting.poll(STARTED * 1000)
            self.address = self.process.stdout.readline().decode().strip() if said else ""
        if not self.address:
            stop(self.process)
            raise AssertionError(f"dbus-daemon did not say its address within {STARTED} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def activated(self, service: str) -> dict[int, str]:
        """{PID: command name} of each process whose call started `service`, from the bus's log."""
        found = re.findall(rf"Activating service name='{re.escape(service)}' requested by '[^']*' "
                           rf"\(uid=\d+ pid=(\d+) comm=\"(\S+)", self.log())
        return {int(pid): comm for pid, comm in found}

    def members(self) -> dict[int, str]:
        """{PID: name} of the live processes in the bus's group: the bus and what it activated."""
        return members(self.process.pid)

    def close(self) -> None:
        stop(self.process)


def without_gvfs(directory: Path) -> dict[str, str]:
    """The environment of a session in which GIO works as on a machine without gvfs: every
    module of the machine's GIO but gvfs's, linked in `directory` (GIO_MODULE_DIR).
    GIO_USE_VFS=local is not enough: Thunar and pcmanfm, given it, still started gvfsd."""
    directory.mkdir()
    for system in glob.glob(f"/usr/lib*/{GIO_MODULES}") + glob.glob(f"/usr/lib*/*/{GIO_MODULES}"):
        for module in glob.glob(f"{system}/*.so"):
            if os.path.basename(module) not in GVFS_MODULES and not (directory / os.path.basename(module)).exists():
                os.symlink(module, directory / os.path.basename(module))
    return {"GIO_MODULE_DIR": str(directory)}


def members(group: int) -> dict[int, str]:
    """{PID: name} of the running processes of process group `group`."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (seen := process(int(entry.name))) is not None:
            name, pgrp = seen
            if pgrp == group:
                found[int(entry.name)] = name
    return found


def running(pid: int) -> bool:
    return process(pid) is not None


def process(pid: int) -> tuple[str, int] | None:
    """The name and process group of process `pid` from /proc/PID/stat, None if it has ended (a
    zombie has: it waits only for its parent to read its status)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # ended, and reaped
        return None
    name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else (name, int(fields[2]))


def stop(process: subprocess.Popen) -> None:
    """The process group `process` leads (made with start_new_session) ended: terminated, and
    killed if it lingers; the leader reaped, and every member gone (those a session bus
    activated are not its children, so waiting for the leader is not enough)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(ENDED)
            wait_for(lambda: not members(process.pid), ENDED, what=f"process group {process.pid} ended")
            break
        except (subprocess.TimeoutExpired, TimeoutError):
            continue
    process.wait(ENDED)
    assert not members(process.pid), f"process group {process.pid} outlived SIGKILL: {members(process.pid)}"
