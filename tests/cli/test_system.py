"""mount(8), fstab and systemd: the ordinary machinery mounts zarrfs."""

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from mounting import daemon_places, reap, unmount, wait_for

UNITS = Path(__file__).parents[2] / "systemd"
FSTAB_OPTIONS = "ro,allow_other,nofail,noauto,_netdev,dev,suid,exec,x-systemd.automount,x-systemd.idle-timeout=60"


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "data.zarr"
    z = zarr.create_array(str(root), shape=(100,), chunks=(30,), dtype="int32")
    z[...] = np.arange(100)
    return root


def daemon_gone(source, mnt) -> bool:
    return subprocess.run(["pgrep", "-f", f"zarrfs {source} {mnt}"], capture_output=True).returncode != 0


def test_zarrfs_is_on_roots_path():
    assert shutil.which("zarrfs", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


def test_mount_t_fuse_zarrfs_with_the_options_fstab_adds(store, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        subprocess.run(["mount", "-t", "fuse.zarrfs", str(store), str(mnt), "-o",
                        f"{FSTAB_OPTIONS},{daemon_places(tmp_path)}"], check=True,
                       capture_output=True, timeout=30)
        assert os.path.ismount(mnt)
        assert (mnt / "data.zarr.bin").read_bytes() == np.arange(100, dtype="<i4").tobytes()
        subprocess.run(["umount", str(mnt)], check=True, timeout=30)
        assert not os.path.ismount(mnt)
    finally:
        unmount(mnt)
    wait_for(lambda: daemon_gone(store, mnt), what="the daemon to exit")


def test_fstab_line_mounts_and_unmounts(store, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text(f"# test fstab\n{store}  {mnt}  fuse.zarrfs  {FSTAB_OPTIONS},{daemon_places(tmp_path)}  0 0\n")
    try:
        subprocess.run(["mount", "--fstab", str(fstab), str(mnt)], check=True, capture_output=True, timeout=30)
        assert os.path.ismount(mnt)
        assert (mnt / "data.zarr.json").exists()
        subprocess.run(["umount", str(mnt)], check=True, timeout=30)
        assert not os.path.ismount(mnt)
    finally:
        unmount(mnt)


def test_systemd_analyze_accepts_the_units(tmp_path):
    for name in ["zarrfs@.service", "mnt-experiment.mount"]:
        shutil.copy(UNITS / name, tmp_path / name)
    shutil.copy(UNITS / "zarrfs@.service", tmp_path / "zarrfs@experiment.service")
    result = subprocess.run(["systemd-analyze", "verify", *(str(p) for p in sorted(tmp_path.iterdir()))],
                            capture_output=True, text=True)
    assert result.returncode == 0 and str(tmp_path) not in result.stderr, result.stderr  # no warning either
    broken = tmp_path / "broken@.service"  # and it does notice a broken unit
    broken.write_text((UNITS / "zarrfs@.service").read_text().replace("Type=notify", "Type=notfy"))
    result = subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True, text=True)
    assert "broken@.service" in result.stderr and "notfy" in result.stderr


def exec_start(config: dict) -> list[str]:
    """The unit's ExecStart command line with ${VAR} expanded from the environment file, as systemd does."""
    line = next(line for line in (UNITS / "zarrfs@.service").read_text().splitlines() if line.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart="))
    return [re.sub(r"\$\{(\w+)\}", lambda m: config.get(m.group(1), ""), w) for w in words]


def test_exec_start_notifies_ready_when_live_and_stopping_on_sigterm(store, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    config = {"SOURCE": str(store), "MOUNTPOINT": str(mnt), "OPTIONS": f"cache_size=64M,recovery_dir={tmp_path / 'recovery'}"}
    example = dict(line.split("=", 1) for line in (UNITS / "experiment.conf.example").read_text().splitlines()
                   if line and not line.startswith("#"))
    assert set(example) == set(config)
    notify_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify_path))
    sock.settimeout(20)
    process = subprocess.Popen(exec_start(config), env={**os.environ, "NOTIFY_SOCKET": str(notify_path)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert sock.recv(4096) == b"READY=1"
        assert os.path.ismount(mnt)  # live by the time systemd hears READY
        fd = os.open(mnt / "data.zarr.bin", os.O_RDWR)
        os.pwrite(fd, np.array([-7], "<i4").tobytes(), 40)
        os.close(fd)  # flushed at close
        fd = os.open(mnt / "data.zarr.bin", os.O_RDWR)
        os.pwrite(fd, b"\x05\x00\x00\x00", 396)  # still open and dirty at SIGTERM
        process.send_signal(signal.SIGTERM)
        assert sock.recv(4096) == b"STOPPING=1"
        try:
            os.close(fd)
        except OSError:
            pass
        reap(process)
        assert process.returncode == 0, process.stderr.read()
        assert not os.path.ismount(mnt)
    finally:
        unmount(mnt)
        reap(process)
        sock.close()
    values = np.asarray(zarr.open_array(str(store))[...])
    assert values[10] == -7 and values[99] == 5


def test_mount_t_fuse_zarrfs_of_a_bucket_with_a_credentials_file(seaweed, tmp_path):
    """A remote source through mount(8) and mount.fuse3, as an fstab line with _netdev would give
    it; the credentials from a private file, since mount(8) is no place for secrets."""
    from servers.seaweed import USERS, unique_prefix
    prefix = unique_prefix("mount8")
    zarr.create_array(seaweed.zarr_store(prefix), shape=(10,), chunks=(4,), dtype="u1")[...] = np.arange(10)
    key, secret, _ = USERS["reader"]
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[default]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
    credentials.chmod(0o600)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    source = seaweed.url(prefix)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    try:
        subprocess.run(["mount", "-t", "fuse.zarrfs", source, str(mnt), "-o",
                        f"ro,_netdev,nofail,endpoint={seaweed.endpoint},credentials_file={credentials},"
                        f"{daemon_places(tmp_path)}"],
                       check=True, capture_output=True, timeout=60, env=env)
        assert (mnt / f"{prefix}.bin").read_bytes() == bytes(range(10))
        assert f"{source} {mnt} fuse.zarrfs" in Path("/proc/mounts").read_text()
        assert secret not in Path("/proc/mounts").read_text()
        subprocess.run(["umount", str(mnt)], check=True, timeout=30)
    finally:
        unmount(mnt)


def unit_setting(name: str) -> list[str]:
    line = next(line for line in (UNITS / "zarrfs@.service").read_text().splitlines() if line.startswith(name + "="))
    return line.removeprefix(name + "=").split()


def test_the_units_sandbox_lets_a_remote_mount_open_the_sockets_it_needs(seaweed, tmp_path):
    """The unit's daemon for an s3:// source, run as ExecStart runs it, with every socket(2) it
    makes traced: mounting, reading and unmounting opens sockets only of the address families
    the unit's RestrictAddressFamilies allows (systemd refuses the others with EAFNOSUPPORT).
    The endpoint is a host name, so name resolution is traced too. (No systemd runs as PID 1
    here: systemd-run cannot apply the sandbox itself.)"""
    from servers.seaweed import unique_prefix
    prefix = unique_prefix("unit")
    zarr.create_array(seaweed.zarr_store(prefix), shape=(10,), chunks=(4,), dtype="u1")[...] = np.arange(10)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    endpoint = f"http://localhost:{seaweed.ports['s3']}"
    config = {"SOURCE": seaweed.url(prefix), "MOUNTPOINT": str(mnt),
              "OPTIONS": f"ro,endpoint={endpoint},{daemon_places(tmp_path)}"}
    notify_path, trace = tmp_path / "notify.sock", tmp_path / "sockets.trace"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify_path))
    sock.settimeout(30)
    process = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=socket", "-o", str(trace), *exec_start(config)],
                               env={**seaweed.env("reader"), "NOTIFY_SOCKET": str(notify_path)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert sock.recv(4096) == b"READY=1"
        assert (mnt / f"{prefix}.bin").read_bytes() == bytes(range(10))
    finally:
        unmount(mnt)
        reap(process)
        sock.close()
    assert process.returncode == 0, process.stderr.read()
    opened = set(re.findall(r"socket\((AF_\w+)", trace.read_text()))
    assert "AF_INET" in opened or "AF_INET6" in opened  # the trace saw the store's connections
    assert opened <= set(unit_setting("RestrictAddressFamilies"))
