"""The session bus of the desktop tests (tests/session_bus.py): every wait bounded, and every
process it started ended, whatever the bus does."""

import os
from pathlib import Path

import pytest

import session_bus
from session_bus import SessionBus, running, session_env


def started_with(marker: str) -> list[int]:
    """The running processes whose environment holds `marker`."""
    found = []
    for entry in os.scandir("/proc"):
        try:
            environment = Path(entry.path, "environ").read_bytes() if entry.name.isdigit() else b""
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if marker.encode() in environment.split(b"\0") and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_bus_that_never_says_its_address_fails_within_the_bound_and_is_ended(tmp_path, monkeypatch):
    """SessionBus read dbus-daemon's address with no bound: a daemon hung before saying it hung
    the test, and stayed running. Here a dbus-daemon that never says it (the first on PATH)."""
    monkeypatch.setattr(session_bus, "STARTED", 1.0)
    programs, marker = tmp_path / "bin", f"SESSION_BUS_TEST={tmp_path}"
    programs.mkdir()
    (programs / "dbus-daemon").write_text("#!/bin/sh\nexec sleep 600\n")
    (programs / "dbus-daemon").chmod(0o755)
    env = {**session_env(tmp_path / "session"), "PATH": f"{programs}:{os.environ['PATH']}",
           marker.split("=")[0]: str(tmp_path)}
    with pytest.raises(AssertionError, match="did not say its address within 1.0 s"):
        SessionBus(env, tmp_path / "bus.log")
    assert started_with(marker) == []
