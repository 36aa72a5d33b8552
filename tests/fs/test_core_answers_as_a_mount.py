"""The core without a mount (tests/core.py) answers each call as a real mount does: the same
calls on a mount and on the core, each over its own copy of one hierarchy, give the same result
or the same errno. What the kernel decides before a request reaches the file system (the walk
to a path, rename's checks, the bounds of extended attributes) the core's caller must decide
too, or a test converted to the core passes where a program on a mount would fail."""

import ctypes
import errno
import io
import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest
import zarr

from core import RENAME_EXCHANGE, RENAME_NOREPLACE, core_of
from helpers import make_store
from mounting import mounted

MiB = 1 << 20
LIBC = ctypes.CDLL(None, use_errno=True)


def rename2(old: str, new: str, flags: int) -> None:
    """renameat2(2), which the os module lacks (mv -n sends RENAME_NOREPLACE)."""
    if LIBC.renameat2(-100, os.fsencode(old), -100, os.fsencode(new), flags):  # -100: AT_FDCWD
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), old)


def read_at(path: str, size: int, offset: int) -> int:
    """How many bytes one pread of a mount's file gives."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return len(os.pread(fd, size, offset))
    finally:
        os.close(fd)


def save(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def truncated_through(path: str, flags: int, length: int) -> None:
    """ftruncate(2) of a descriptor of `path` opened with `flags`."""
    fd = os.open(path, flags)
    try:
        os.ftruncate(fd, length)
    finally:
        os.close(fd)


def sought(path: str, offset: int, whence: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, offset, whence)
    finally:
        os.close(fd)


def opened(path: str, flags: int) -> None:
    os.close(os.open(path, flags))


def opened_in(core, path: str, flags: int) -> None:
    core.close(core.open(path, flags))


def while_saved(path: str, data: bytes, meanwhile):
    """A new file written and, before it is closed, what `meanwhile()` answers."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        return meanwhile()
    finally:
        os.close(fd)


def saved_with_chmod(path: str, data: bytes) -> None:
    """An editor's save: the new file written, its mode set while it is open, then closed."""
    while_saved(path, data, lambda: os.chmod(path, 0o600))


def block_size_while_saved(path: str, data: bytes) -> int:
    """st_blksize of a new file while it is being written (tools size their writes by it)."""
    return while_saved(path, data, lambda: os.stat(path).st_blksize)


def while_saved_in(core, path: str, data: bytes, meanwhile):
    fh = core.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        core.pwrite(fh, data, 0)
        return meanwhile()
    finally:
        core.close(fh)


def block_size_while_saved_in(core, path: str, data: bytes) -> int:
    return while_saved_in(core, path, data, lambda: core.stat(path)["st_blksize"])


def npy(values) -> bytes:
    out = io.BytesIO()
    np.save(out, np.asarray(values, dtype="<i2"))
    return out.getvalue()


def truncated_in(core, path: str, flags: int, length: int) -> None:
    fh = core.open(path, flags)
    try:
        core.ftruncate(fh, length)
    finally:
        core.close(fh)


def sought_in(core, path: str, offset: int, whence: int) -> int:
    fh = core.open(path, os.O_RDONLY)
    try:
        return core.lseek(fh, offset, whence)
    finally:
        core.close(fh)


def saved_with_chmod_in(core, path: str, data: bytes) -> None:
    while_saved_in(core, path, data, lambda: core.chmod(path, 0o600))


def read_in(core, path: str, size: int, offset: int) -> int:
    fh = core.open(path, os.O_RDONLY)
    try:
        return len(core.pread(fh, size, offset))
    finally:
        core.close(fh)


def answer(call) -> object:
    try:
        result = call()
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)
    return result if isinstance(result, (bool, int, type(None))) else "ok"


def on_mount(m) -> dict:
    at = lambda path: str(m) + path  # noqa: E731

    def create(path):
        os.close(os.open(at(path), os.O_WRONLY | os.O_CREAT, 0o644))

    return {
        "stat beneath a file": lambda: os.stat(at("/a.bin/x")),
        "list beneath a file": lambda: os.listdir(at("/a.json/x")),
        "mkdir beneath a file": lambda: os.mkdir(at("/a.bin/x")),
        "create beneath a file": lambda: create("/a.bin/x.npy"),
        "setxattr beneath a missing directory": lambda: os.setxattr(at("/none/a.bin"), "user.zarr.attr.k", b"1"),
        "access beneath a file": lambda: os.access(at("/a.bin/x"), os.R_OK),
        "exists beneath a file": lambda: Path(at("/a.bin/x")).exists(),
        "setxattr of a value too long": lambda: os.setxattr(at("/a.bin"), "user.zarr.attr.k", b"1" * 70_000),
        "setxattr of a name too long": lambda: os.setxattr(at("/a.bin"), "user.zarr.attr." + "k" * 250, b"1"),
        "getxattr of a value too long": lambda: os.getxattr(at("/wide"), "user.zarr.attributes"),
        "open a directory to read": lambda: os.close(os.open(at("/sub"), os.O_RDONLY)),
        "open a directory to write": lambda: os.close(os.open(at("/sub"), os.O_RDWR)),
        "open a directory with O_CREAT": lambda: os.close(os.open(at("/sub"), os.O_RDONLY | os.O_CREAT)),
        "open a file as a directory": lambda: os.close(os.open(at("/a.bin"), os.O_RDONLY | os.O_DIRECTORY)),
        "a read across a corrupt chunk": lambda: read_at(at("/broken.bin"), 3 * MiB, 0),
        "a read from half a chunk before it": lambda: read_at(at("/broken.bin"), 2 * MiB, MiB // 2),
        "a read within it": lambda: read_at(at("/broken.bin"), MiB, MiB),
        "save a file that is no .npy": lambda: save(at("/text.npy"), b"not numpy at all"),
        "mkdir a group in a group": lambda: os.mkdir(at("/sub/inner")),
        "rename onto itself": lambda: os.rename(at("/a.bin"), at("/a.bin")),
        "rename a file onto a directory": lambda: os.rename(at("/a.bin"), at("/sub")),
        "rename a directory onto a file": lambda: os.rename(at("/sub"), at("/a.json")),
        "rename a directory beneath itself": lambda: os.rename(at("/sub"), at("/sub/inner")),
        "rename a directory onto one above it": lambda: os.rename(at("/sub/inner"), at("/sub")),
        "rename -n onto a name that is there": lambda: rename2(at("/a.bin"), at("/a.npy"), RENAME_NOREPLACE),
        "exchange with a name not there": lambda: rename2(at("/a.bin"), at("/b.bin"), RENAME_EXCHANGE),
        **changes_on_mount(at),
    }


def changes_on_mount(at) -> dict:
    """Sizes, modes, owners and times set, links and nodes made, names refused, the store's
    room, holes sought, attributes of missing files."""
    return {
        "truncate NAME.bin to its size": lambda: os.truncate(at("/a.bin"), 16),
        "truncate NAME.bin shorter": lambda: os.truncate(at("/a.bin"), 8),
        "truncate NAME.bin longer": lambda: os.truncate(at("/a.bin"), 32),
        "truncate to a negative length": lambda: os.truncate(at("/a.bin"), -1),
        "truncate a sidecar": lambda: os.truncate(at("/a.json"), 0),
        "truncate a read-only view": lambda: os.truncate(at("/image.tif"), 0),
        "truncate a directory": lambda: os.truncate(at("/sub"), 0),
        "truncate beneath a file": lambda: os.truncate(at("/a.bin/x"), 0),
        "truncate a missing file": lambda: os.truncate(at("/none.bin"), 0),
        "ftruncate a file opened to read": lambda: truncated_through(at("/a.bin"), os.O_RDONLY, 16),
        "ftruncate a file opened to write": lambda: truncated_through(at("/a.bin"), os.O_RDWR, 16),
        "ftruncate it shorter": lambda: truncated_through(at("/a.bin"), os.O_RDWR, 4),
        "chmod a file": lambda: os.chmod(at("/a.bin"), 0o600),
        "chmod a directory": lambda: os.chmod(at("/sub"), 0o700),
        "chmod a missing file": lambda: os.chmod(at("/none.bin"), 0o600),
        "chmod a file being saved": lambda: saved_with_chmod(at("/saved.npy"), npy([1, 2, 3])),
        "block size of a file being saved": lambda: block_size_while_saved(at("/blocks.npy"), npy([4])),
        "chown a file": lambda: os.chown(at("/a.bin"), 1, 1),
        "touch a file": lambda: os.utime(at("/a.bin")),
        "touch a directory": lambda: os.utime(at("/sub")),
        "touch a missing file": lambda: os.utime(at("/none.bin")),
        "symlink": lambda: os.symlink("a.bin", at("/link")),
        "symlink onto a name that is there": lambda: os.symlink("a.bin", at("/a.npy")),
        "link": lambda: os.link(at("/a.bin"), at("/b.bin")),
        "link a directory": lambda: os.link(at("/sub"), at("/sub2")),
        "link a missing file": lambda: os.link(at("/none.bin"), at("/b.bin")),
        "mkfifo": lambda: os.mkfifo(at("/fifo")),
        "mknod a regular file": lambda: os.mknod(at("/plain")),
        "mknod a new .npy": lambda: os.mknod(at("/node.npy")),
        "statvfs's name length": lambda: os.statvfs(at("/")).f_namemax,
        "statvfs's block size": lambda: os.statvfs(at("/")).f_bsize,
        "statvfs's blocks": lambda: os.statvfs(at("/")).f_blocks,
        "seek data": lambda: sought(at("/a.bin"), 0, os.SEEK_DATA),
        "seek a hole": lambda: sought(at("/a.bin"), 4, os.SEEK_HOLE),
        "seek data past the end": lambda: sought(at("/a.bin"), 16, os.SEEK_DATA),
        "seek in a sidecar": lambda: sought(at("/a.json"), 0, os.SEEK_HOLE) > 0,
        "mkdir over a file": lambda: os.mkdir(at("/a.bin")),
        "open a file to read with O_TRUNC": lambda: opened(at("/image.tif"), os.O_RDONLY | os.O_TRUNC),
        "open a directory with O_TRUNC": lambda: opened(at("/sub"), os.O_RDONLY | os.O_TRUNC),
        "rmdir the mount's root": lambda: os.rmdir(at("")),
        "unlink the mount's root": lambda: os.unlink(at("")),
        "unlink a directory": lambda: os.unlink(at("/sub")),
        "unlink a missing file": lambda: os.unlink(at("/none.bin")),
        "rmdir a file": lambda: os.rmdir(at("/a.json")),
        "rmdir a missing directory": lambda: os.rmdir(at("/none")),
        "rename a missing file": lambda: os.rename(at("/none.bin"), at("/b.bin")),
        "getxattr outside user.*": lambda: os.getxattr(at("/a.bin"), "security.selinux"),
        "getxattr of a missing file": lambda: os.getxattr(at("/none.bin"), "security.selinux"),
        "listxattr of a missing file": lambda: os.listxattr(at("/none.bin")),
        "setxattr of a missing file": lambda: os.setxattr(at("/none.bin"), "user.zarr.attr.k", b"1"),
        "removexattr of a missing attribute": lambda: os.removexattr(at("/sub"), "user.zarr.attr.none"),
    }


def changes_on_core(c) -> dict:
    return {
        "truncate NAME.bin to its size": lambda: c.truncate("/a.bin", 16),
        "truncate NAME.bin shorter": lambda: c.truncate("/a.bin", 8),
        "truncate NAME.bin longer": lambda: c.truncate("/a.bin", 32),
        "truncate to a negative length": lambda: c.truncate("/a.bin", -1),
        "truncate a sidecar": lambda: c.truncate("/a.json", 0),
        "truncate a read-only view": lambda: c.truncate("/image.tif", 0),
        "truncate a directory": lambda: c.truncate("/sub", 0),
        "truncate beneath a file": lambda: c.truncate("/a.bin/x", 0),
        "truncate a missing file": lambda: c.truncate("/none.bin", 0),
        "ftruncate a file opened to read": lambda: truncated_in(c, "/a.bin", os.O_RDONLY, 16),
        "ftruncate a file opened to write": lambda: truncated_in(c, "/a.bin", os.O_RDWR, 16),
        "ftruncate it shorter": lambda: truncated_in(c, "/a.bin", os.O_RDWR, 4),
        "chmod a file": lambda: c.chmod("/a.bin", 0o600),
        "chmod a directory": lambda: c.chmod("/sub", 0o700),
        "chmod a missing file": lambda: c.chmod("/none.bin", 0o600),
        "chmod a file being saved": lambda: saved_with_chmod_in(c, "/saved.npy", npy([1, 2, 3])),
        "block size of a file being saved": lambda: block_size_while_saved_in(c, "/blocks.npy", npy([4])),
        "chown a file": lambda: c.chown("/a.bin", 1, 1),
        "touch a file": lambda: c.utime("/a.bin"),
        "touch a directory": lambda: c.utime("/sub"),
        "touch a missing file": lambda: c.utime("/none.bin"),
        "symlink": lambda: c.symlink("a.bin", "/link"),
        "symlink onto a name that is there": lambda: c.symlink("a.bin", "/a.npy"),
        "link": lambda: c.link("/a.bin", "/b.bin"),
        "link a directory": lambda: c.link("/sub", "/sub2"),
        "link a missing file": lambda: c.link("/none.bin", "/b.bin"),
        "mkfifo": lambda: c.mknod("/fifo", stat.S_IFIFO | 0o600),
        "mknod a regular file": lambda: c.mknod("/plain"),
        "mknod a new .npy": lambda: c.mknod("/node.npy"),
        "statvfs's name length": lambda: c.statvfs()["f_namemax"],
        "statvfs's block size": lambda: c.statvfs()["f_bsize"],
        "statvfs's blocks": lambda: c.statvfs()["f_blocks"],
        "seek data": lambda: sought_in(c, "/a.bin", 0, os.SEEK_DATA),
        "seek a hole": lambda: sought_in(c, "/a.bin", 4, os.SEEK_HOLE),
        "seek data past the end": lambda: sought_in(c, "/a.bin", 16, os.SEEK_DATA),
        "seek in a sidecar": lambda: sought_in(c, "/a.json", 0, os.SEEK_HOLE) > 0,
        "mkdir over a file": lambda: c.mkdir("/a.bin"),
        "open a file to read with O_TRUNC": lambda: opened_in(c, "/image.tif", os.O_RDONLY | os.O_TRUNC),
        "open a directory with O_TRUNC": lambda: opened_in(c, "/sub", os.O_RDONLY | os.O_TRUNC),
        "rmdir the mount's root": lambda: c.rmdir("/"),
        "unlink the mount's root": lambda: c.unlink("/"),
        "unlink a directory": lambda: c.unlink("/sub"),
        "unlink a missing file": lambda: c.unlink("/none.bin"),
        "rmdir a file": lambda: c.rmdir("/a.json"),
        "rmdir a missing directory": lambda: c.rmdir("/none"),
        "rename a missing file": lambda: c.rename("/none.bin", "/b.bin"),
        "getxattr outside user.*": lambda: c.getxattr("/a.bin", "security.selinux"),
        "getxattr of a missing file": lambda: c.getxattr("/none.bin", "security.selinux"),
        "listxattr of a missing file": lambda: c.listxattr("/none.bin"),
        "setxattr of a missing file": lambda: c.setxattr("/none.bin", "user.zarr.attr.k", b"1"),
        "removexattr of a missing attribute": lambda: c.removexattr("/sub", "user.zarr.attr.none"),
    }


def on_core(c) -> dict:
    def create(path):
        c.close(c.open(path, os.O_WRONLY | os.O_CREAT))

    return {
        "stat beneath a file": lambda: c.stat("/a.bin/x"),
        "list beneath a file": lambda: c.listdir("/a.json/x"),
        "mkdir beneath a file": lambda: c.mkdir("/a.bin/x"),
        "create beneath a file": lambda: create("/a.bin/x.npy"),
        "setxattr beneath a missing directory": lambda: c.setxattr("/none/a.bin", "user.zarr.attr.k", b"1"),
        "access beneath a file": lambda: c.access("/a.bin/x", os.R_OK),
        "exists beneath a file": lambda: c.exists("/a.bin/x"),
        "setxattr of a value too long": lambda: c.setxattr("/a.bin", "user.zarr.attr.k", b"1" * 70_000),
        "setxattr of a name too long": lambda: c.setxattr("/a.bin", "user.zarr.attr." + "k" * 250, b"1"),
        "getxattr of a value too long": lambda: c.getxattr("/wide", "user.zarr.attributes"),
        "open a directory to read": lambda: c.close(c.open("/sub", os.O_RDONLY)),
        "open a directory to write": lambda: c.close(c.open("/sub", os.O_RDWR)),
        "open a directory with O_CREAT": lambda: c.close(c.open("/sub", os.O_RDONLY | os.O_CREAT)),
        "open a file as a directory": lambda: c.close(c.open("/a.bin", os.O_RDONLY | os.O_DIRECTORY)),
        "a read across a corrupt chunk": lambda: read_in(c, "/broken.bin", 3 * MiB, 0),
        "a read from half a chunk before it": lambda: read_in(c, "/broken.bin", 2 * MiB, MiB // 2),
        "a read within it": lambda: read_in(c, "/broken.bin", MiB, MiB),
        "save a file that is no .npy": lambda: c.write("/text.npy", b"not numpy at all"),
        "mkdir a group in a group": lambda: c.mkdir("/sub/inner"),
        "rename onto itself": lambda: c.rename("/a.bin", "/a.bin"),
        "rename a file onto a directory": lambda: c.rename("/a.bin", "/sub"),
        "rename a directory onto a file": lambda: c.rename("/sub", "/a.json"),
        "rename a directory beneath itself": lambda: c.rename("/sub", "/sub/inner"),
        "rename a directory onto one above it": lambda: c.rename("/sub/inner", "/sub"),
        "rename -n onto a name that is there": lambda: c.rename("/a.bin", "/a.npy", RENAME_NOREPLACE),
        "exchange with a name not there": lambda: c.rename("/a.bin", "/b.bin", RENAME_EXCHANGE),
        **changes_on_core(c),
    }


def hierarchy(root):
    """make_store's, a group whose attributes are more than an extended attribute holds, an
    array of three 1 MiB chunks whose second is corrupt, and a 2-D array (its NAME.tif is a
    view none of whose bytes may be written)."""
    make_store(root)
    zarr.create_array(str(root / "image"), shape=(2, 3), chunks=(2, 3), dtype="u1")[...] = 1
    zarr.open_group(str(root / "wide"), mode="w").attrs["notes"] = "n" * 70_000
    broken = zarr.create_array(str(root / "broken"), shape=(3 * MiB,), chunks=(MiB,), dtype="u1",
                               compressors=zarr.codecs.GzipCodec())
    broken[...] = 5
    (root / "broken" / "c" / "1").write_bytes(b"not gzip" * 100)
    return root


def test_the_core_answers_every_call_as_a_mount_does(tmp_path):
    with mounted(hierarchy(tmp_path / "mounted.zarr"), tmp_path) as m:
        mount_answers = {name: answer(call) for name, call in on_mount(m.path).items()}
        mount_lines = lines_naming("/text.npy", m.settled_log())
    with core_of(hierarchy(tmp_path / "core.zarr"), tmp_path) as c:
        core_answers = {name: answer(call) for name, call in on_core(c).items()}
        core_lines = lines_naming("/text.npy", c.log())
    assert core_answers == mount_answers
    assert core_lines == mount_lines and mount_lines  # the log lines of a refused file name it alike
    assert stored(tmp_path / "core.zarr") == stored(tmp_path / "mounted.zarr")


PLACES = ("/a.bin", "/image.tif", "/a.mhd", "/zarr.h5", "/a.json", "/zarr.json", "/sub", "/a.bin/x", "/none")
MODES = {"F_OK": os.F_OK, "R_OK": os.R_OK, "W_OK": os.W_OK, "X_OK": os.X_OK, "RWX": os.R_OK | os.W_OK | os.X_OK}


def accesses(access) -> dict:
    """access(2) of each place in each mode, through `access(path, mode)`."""
    return {f"access {mode} {place}": (lambda place=place, bits=bits: access(place, bits))
            for place in PLACES for mode, bits in MODES.items()}


@pytest.mark.parametrize("option", ["ro", "default_permissions"])
def test_the_core_answers_as_a_mount_with_its_options(tmp_path, option):
    """What the kernel decides itself under a mount's options: on a read-only mount it refuses
    every change (EROFS) before the file system is asked; with default_permissions it answers
    access(2) from the modes shown (so root may write a read-only view or header), never asking."""
    with mounted(hierarchy(tmp_path / "mounted.zarr"), tmp_path, option) as m:
        at = lambda path: str(m.path) + path  # noqa: E731
        calls = {**accesses(lambda path, mode: os.access(at(path), mode)), **changes_on_mount(at)}
        mount_answers = {name: answer(call) for name, call in calls.items()}
    with core_of(hierarchy(tmp_path / "core.zarr"), tmp_path, option) as c:
        calls = {**accesses(c.access), **changes_on_core(c)}
        core_answers = {name: answer(call) for name, call in calls.items()}
    assert core_answers == mount_answers
    assert stored(tmp_path / "core.zarr") == stored(tmp_path / "mounted.zarr")


def lines_naming(path: str, log: str) -> list[str]:
    """The log's lines naming `path`, without the daemon's prefix (its name and process id)."""
    return [re.sub(r"^zarrfs\[\d+\] ", "", line) for line in log.splitlines() if path in line]


def stored(root) -> list:
    """Every stored file, by its path below `root`: the calls changed the store alike."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
