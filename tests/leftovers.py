"""What a test run must not leave outside its temporary directories: recovery data saved in the
machine's default places, log lines in the machine's default log, the system's `zarrfs` link
moved; nor, in its own process, descriptors opened and never closed (tests/conftest.py). Other processes on this machine (a user's mounts, other checkouts' test runs) write to
the same places meanwhile, so only what names this run's own temporary directory counts, and
the link only when it was moved into this checkout or that directory."""

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from zarrfs.cli import daemon_log
from zarrfs.engine import recovery

SYSTEM_LINK = "/usr/local/bin/zarrfs"
CHECKOUT = str(Path(__file__).resolve().parent.parent)


def recovery_places() -> list[str]:
    """Where a daemon saves written data it cannot store when no recovery_dir is given."""
    return [recovery.default_directory(), os.path.join(tempfile.gettempdir(), "zarrfs-recovery")]


def log_files() -> list[str]:
    """The log a daemon writes when it has no syslog and no log_file is given."""
    return [daemon_log.default_log_file()]


@dataclass
class Snapshot:
    saved: set[str] = field(default_factory=set)
    log_sizes: dict[str, int] = field(default_factory=dict)
    link: str | None = None


def snapshot() -> Snapshot:
    saved = {os.path.join(place, name) for place in recovery_places() if os.path.isdir(place)
             for name in os.listdir(place)}
    sizes = {path: os.path.getsize(path) for path in log_files() if os.path.isfile(path)}
    return Snapshot(saved, sizes, _link())


def found(before: Snapshot, basetemp) -> list[str]:
    """What this run left behind since `before`: each a line saying what and where."""
    ours = str(basetemp).rstrip("/") + "/"
    return [*_saved_by(before, ours), *_logged_by(before, ours), *_link_moved(before, ours)]


def _saved_by(before: Snapshot, ours: str) -> list[str]:
    now = snapshot().saved
    return [f"recovery data of a test's store in {path}" for path in sorted(now - before.saved)
            if _store_of(path).startswith(ours)]


def _store_of(saved: str) -> str:
    try:
        with open(os.path.join(saved, recovery.MANIFEST)) as f:
            return str(json.load(f).get("store", ""))
    except (OSError, ValueError, AttributeError):
        return ""  # being written (.partial-), or not recovery data: not known to be ours


def _logged_by(before: Snapshot, ours: str) -> list[str]:
    lines = []
    for path in log_files():
        try:
            with open(path, "rb") as f:
                f.seek(before.log_sizes.get(path, 0))
                added = f.read().decode(errors="replace")
        except OSError:
            continue
        lines += [f"{path}: {line}" for line in added.splitlines() if ours in line][:5]
    return lines


def _link_moved(before: Snapshot, ours: str) -> list[str]:
    now = _link()
    if now == before.link or now is None or not now.startswith((ours, CHECKOUT + "/")):
        return []
    return [f"{SYSTEM_LINK} moved from {before.link} to {now}"]


def _link() -> str | None:
    try:
        return os.readlink(SYSTEM_LINK)
    except OSError:
        return None


def descriptors(process: int | str = "self") -> list[str]:
    """What each of `process`'s descriptors leads to (this process's unless told; one closed
    meanwhile is left out)."""
    links = []
    for fd in os.listdir(f"/proc/{process}/fd"):
        try:
            links.append(os.readlink(f"/proc/{process}/fd/{fd}"))
        except OSError:
            pass
    return links


def most_common(targets: list[str], shown: int = 3) -> list[str]:
    """`targets` counted by what they are (a socket, a pipe, an anonymous inode's kind such as
    anon_inode:inotify, a directory, a file), the most common first, each with `shown` of them
    (a test's temporary directory in a path names the test)."""
    kinds: dict[str, list[str]] = {}
    for target in targets:
        kinds.setdefault(_kind(target), []).append(target)
    return [f"{len(found):6d} {kind}: " + ", ".join(_shown(target) for target in sorted(found)[:shown])
            for kind, found in sorted(kinds.items(), key=lambda item: -len(item[1]))]


def _kind(target: str) -> str:
    if not target.startswith("/"):
        return re.sub(r":\[\d+\]$", "", target)  # socket:[123] -> socket, anon_inode:inotify as it is
    return "directory" if os.path.isdir(target) else "file"


def _shown(target: str) -> str:
    """A path as a message can hold it: a name's bytes that are not UTF-8 escaped (names.py)."""
    return os.fsencode(target).decode(errors="backslashreplace")
