"""What file managers and shells ask besides the bytes: free space (statfs), permissions and
access checks that tell the truth, and read-only extended attributes that say what an array is."""

import errno
import json
import os
import re
import stat
import subprocess

import numpy as np
import pytest
import zarr

from mounting import mounted


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("fm") / "store"
    group = zarr.open_group(str(root), mode="w", zarr_format=3, attributes={"title": "field trip"})
    array = group.create_array("temperature", shape=(30, 40), chunks=(10, 20), dtype="float32",
                               dimension_names=["y", "x"], attributes={"units": "K"})
    array[...] = np.linspace(250, 300, 1200, dtype="float32").reshape(30, 40)
    group.create_group("raw")
    return root


def gio_filesystem(path) -> dict[str, str]:
    out = subprocess.run(["gio", "info", "-f", str(path)], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"^\s+filesystem::(\w+): (.*)$", out, re.M))


def test_statfs_block_sizes_agree_so_gio_df_and_stat_agree(store, tmp_path):
    with mounted(store, tmp_path, "ro") as m:
        mine, theirs = os.statvfs(m.path), os.statvfs(store)
        assert mine.f_bsize == mine.f_frsize == theirs.f_frsize
        assert mine.f_blocks == theirs.f_blocks
        size = theirs.f_blocks * theirs.f_frsize
        assert int(gio_filesystem(m.path)["size"]) == size  # GIO multiplies by f_bsize
        df = subprocess.run(["df", "-B1", "--output=size", str(m.path)], capture_output=True, text=True,
                            check=True).stdout.split()
        assert int(df[-1]) == size
        out = subprocess.run(["stat", "-f", "-c", "%s %S", str(m.path)], capture_output=True, text=True,
                             check=True).stdout.split()
        assert out[0] == out[1] == str(theirs.f_frsize)


def write_bits(path) -> int:
    return os.stat(path).st_mode & 0o222


def test_modes_and_access_tell_what_works_on_a_writable_mount(store, tmp_path):
    with mounted(store, tmp_path) as m:
        for directory in (m.path, m / "raw"):  # groups: entries are created, deleted and renamed
            assert stat.S_ISDIR(os.stat(directory).st_mode) and write_bits(directory)
            assert os.access(directory, os.R_OK | os.W_OK | os.X_OK)
        for name in ("temperature.bin", "temperature.json", "zarr.json"):  # data, attributes
            assert write_bits(m / name) and os.access(m / name, os.W_OK)
        for name in ("temperature.mhd",):
            assert not write_bits(m / name) and not os.access(m / name, os.W_OK)
            assert os.access(m / name, os.R_OK)
        assert not os.access(m / "temperature.bin", os.X_OK)
        with pytest.raises(PermissionError):
            (m / "new.bin").write_bytes(b"")  # arrays are made from .npy files and sidecars
        with pytest.raises(OSError) as raised:
            os.rename(m / "temperature.bin", m / "t.json")  # a rename keeps the suffix
        assert raised.value.errno == errno.EINVAL


def test_a_read_only_mount_shows_no_write_bits(store, tmp_path):
    with mounted(store, tmp_path, "ro") as m:
        for name in ("", "raw", "temperature.bin", "temperature.npy", "temperature.json"):
            assert not write_bits(m / name)
            assert not os.access(m / name, os.W_OK)


def test_getfattr_lists_what_an_array_is(store, tmp_path):
    with mounted(store, tmp_path, "ro") as m:
        out = subprocess.run(["getfattr", "-d", "--absolute-names", str(m / "temperature.bin")],
                             capture_output=True, text=True, check=True).stdout
        found = dict(re.findall(r'^(user\.[\w.]+)="(.*)"$', out, re.M))
        assert set(found) == {"user.zarr.shape", "user.zarr.dtype", "user.zarr.dimension_names",
                              "user.zarr.chunk_shape", "user.zarr.codecs", "user.zarr.attributes",
                              "user.mime_type"}
        assert found["user.mime_type"] == "application/octet-stream"
        value = lambda name: json.loads(os.getxattr(m / "temperature.bin", name))  # noqa: E731
        assert value("user.zarr.shape") == [30, 40]
        assert value("user.zarr.dtype") == "<f4"
        assert value("user.zarr.dimension_names") == ["y", "x"]
        assert value("user.zarr.chunk_shape") == [10, 20]
        assert value("user.zarr.attributes") == {"units": "K"}
        assert [c["name"] for c in value("user.zarr.codecs")] == [c["name"] for c in
                                                                   zarr.open_array(str(store / "temperature")).metadata.to_dict()["codecs"]]
        assert os.getxattr(m / "temperature.json", "user.mime_type") == b"application/json"
        assert json.loads(os.getxattr(m.path, "user.zarr.attributes")) == {"title": "field trip"}
        with pytest.raises(OSError) as e:
            os.getxattr(m / "temperature.bin", "user.other")
        assert e.value.errno == errno.ENODATA
        with pytest.raises(OSError) as e:
            os.setxattr(m / "temperature.bin", "user.zarr.shape", b"[1]")
        assert e.value.errno in (errno.EROFS, errno.EPERM)


def gio_info(path) -> dict[str, str]:
    out = subprocess.run(["gio", "info", str(path)], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"^\s+([\w-]+::[\w.-]+): (.*)$", out, re.M))


def test_gio_offers_only_what_works(store, tmp_path):
    with mounted(store, tmp_path) as m:
        info = gio_info(m / "temperature.bin")
        assert info["standard::content-type"] == "application/octet-stream"
        assert (info["access::can-write"], info["access::can-delete"], info["access::can-rename"]) == \
               ("TRUE", "TRUE", "TRUE")  # rm NAME.bin deletes the array, mv renames it
        assert info["xattr::zarr.shape"] == "[30, 40]"
        assert int(info["standard::allocated-size"]) == os.stat(m / "temperature.bin").st_blocks * 512
        assert gio_info(m / "raw")["access::can-write"] == "TRUE"  # new folders, arrays from .npy files
        assert gio_info(m / "temperature.json")["access::can-write"] == "TRUE"  # its attributes
        assert gio_info(m / "temperature.mhd")["access::can-write"] == "FALSE"


def test_dot_and_dotdot_carry_real_inode_numbers_and_types(store, tmp_path):
    """libfuse sent '.' as inode 0, which glibc drops (`ls -fa` showed no '.'), and '..' as
    0xffffffff of unknown type."""
    with mounted(store, tmp_path, "ro") as m:
        for directory in (m / "raw", m.path):  # (ls shows the root's '..' from outside the mount)
            out = subprocess.run(["ls", "-fai", str(directory)], capture_output=True, text=True, check=True).stdout
            inodes = {name: int(ino) for ino, name in (line.split(None, 1) for line in out.splitlines())}
            assert inodes["."] == os.stat(directory).st_ino
        assert inodes_of(m / "raw")[".."] == (os.stat(m.path).st_ino, DT_DIR)
        assert inodes_of(m.path)["."] == (1, DT_DIR) and inodes_of(m.path)[".."][1] == DT_DIR
        listed = {e.name: e.inode() for e in os.scandir(m.path)}
        assert listed == {name: os.stat(m / name).st_ino for name in listed}
        assert len(set(listed.values())) == len(listed)


DT_DIR = 4


def inodes_of(directory) -> dict:
    """{name: (d_ino, d_type)} as getdents64 returns them, '.' and '..' included."""
    import ctypes
    fd, out = os.open(directory, os.O_RDONLY | os.O_DIRECTORY), {}
    try:
        buf = ctypes.create_string_buffer(1 << 16)
        libc = ctypes.CDLL(None, use_errno=True)
        while (n := libc.syscall(217, fd, buf, len(buf))) > 0:  # SYS_getdents64 on x86-64
            pos = 0
            while pos < n:
                ino = int.from_bytes(buf.raw[pos:pos + 8], "little")
                reclen = int.from_bytes(buf.raw[pos + 16:pos + 18], "little")
                kind, name = buf.raw[pos + 18], buf.raw[pos + 19:pos + reclen].split(b"\0", 1)[0].decode()
                out[name] = (ino, kind)
                pos += reclen
    finally:
        os.close(fd)
    return out
