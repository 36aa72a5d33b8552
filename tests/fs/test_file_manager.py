"""What file managers and shells ask besides the bytes: free space (statfs), permissions and
access checks that tell the truth, and read-only extended attributes that say what an array is.

Modes, access and attributes as the file system answers them are asked of the core without a
mount (core.py); what GIO, df, xdg-mime and getdents show goes through a mount."""

import errno
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from core import core_of
from mounting import mounted
from session_bus import SessionBus, home_trash, session_env


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
    out = subprocess.run(["gio", "info", "-f", str(path)], capture_output=True, text=True, check=True, timeout=60).stdout
    return dict(re.findall(r"^\s+filesystem::(\w+): (.*)$", out, re.M))


def test_statfs_block_sizes_agree_so_gio_df_and_stat_agree(store, tmp_path):
    with mounted(store, tmp_path) as m:
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


def test_a_read_only_mount_has_no_room(store, tmp_path):
    """Nothing can be written to it, so it shows no size and nothing free (df: 0 and 0; GIO, and
    so Thunar, shows no free space for a FUSE mount with none), not the disk beneath's."""
    with mounted(store, tmp_path, "ro") as m:
        mine, theirs = os.statvfs(m.path), os.statvfs(store)
        assert theirs.f_bavail > 0 and theirs.f_blocks > 0  # the disk beneath has room: the mount must not say so
        assert (mine.f_blocks, mine.f_bfree, mine.f_bavail, mine.f_ffree, mine.f_favail) == (0, 0, 0, 0, 0)
        assert mine.f_bsize == mine.f_frsize == theirs.f_frsize
        shown = gio_filesystem(m.path)
        assert shown["readonly"] == "TRUE" and "free" not in shown and "size" not in shown
        df = subprocess.run(["df", "-B1", "--output=size,avail", str(m.path)], capture_output=True, text=True,
                            check=True).stdout.split()
        assert df[-2:] == ["0", "0"]
    with mounted(store, tmp_path, name="rw") as m:  # a writable mount says what there is
        assert os.statvfs(m.path).f_bavail > 0 and "free" in gio_filesystem(m.path)


def write_bits(core, path) -> int:
    return core.stat(path)["st_mode"] & 0o222


def test_modes_and_access_tell_what_works_on_a_writable_mount(store, tmp_path):
    with core_of(store, tmp_path) as c:
        for directory in ("/", "/raw"):  # groups: entries are created, deleted and renamed
            assert stat.S_ISDIR(c.stat(directory)["st_mode"]) and write_bits(c, directory)
            assert c.access(directory, os.R_OK | os.W_OK | os.X_OK)
        for name in ("/temperature.bin", "/temperature.json", "/zarr.json"):  # data, attributes
            assert write_bits(c, name) and c.access(name, os.W_OK)
        for name in ("/temperature.mhd",):
            assert not write_bits(c, name) and not c.access(name, os.W_OK)
            assert c.access(name, os.R_OK)
        assert not c.access("/temperature.bin", os.X_OK)
        with pytest.raises(PermissionError):
            c.write("/new.bin", b"")  # arrays are made from .npy files and sidecars
        with pytest.raises(OSError) as raised:
            c.rename("/temperature.bin", "/t.json")  # a rename keeps the suffix
        assert raised.value.errno == errno.EINVAL


def test_a_read_only_mount_shows_no_write_bits(store, tmp_path):
    with core_of(store, tmp_path, "ro") as c:
        for name in ("/", "/raw", "/temperature.bin", "/temperature.npy", "/temperature.json"):
            assert not write_bits(c, name)
            assert not c.access(name, os.W_OK)


def test_getfattr_lists_what_an_array_is(store, tmp_path):
    with core_of(store, tmp_path, "ro") as c:
        found = {name: c.getxattr("/temperature.bin", name).decode() for name in c.listxattr("/temperature.bin")}
        assert set(found) == {"user.zarr.shape", "user.zarr.dtype", "user.zarr.dimension_names",
                              "user.zarr.chunk_shape", "user.zarr.codecs", "user.zarr.attributes",
                              "user.mime_type"}
        assert found["user.mime_type"] == "application/x-zarrfs-raw"
        value = lambda name: json.loads(c.getxattr("/temperature.bin", name))  # noqa: E731
        assert value("user.zarr.shape") == [30, 40]
        assert value("user.zarr.dtype") == "<f4"
        assert value("user.zarr.dimension_names") == ["y", "x"]
        assert value("user.zarr.chunk_shape") == [10, 20]
        assert value("user.zarr.attributes") == {"units": "K"}
        assert [c["name"] for c in value("user.zarr.codecs")] == [c["name"] for c in
                                                                   zarr.open_array(str(store / "temperature")).metadata.to_dict()["codecs"]]
        assert c.getxattr("/temperature.json", "user.mime_type") == b"application/json"
        assert json.loads(c.getxattr("/", "user.zarr.attributes")) == {"title": "field trip"}
        with pytest.raises(OSError) as e:
            c.getxattr("/temperature.bin", "user.other")
        assert e.value.errno == errno.ENODATA
        with pytest.raises(OSError) as e:
            c.setxattr("/temperature.bin", "user.zarr.shape", b"[1]")
        assert e.value.errno in (errno.EROFS, errno.EPERM)


MIME_PACKAGE = Path(__file__).parents[2] / "share/mime/packages/zarrfs.xml"


@pytest.fixture(scope="module")
def mime_env(tmp_path_factory) -> dict:
    """The environment of a desktop session with zarrfs's MIME package installed (as scripts/setup
    does in /usr/local/share/mime), in a directory of the test's own."""
    home = tmp_path_factory.mktemp("xdg")
    (home / "mime" / "packages").mkdir(parents=True)
    shutil.copy(MIME_PACKAGE, home / "mime" / "packages")
    subprocess.run(["update-mime-database", str(home / "mime")], check=True, capture_output=True)
    return {**os.environ, "XDG_DATA_HOME": str(home)}


def gio_info(path, env=None) -> dict[str, str]:
    out = subprocess.run(["gio", "info", str(path)], capture_output=True, text=True, check=True, env=env,
                         timeout=60).stdout  # gvfsd-trash may look at every mount on the machine: bounded
    return dict(re.findall(r"^\s+([\w-]+::[\w.-]+): (.*)$", out, re.M))


def test_gio_offers_only_what_works(store, tmp_path, mime_env):
    with mounted(store, tmp_path) as m:
        info = gio_info(m / "temperature.bin", mime_env)
        assert info["standard::content-type"] == "application/x-zarrfs-raw"
        assert (info["access::can-write"], info["access::can-delete"], info["access::can-rename"]) == \
               ("TRUE", "TRUE", "TRUE")  # rm of all its files deletes the array, mv renames it
        assert info["xattr::zarr.shape"] == "[30, 40]"
        assert int(info["standard::allocated-size"]) == os.stat(m / "temperature.bin").st_blocks * 512
        assert gio_info(m / "raw")["access::can-write"] == "TRUE"  # new folders, arrays from .npy files
        assert gio_info(m / "temperature.json")["access::can-write"] == "TRUE"  # its attributes
        assert gio_info(m / "temperature.mhd")["access::can-write"] == "FALSE"


def test_no_trash_so_file_managers_delete_a_folder_file_by_file(store, tmp_path):
    """GIO said access::can-trash TRUE; Thunar (with gvfs) then trashed a folder, the trash
    could not be made (mkdir .Trash-0 refused), and its fallback removed the folder with one
    rmdir: "Directory not empty". A file .Trash-UID at the root, never listed, says there is no
    trash: can-trash is FALSE, so Thunar and Nautilus ask to delete permanently and delete file
    by file, and g_file_trash fails at once, trying no mkdir."""
    with mounted(store, tmp_path) as m:
        for path in (m / "temperature.bin", m / "raw", m / "zarr.json"):
            info = gio_info(path)
            assert (info["access::can-trash"], info["access::can-delete"]) == ("FALSE", "TRUE"), path
        trashed = subprocess.run(["gio", "trash", str(m / "raw")], capture_output=True, text=True, timeout=60)
        assert trashed.returncode != 0 and "trash directory" in trashed.stderr and (m / "raw").is_dir()
        marker = m / f".Trash-{os.getuid()}"
        assert stat.S_ISREG(os.stat(marker).st_mode) and not os.stat(marker).st_mode & 0o222
        assert "no trash" in marker.read_text().lower() and marker.name not in os.listdir(m.path)
        assert not (store / marker.name).exists() and "mkdir" not in m.log()


def test_with_gvfs_running_there_is_no_trash_either(store, tmp_path):
    """As on an XFCE or LXDE desktop: gvfs in the session (gvfsd, started by the session's bus,
    and its trash backend, which looks for .Trash and .Trash-UID on every mount). GIO still
    trashes a local file with GLib's own code, and gvfsd-trash finds only a file where a trash
    folder would be: the same answers as without gvfs, nothing listed in trash:///, and nothing
    made, in the mount or the home's trash."""
    env = session_env(tmp_path / "session")
    bus = SessionBus(env, tmp_path / "bus.log")
    try:
        env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        with mounted(store, tmp_path) as m:
            trash = gio_info("trash:///", env)  # starts gvfsd, which starts gvfsd-trash: gvfs answers here
            assert trash["trash::item-count"] == "0" and "gvfsd-trash" in bus.members().values()
            for path in (m / "temperature.bin", m / "raw", m / "zarr.json"):
                info = gio_info(path, env)
                assert (info["access::can-trash"], info["access::can-delete"]) == ("FALSE", "TRUE"), path
            trashed = subprocess.run(["gio", "trash", str(m / "raw")], capture_output=True, text=True, env=env, timeout=60)
            assert trashed.returncode != 0 and "trash directory" in trashed.stderr and (m / "raw").is_dir()
            listed = subprocess.run(["gio", "list", "trash:///"], capture_output=True, text=True, env=env, check=True,
                                    timeout=60)
            assert listed.stdout == ""
            assert "mkdir" not in m.log() and not list(store.glob(".Trash*"))
        assert home_trash(env) == []
    finally:
        bus.close()


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


LOOKALIKES = {  # first bytes that GLib's sniffing took for a type a double click runs or shows
    "matlab": b"% a comment\nfid=fopen('OCTAVE_RAN','w');\n",
    "text": b"just some words, as text\n",
    "icon": b"\x00\x00\x01\x00\x01\x00\x10\x10",  # a uint16 ramp 0, 1, ... starts like a Windows icon
    "script": b"#!/bin/sh\ntouch RAN\n",
    "elf": b"\x7fELF\x02\x01\x01\x00" + bytes(8) + b"\x02\x00\x3e\x00",
}


@pytest.fixture(scope="module")
def lookalikes(tmp_path_factory):
    root = tmp_path_factory.mktemp("look") / "store"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for name, data in LOOKALIKES.items():
        array = group.create_array(name, shape=(64,), chunks=(64,), dtype="uint8")
        array[...] = np.frombuffer(data.ljust(64, b"\n"), dtype="uint8")
    return root


def test_data_files_have_one_certain_type_whatever_their_bytes(lookalikes, tmp_path, mime_env):
    """With zarrfs's MIME package, NAME.bin is raw data and NAME.npy a NumPy array by their names:
    GIO and xdg-mime read no byte, so no array is taken for a script, a text or an icon."""
    with mounted(lookalikes, tmp_path, "ro") as m:
        for name in LOOKALIKES:
            assert (m / f"{name}.bin").read_bytes().startswith(LOOKALIKES[name])
            assert gio_info(m / f"{name}.bin", mime_env)["standard::content-type"] == "application/x-zarrfs-raw"
            assert gio_info(m / f"{name}.npy", mime_env)["standard::content-type"] == "application/x-npy"
            for file, expected in ((f"{name}.bin", "application/x-zarrfs-raw"), (f"{name}.npy", "application/x-npy")):
                out = subprocess.run(["xdg-mime", "query", "filetype", str(m / file)], capture_output=True,
                                     text=True, check=True, env=mime_env).stdout.strip()
                assert out == expected
        assert os.getxattr(m / "elf.npy", "user.mime_type") == b"application/x-npy"
        parents = subprocess.run(["gio", "mime", "application/x-zarrfs-raw"], capture_output=True, text=True,
                                 env=mime_env).stdout
        assert "octave" not in parents.lower()


def test_without_the_package_glib_sniffs_the_bytes(lookalikes, tmp_path):
    """What the package is for: GLib alone takes an array of bytes for MATLAB code and others."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "none"), "XDG_DATA_DIRS": "/usr/share"}
    with mounted(lookalikes, tmp_path, "ro") as m:
        assert gio_info(m / "matlab.bin", env)["standard::content-type"] == "text/x-matlab"


def test_gio_types_group_files_as_hdf_at_first_sight(store, tmp_path):
    """Before anything opened them: GIO types an empty file text/plain, so zarr.h5 listed as 0
    bytes opened in a text editor (issue 40); at its true size GIO goes by its name."""
    with mounted(store, tmp_path, "ro") as m:
        for path in (m / "zarr.h5", m / "raw" / "zarr.h5"):
            info = gio_info(path)
            assert info["standard::content-type"] == "application/x-hdf", path  # shared-mime-info's name
            assert int(info["standard::size"]) == len(path.read_bytes()) > 0
        assert gio_info(m / "zarr.nc")["standard::content-type"] == "application/x-netcdf"
