"""Store keys resolved strictly beneath a store's root directory, whatever the store holds.

Every open goes through a descriptor of the root: `openat2(RESOLVE_BENEATH)` where the kernel
has it (Linux 5.6+), so symlinks are followed only while they stay below the root and `..`
never climbs out; elsewhere each component is opened with O_NOFOLLOW, so no symlink is followed
at all. A key is '/'-separated names: empty names, `.`, `..`, NUL and absolute keys are refused
before the file system is asked. A name is any bytes, held as os.fsdecode's str (names.py).

A trusted store may share chunks through symlinks that lead out of it (-o symlinks=follow):
then a read that would leave the root is resolved wherever it leads (_open_outside), though
never to a FIFO, socket or device, nor to anything under /proc, /sys or /dev. Writes stay
beneath the root whatever the option: a value is written by renaming a new file over its name,
which replaces a link to a shared chunk and leaves the chunk as it is.
"""

import ctypes
import errno
import os
import stat
import weakref
from collections.abc import Callable

from zarrfs.errors import StoreError

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "riscv64": 437, "ppc64le": 437, "s390x": 437}.get(os.uname().machine)
_RESOLVE_NO_MAGICLINKS = 0x02  # /proc/self/fd/N style links
_RESOLVE_BENEATH = 0x08
_ESCAPES = (errno.EXDEV, errno.EAGAIN)  # EAGAIN: openat2 asks for a retry when a rename raced it
NEVER_FOLLOWED_INTO = ("/proc", "/sys", "/dev")  # kernel interfaces and devices: no data of a store
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def never_followed_into(path: str) -> str | None:
    """The one of NEVER_FOLLOWED_INTO that real path `path` lies in, None for none."""
    return next((top for top in NEVER_FOLLOWED_INTO if path == top or path.startswith(top + "/")), None)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_syscall() -> Callable[..., int] | None:
    """libc's syscall(2), for openat2 (which the os module has no call for); None without it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    return syscall


_syscall = _load_syscall() if _SYS_OPENAT2 else None


def key_parts(key: str) -> list[str]:
    """The names of a key; [] for the root. Raises StoreError for a key that could leave the store."""
    if not isinstance(key, str):
        raise StoreError(f"store key {key!r} is not a string", errno.EINVAL)
    if key == "":
        return []
    parts = key.split("/")
    if key.startswith("/") or "\0" in key or any(p in ("", ".", "..") for p in parts):
        raise StoreError(f"store key {key!r} is not a plain relative path (no '..', '.', empty names or "
                         f"leading '/')", errno.EINVAL)
    return parts


class Beneath:
    """Opens paths below one root directory and nowhere else. It holds a descriptor of the root
    until close(), or until it is let go: a process that opens and drops stores (the Python
    API's open_raw, an Icechunk store's spill, a test run) keeps no descriptor per store."""

    def __init__(self, root: str, follow_symlinks: bool = False):
        self.root = root
        self.follow_symlinks = follow_symlinks  # reads only: see the module's docstring
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._release = weakref.finalize(self, os.close, self.root_fd)
        self.openat2 = _syscall is not None and self._probe_openat2()

    def close(self) -> None:
        """The root's descriptor let go; an open after it is EBADF, never an open beneath
        whatever directory reuses the descriptor's number."""
        self._release()  # once: a second close, and the finalizer after it, do nothing
        self.root_fd = -1

    def _probe_openat2(self) -> bool:
        try:
            os.close(self._openat2(".", os.O_PATH | os.O_DIRECTORY))
            return True
        except OSError:  # ENOSYS (old kernel), EPERM (a seccomp filter)...
            return False

    def open(self, key: str, flags: int, mode: int = 0o666, reading: bool = False) -> int:
        """A descriptor for `key`, opened with `flags`; OSError as the kernel gives it, EACCES for
        a path that would leave the root, unless symlinks are followed and this is `reading`
        (never a directory opened to write in, nor flags that write)."""
        parts = key_parts(key)
        flags |= os.O_CLOEXEC
        if not parts:
            return os.open(".", flags & ~os.O_CREAT, dir_fd=self.root_fd)
        try:
            if self.openat2:
                return self._openat2("/".join(parts), flags, mode)
            return self._walk(parts, flags, mode)
        except OSError as e:
            if e.errno not in _ESCAPES:
                raise
            if reading and self.follow_symlinks and not flags & _WRITING:
                return self._open_outside(key, flags)
            raise OSError(errno.EACCES, f"{key!r} leads outside the store (a symlink or a race)") from None

    def _open_outside(self, key: str, flags: int) -> int:
        """`key` opened for reading wherever its symlinks lead, but only to a regular file or a
        directory outside /proc, /sys and /dev; EACCES otherwise. The target is looked at
        before it is opened (opening a FIFO blocks, opening a device can act on it), and the
        file opened must be the one looked at."""
        target = os.path.realpath(os.path.join(self.root, key), strict=True)  # ELOOP, FileNotFoundError as is
        refused = never_followed_into(target)
        if refused:
            raise OSError(errno.EACCES, f"{key!r} leads to {target}: nothing under {refused} is followed")
        looked = os.stat(target, follow_symlinks=False)
        if not (stat.S_ISREG(looked.st_mode) or stat.S_ISDIR(looked.st_mode)):
            raise OSError(errno.EACCES, f"{key!r} leads to {target}, not a regular file or directory (a FIFO, "
                                        f"socket or device): not followed")
        fd = os.open(target, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (looked.st_dev, looked.st_ino):
            os.close(fd)
            raise OSError(errno.EACCES, f"{key!r}: {target} changed while it was opened")
        return fd

    def _openat2(self, path: str, flags: int, mode: int = 0) -> int:
        how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        # a key's names are the str os.fsdecode made of their bytes (names.py): give back the bytes
        if _syscall is None:  # an architecture without openat2, or no libc: _probe_openat2 says False
            raise OSError(errno.ENOSYS, "openat2 is not available here", path)
        fd = _syscall(_SYS_OPENAT2, self.root_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return fd

    def _walk(self, parts: list[str], flags: int, mode: int) -> int:
        """Without openat2: one component at a time, never following a symlink."""
        directory = self.root_fd
        try:
            for name in parts[:-1]:
                fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
                if directory != self.root_fd:
                    os.close(directory)
                directory = fd
            return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=directory)
        except OSError as e:
            if e.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink: treated as leaving the store
                raise OSError(errno.EXDEV, "symlink") from None
            raise
        finally:
            if directory != self.root_fd:
                os.close(directory)

    def open_directory(self, key: str, create: bool = False) -> int:
        """A readable descriptor of the directory `key`, made (with its parents) when asked."""
        try:
            return self.open(key, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            if not create:
                raise
        parts = key_parts(key)
        parent = self.open_directory("/".join(parts[:-1]), create=True)
        try:
            os.mkdir(parts[-1], 0o777, dir_fd=parent)
        except FileExistsError:
            pass
        finally:
            os.close(parent)
        return self.open(key, os.O_RDONLY | os.O_DIRECTORY)

    def open_regular(self, key: str) -> int:
        """A descriptor for reading the regular file `key`. Never blocks on a FIFO or a device:
        anything that is not a regular file (a directory too) is refused with EIO."""
        fd = self.open(key, os.O_RDONLY | os.O_NONBLOCK, reading=True)
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
                raise OSError(errno.EIO, f"is {kind}, not a regular file")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def stat(self, key: str) -> os.stat_result:
        """The stat of `key`, following symlinks only while they stay inside; never opens the file."""
        fd = self.open(key, os.O_PATH, reading=True)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)
