"""The core without a mount (tests/core.py) answers each call as a real mount does: the same
calls on a mount and on the core, each over its own copy of one hierarchy, give the same result
or the same errno. What the kernel decides before a request reaches the file system (the walk
to a path, rename's checks, the bounds of extended attributes) the core's caller must decide
too, or a test converted to the core passes where a program on a mount would fail."""

import ctypes
import errno
import os
import re
from pathlib import Path

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
    }


def hierarchy(root):
    """make_store's, a group whose attributes are more than an extended attribute holds, and
    an array of three 1 MiB chunks whose second is corrupt."""
    make_store(root)
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


def lines_naming(path: str, log: str) -> list[str]:
    """The log's lines naming `path`, without the daemon's prefix (its name and process id)."""
    return [re.sub(r"^zarrfs\[\d+\] ", "", line) for line in log.splitlines() if path in line]


def stored(root) -> list:
    """Every stored file, by its path below `root`: the calls changed the store alike."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
