"""A daemonized zarrfs logs where the user can find it: syslog when there is one, else a file
(-o log_file=PATH, or /var/log/zarrfs/zarrfs.log); the mount says where in one line. Without
it, on a machine with no /dev/log (a container), "written data ... could not be stored" went
nowhere while the unmount returned 0."""

import logging
import os
import socket
import stat
import subprocess

import numpy as np
import zarr

from helpers import fill_disk
from mounting import ZARRFS, mounted, unmount, wait_for
from zarrfs.cli import daemon_log


def daemon_gone(source, mnt) -> bool:
    return subprocess.run(["pgrep", "-f", f"zarrfs {source} {mnt}"], capture_output=True).returncode != 0


def test_data_an_unmount_could_not_store_is_named_in_the_log_file(tmp_path, tiny_tmpfs):
    root = tiny_tmpfs / "a.zarr"
    zarr.create_array(str(root), shape=(4096,), chunks=(1024,), dtype="uint8", compressors=None)
    fill_disk(tiny_tmpfs / "filler")
    mnt, log_file, recovery = tmp_path / "mnt", tmp_path / "logs" / "zarrfs.log", tmp_path / "recovery"
    mnt.mkdir()
    result = subprocess.run([ZARRFS, str(root), str(mnt), "-o", f"log_file={log_file},recovery_dir={recovery}"],
                            capture_output=True, text=True, timeout=60)
    try:
        assert result.returncode == 0, result.stderr
        assert result.stderr == f"zarrfs: mounted; the log is {log_file}\n"
        fd = os.open(mnt / "a.zarr.bin", os.O_WRONLY)
        os.pwrite(fd, b"\x01" * 1024, 0)
        try:
            os.close(fd)  # the write-back fails: the disk is full
        except OSError:
            pass
    finally:
        unmount(mnt)
    wait_for(lambda: daemon_gone(root, mnt), what="the daemon to exit")
    [saved] = recovery.iterdir()
    log = log_file.read_text()
    assert f"mounted {root} on {mnt}" in log
    assert "written data of / could not be stored" in log and f"saved in {saved}" in log, log


def test_a_log_file_that_cannot_be_opened_refuses_the_mount_in_one_line(tmp_path):
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(4,), chunks=(4,), dtype="uint8")
    (tmp_path / "mnt").mkdir()
    (tmp_path / "logs").mkdir()
    result = subprocess.run([ZARRFS, str(root), str(tmp_path / "mnt"), "-o", f"ro,log_file={tmp_path}/logs"],
                            capture_output=True, text=True, timeout=60)
    unmount(tmp_path / "mnt")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"zarrfs: cannot open the log file {tmp_path}/logs: Is a directory "
                                          "(choose another with -o log_file=PATH)"]


def test_the_log_goes_to_syslog_when_there_is_one_else_to_the_default_file(tmp_path, monkeypatch):
    monkeypatch.setattr(daemon_log, "SYSLOG_SOCKET", str(tmp_path / "log"))
    assert daemon_log.log_file_for(None) == daemon_log.default_log_file() == "/var/log/zarrfs/zarrfs.log"  # as root
    assert daemon_log.log_file_for("/x/y.log") == "/x/y.log"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as syslog:
        syslog.bind(str(tmp_path / "log"))
        assert daemon_log.log_file_for(None) is None
        assert daemon_log.describe(None) == "the log goes to syslog (journalctl -t zarrfs)"
        assert daemon_log.log_file_for("/x/y.log") == "/x/y.log"  # given: the file all the same


def test_foreground_with_a_log_file_logs_to_both(tmp_path):
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(4,), chunks=(4,), dtype="uint8")[...] = np.arange(4)
    with mounted(root, tmp_path, "ro", f"log_file={tmp_path / 'z.log'}") as m:
        assert (m / "a.zarr.bin").read_bytes() == bytes(range(4))
    assert f"mounted {root} on {m.path}" in m.log() and f"mounted {root} on {m.path}" in (tmp_path / "z.log").read_text()


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_log_file_is_the_owners_alone(tmp_path):
    """It names URLs, endpoints and credential files: made 0600 whatever the umask, an older
    one tightened, and the file reopened after logrotate moved it away made 0600 too."""
    root = tmp_path / "a.zarr"
    zarr.create_array(str(root), shape=(4,), chunks=(4,), dtype="uint8")
    made, old = tmp_path / "logs" / "made.log", tmp_path / "old.log"
    old.write_text("an earlier mount\n")
    old.chmod(0o644)
    for log_file in (made, old):
        mnt = tmp_path / f"mnt-{log_file.stem}"
        mnt.mkdir()
        result = subprocess.run([ZARRFS, str(root), str(mnt), "-o", f"ro,log_file={log_file}"],
                                capture_output=True, text=True, timeout=60)
        try:
            assert result.returncode == 0, result.stderr
            assert mode(log_file) == 0o600
        finally:
            unmount(mnt)
        wait_for(lambda mnt=mnt: daemon_gone(root, mnt), what="the daemon to exit")
    assert old.read_text().startswith("an earlier mount\n") and f"mounted {root}" in old.read_text()
    assert mode(made.parent) == 0o700  # a directory made for the log: nobody else lists it
    handler = daemon_log.file_handler(str(tmp_path / "rotated.log"))
    try:
        handler.emit(logging.makeLogRecord({"msg": "before"}))
        os.rename(tmp_path / "rotated.log", tmp_path / "rotated.log.1")
        handler.emit(logging.makeLogRecord({"msg": "after"}))
    finally:
        handler.close()
    assert mode(tmp_path / "rotated.log") == 0o600 and "after" in (tmp_path / "rotated.log").read_text()
