"""The file system core without a mount, asked as programs ask a mount: paths in, bytes and names
out, and OSError with the errno the kernel would pass on (given by fs/errno_answers.py, as the
FUSE adapter's boundary gives it), the core's log lines kept as a daemon's log.

For tests whose subject is the file system's behaviour (attributes, listings, bytes read and
written, extended attributes, errnos, hierarchy edits): no daemon to start, so no second of
start-up each. What the kernel decides before a request reaches the file system is decided here
too (the walk and lookup of a path, a read-only mount's EROFS, rename's and link's checks, the
bounds of extended attributes, access(2) from the modes under default_permissions), and a read
is answered as the adapter answers it (from stored files where the core gives their ranges).
What only the kernel shows (its page cache, mmap, the permissions it enforces on other
requests, readiness, signals, real tools such as cp, rsync or gio) stays with mounting.py."""

import contextlib
import errno
import io
import logging
import os
import stat

from mounting import private_places
from zarrfs.cli.command import parse_options
from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.fs.errno_answers import errno_of
from zarrfs.fs.filesystem import BLKSIZE, FileSystem

RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
XATTR_NAME_MAX, XATTR_SIZE_MAX = 255, 65536  # the kernel's bounds of extended attributes (linux/limits.h)


def _is_root(path: str) -> bool:
    return not path.strip("/")


def refused(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class Core:
    """`fs` (a started FileSystem) through calls shaped like the os module's, each answering as
    the kernel would: the requests a mount gets for that call, in its order."""

    def __init__(self, fs: FileSystem, log: io.StringIO, fuse_options: dict | None = None):
        self.fs, self._log = fs, log
        # the kernel checks the modes shown itself, and asks the file system no ACCESS
        self._default_permissions = "default_permissions" in (fuse_options or {})
        self._directories: list[int] = []  # handles of directories opened (negative: never the core's)
        self._writable: set[int] = set()  # handles opened for writing: ftruncate of another is EINVAL
        # the path each file was opened by: what libfuse gives WRITE, FLUSH, FSYNC and RELEASE,
        # and the adapter's boundary names in their log lines (a file being written has no node)
        self._paths: dict[int, str] = {}

    def log(self) -> str:
        """What the core logged so far, one line per record, as a daemon's log has it."""
        return self._log.getvalue()

    def _ask(self, request: str, subject: str, method, *args):
        try:
            return method(*args)
        except Exception as e:
            code = errno_of(e, request, subject)
            raise OSError(code, os.strerror(code), subject) from None

    def _walk(self, path: str) -> None:
        """The kernel's path walk: every directory above `path` is looked up first, so that a
        name beneath a file is ENOTDIR (and beneath a missing name ENOENT) before any request
        about `path` itself is sent."""
        above = ""
        for part in path.strip("/").split("/")[:-1]:
            above += "/" + part
            if not stat.S_ISDIR(self._ask("getattr", above, self.fs.getattr, above)["st_mode"]):
                raise refused(errno.ENOTDIR, path)

    def _at(self, request: str, path: str, method, *args):
        """A request about `path`, after the walk to it."""
        self._walk(path)
        return self._ask(request, path, method, *args)

    # metadata

    def stat(self, path: str) -> dict:
        return self._at("getattr", path, self.fs.getattr, path)

    def exists(self, path: str) -> bool:
        """As pathlib's exists: False for the errnos that say there is no such file, other errors raised."""
        try:
            self.stat(path)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
                raise
            return False
        return True

    def access(self, path: str, mode: int) -> bool:
        """os.access, as the kernel answers it: with default_permissions from the modes the file
        shows (generic_permission), without it by asking the file system (ACCESS)."""
        try:
            if self._default_permissions:
                return permitted(self.stat(path), mode, self.fs.options.read_only)
            self._at("access", path, self.fs.access, path, mode)
        except OSError:
            return False
        return True

    def statvfs(self) -> dict:
        """The mount's statvfs: its FileSystemStats record (f_flag and f_fsid are the kernel's)."""
        return self._ask("statfs", "/", self.fs.statfs)

    # attributes changed (SETATTR, which libfuse hands to chmod, chown, truncate and utimens)

    def _changed(self, path: str) -> None:
        """What the kernel refuses before a change of `path` reaches the file system: a
        read-only mount (mnt_want_write's EROFS)."""
        if self.fs.options.read_only:
            raise refused(errno.EROFS, path)

    def truncate(self, path: str, length: int) -> None:
        """truncate(2): a directory is EISDIR and a negative length EINVAL (vfs_truncate) before
        the size is sent, with no file handle."""
        if length < 0:
            raise refused(errno.EINVAL, path)
        if stat.S_ISDIR(self.stat(path)["st_mode"]):
            raise refused(errno.EISDIR, path)
        self._changed(path)
        self._ask("truncate", path, self.fs.truncate, path, length, None)

    def ftruncate(self, fh: int, length: int) -> None:
        """ftruncate(2): of a file opened for writing only (else EINVAL). libfuse passes the
        handle, but mfusepy hands the adapter's truncate only the file's path."""
        if length < 0 or fh not in self._writable:
            raise refused(errno.EINVAL, f"file handle {fh}")
        path = self._path_of(fh)
        self._ask("truncate", path, self.fs.truncate, path, length, None)

    def chmod(self, path: str, mode: int) -> None:
        self.stat(path)
        self._changed(path)
        self._ask("chmod", path, self.fs.change_owner_or_mode, path)

    def chown(self, path: str, uid: int, gid: int) -> None:
        self.stat(path)
        self._changed(path)
        self._ask("chown", path, self.fs.change_owner_or_mode, path)

    def utime(self, path: str) -> None:
        """os.utime(path): both times now."""
        self.stat(path)
        self._changed(path)
        self._ask("utimens", path, self.fs.utimens, path)

    # what cannot be made here: the kernel's checks first, as for any new name

    def _new_name(self, path: str) -> None:
        """A name to be made: the walk to it, EEXIST where there is one, EROFS on a read-only mount."""
        self._walk(path)
        if self._lookup(path) is not None:
            raise refused(errno.EEXIST, path)
        self._changed(path)

    def symlink(self, target: str, path: str) -> None:
        self._new_name(path)
        self._ask("symlink", path, self.fs.refuse_change, path)

    def link(self, existing: str, path: str) -> None:
        """link(2): the file linked must be there, and a directory is never linked (EPERM)."""
        is_dir = stat.S_ISDIR(self.stat(existing)["st_mode"])
        self._new_name(path)
        if is_dir:
            raise refused(errno.EPERM, existing)
        self._ask("link", path, self.fs.refuse_change, path)

    def mknod(self, path: str, mode: int = 0o600) -> None:
        """mknod(2): a regular file (type 0 is one) is made as libfuse makes it when the file
        system creates files: CREATE with O_CREAT | O_EXCL | O_WRONLY, then RELEASE; any other
        type is MKNOD."""
        self._new_name(path)
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
            self._ask("mknod", path, self.fs.refuse_change, path)
            return
        fh = self._ask("create", path, self.fs.create, path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        with contextlib.suppress(OSError):
            self._ask("release", path, self.fs.release, fh)

    def listdir(self, path: str = "/") -> list[str]:
        return [name for name, _ in self._at("readdir", path, self.fs.readdir, path)[2:]]

    def scandir(self, path: str = "/") -> dict[str, dict | None]:
        """Name -> the attributes a listing gives with it (readdirplus: fuse/binding.py asks
        FileSystem.attributes of each entry listed), None where it gives the name alone."""
        return {name: self._ask("readdir", path, self.fs.attributes, entry)
                for name, entry in self._at("readdir", path, self.fs.readdir, path)[2:]}

    def files(self, top: str = "/") -> list[str]:
        """Every file's path below `top`, as `find TOP -type f` lists them (a walk of listings)."""
        found = []
        for name in self.listdir(top):
            path = f"{top.rstrip('/')}/{name}"
            if stat.S_ISDIR(self.stat(path)["st_mode"]):
                found += self.files(path)
            else:
                found.append(path)
        return found

    # open files

    def open(self, path: str, flags: int) -> int:
        """As open(2) reaches the file system: a lookup, then OPEN of a file that exists (O_CREAT
        and O_EXCL are the kernel's; O_TRUNC goes with the open) or CREATE of one that does not.
        A directory is the kernel's to refuse for writing (EISDIR) and to open for reading
        (OPENDIR, which the adapter leaves to the binding: a handle that reads nothing)."""
        self._walk(path)
        attributes = self._lookup(path)
        if attributes is None:
            if not flags & os.O_CREAT:
                raise refused(errno.ENOENT, path)
            self._changed(path)
            return self._opened(path, self._ask("create", path, self.fs.create, path, flags), flags)
        if flags & os.O_CREAT and flags & os.O_EXCL:
            raise refused(errno.EEXIST, path)
        if stat.S_ISDIR(attributes["st_mode"]):  # O_TRUNC asks to write (build_open_flags)
            if flags & (os.O_CREAT | os.O_TRUNC) or flags & os.O_ACCMODE != os.O_RDONLY:
                raise refused(errno.EISDIR, path)
            self._directories.append(-len(self._directories) - 1)
            return self._directories[-1]
        if flags & os.O_DIRECTORY:
            raise refused(errno.ENOTDIR, path)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:  # do_open: O_TRUNC wants a write
            self._changed(path)
        return self._opened(path, self._ask("open", path, self.fs.open, path, flags & ~(os.O_CREAT | os.O_EXCL)),
                            flags)

    def _opened(self, path: str, fh: int, flags: int) -> int:
        self._paths[fh] = path
        if flags & os.O_ACCMODE != os.O_RDONLY:
            self._writable.add(fh)
        return fh

    def _path_of(self, fh: int) -> str:
        return self._paths.get(fh) or self.fs.node_of(fh)  # a handle not opened here: what the core knows

    def pread(self, fh: int, size: int, offset: int) -> bytes:
        """As read(2) reaches the file system: requests of at most max_read bytes (the adapter's
        BLKSIZE), each ending at a multiple of it; one that fails after bytes were read ends
        the read short, with those bytes, as the kernel ends it (the request's error is logged)."""
        if fh in self._directories:  # the kernel's answer to a read of a directory
            raise refused(errno.EISDIR, f"directory handle {fh}")
        parts: list[bytes] = []
        done = 0
        while done < size:
            piece = min(size - done, BLKSIZE - (offset + done) % BLKSIZE)
            try:
                part = self._ask("read", self._path_of(fh), self._read, fh, offset + done, piece)
            except OSError:
                if not parts:
                    raise
                break
            parts.append(part)
            done += len(part)
            if len(part) < piece:  # the end of the file
                break
        return b"".join(parts)

    def _read(self, fh: int, offset: int, size: int) -> bytes:
        """One READ, answered as the adapter answers it (read_buf): from the ranges of stored
        files the core gives, read as libfuse reads them (and short where a file is), else with
        the bytes the core makes."""
        stored = self.fs.read_source(fh, offset, size)[0]
        if stored is None:
            return self.fs.read(fh, offset, size)
        try:
            return b"".join(os.pread(fd, length, position) for fd, position, length in stored.ranges)
        finally:
            stored.close()

    def pwrite(self, fh: int, data: bytes, offset: int) -> int:
        """In requests of at most max_write bytes (the adapter's BLKSIZE), as the kernel splits
        it; one that fails after bytes were written ends the write short, with their count."""
        if fh in self._directories:  # opened for reading only
            raise refused(errno.EBADF, f"directory handle {fh}")
        written = 0
        while written < len(data):
            piece = data[written:written + BLKSIZE]
            try:
                done = self._ask("write", self._path_of(fh), self.fs.write, fh, piece, offset + written)
            except OSError:
                if not written:
                    raise
                break
            written += done
            if done < len(piece):
                break
        return written

    def lseek(self, fh: int, offset: int, whence: int) -> int:
        """SEEK_DATA and SEEK_HOLE, which the kernel asks the file system (the other whences it
        answers itself)."""
        if whence not in (os.SEEK_DATA, os.SEEK_HOLE):
            raise ValueError("only SEEK_DATA and SEEK_HOLE reach the file system")
        return self._ask("lseek", self._path_of(fh), self.fs.lseek, fh, offset, whence)

    def fsync(self, fh: int) -> None:
        if fh in self._directories:  # FSYNCDIR, which the binding answers
            return
        self._ask("fsync", self._path_of(fh), self.fs.fsync, fh)

    def close(self, fh: int) -> None:
        """FLUSH, whose error close(2) reports, then RELEASE, which the kernel sends whatever
        FLUSH answered and whose answer nobody sees."""
        if fh in self._directories:  # RELEASEDIR, which the binding answers
            return
        subject = self._path_of(fh)
        self._paths.pop(fh, None)
        self._writable.discard(fh)
        try:
            self._ask("flush", subject, self.fs.flush, fh)
        finally:
            with contextlib.suppress(OSError):
                self._ask("release", subject, self.fs.release, fh)

    def read_bytes(self, path: str) -> bytes:
        """The whole file, read to its end in max_read pieces as cat reads it."""
        fh = self.open(path, os.O_RDONLY)
        try:
            parts, offset = [], 0
            while part := self.pread(fh, BLKSIZE, offset):
                parts.append(part)
                offset += len(part)
            return b"".join(parts)
        finally:
            self.close(fh)

    def file(self, path: str) -> io.BufferedReader:
        """`path` open for reading as a Python file (for readers that take one: h5py, tifffile);
        a directory is IsADirectoryError, as open() says."""
        return io.BufferedReader(_OpenFile(self, path), BLKSIZE)

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode()

    def write(self, path: str, data: bytes) -> None:
        """open(O_WRONLY | O_CREAT | O_TRUNC), the bytes, close: a program saving a file."""
        fh = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.pwrite(fh, data, 0)
        except OSError:
            with contextlib.suppress(OSError):
                self.close(fh)
            raise
        self.close(fh)

    def copy(self, source: str, target: str) -> None:
        """cp of one file of the core to another name in it."""
        self.write(target, self.read_bytes(source))

    # hierarchy edits and extended attributes

    def _existing(self, request: str, path: str, method, *args):
        """A request about a file that must be there: the kernel looks it up first (ENOENT)."""
        self.stat(path)
        return self._ask(request, path, method, *args)

    def mkdir(self, path: str) -> None:
        self._new_name(path)
        self._ask("mkdir", path, self.fs.mkdir, path)

    def rmdir(self, path: str) -> None:
        """rmdir(2): EROFS before the name is looked up (do_rmdir); a file is ENOTDIR. The root
        is the mount point, a name of the file system above, which is busy (EBUSY) whatever
        this mount's options."""
        if _is_root(path):
            raise refused(errno.EBUSY, path)
        self._walk(path)
        self._changed(path)
        if not stat.S_ISDIR(self.stat(path)["st_mode"]):
            raise refused(errno.ENOTDIR, path)
        self._ask("rmdir", path, self.fs.rmdir, path)

    def unlink(self, path: str) -> None:
        """unlink(2): EROFS before the name is looked up (do_unlinkat); a directory is EISDIR.
        The root is the mount point, a directory of the file system above (EISDIR whatever
        this mount's options)."""
        if _is_root(path):
            raise refused(errno.EISDIR, path)
        self._walk(path)
        self._changed(path)
        if stat.S_ISDIR(self.stat(path)["st_mode"]):
            raise refused(errno.EISDIR, path)
        self._ask("unlink", path, self.fs.unlink, path)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        """rename(2) as renameat2 checks it before the file system is asked (fs/namei.c): the
        old name must exist, RENAME_NOREPLACE finds none at the new one, RENAME_EXCHANGE one;
        a directory does not move beneath itself; a name moved onto itself is left as it is;
        a directory replaces only a directory, a file only a file. A read-only mount refuses
        it (EROFS) once the directories above both names are walked, before either is looked up."""
        self._walk(old)
        self._walk(new)
        self._changed(old)
        is_dir = stat.S_ISDIR(self.stat(old)["st_mode"])
        there = self._lookup(new)
        if flags & RENAME_NOREPLACE and there is not None:
            raise refused(errno.EEXIST, new)
        if flags & RENAME_EXCHANGE and there is None:
            raise refused(errno.ENOENT, new)
        if new.startswith(old.rstrip("/") + "/"):
            raise refused(errno.EINVAL, new)
        if old.startswith(new.rstrip("/") + "/"):
            raise refused(errno.EINVAL if flags & RENAME_EXCHANGE else errno.ENOTEMPTY, old)
        if old == new:
            return
        if there is not None and not flags & RENAME_EXCHANGE and stat.S_ISDIR(there["st_mode"]) != is_dir:
            raise refused(errno.ENOTDIR if is_dir else errno.EISDIR, new)
        self._ask("rename", old, self.fs.rename, old, new, flags)

    def _lookup(self, path: str) -> dict | None:
        """The attributes of `path`, None where there is no such name."""
        try:
            return self._ask("getattr", path, self.fs.getattr, path)
        except FileNotFoundError:
            return None

    def listxattr(self, path: str) -> list[str]:
        names = self._existing("listxattr", path, self.fs.listxattr, path)
        if sum(len(os.fsencode(name)) + 1 for name in names) > XATTR_SIZE_MAX:  # more than the kernel hands on
            raise refused(errno.E2BIG, path)
        return names

    def getxattr(self, path: str, name: str) -> bytes:
        _check_name(name, path)
        value = self._existing("getxattr", path, self.fs.getxattr, path, name)
        if len(value) > XATTR_SIZE_MAX:  # the kernel takes at most this much of a value
            raise refused(errno.E2BIG, path)
        return value

    def setxattr(self, path: str, name: str, value: bytes, flags: int = 0) -> None:
        _check_name(name, path)
        if len(value) > XATTR_SIZE_MAX:  # refused by the kernel, never sent
            raise refused(errno.E2BIG, path)
        self.stat(path)
        self._changed(path)
        self._ask("setxattr", path, self.fs.setxattr, path, name, value, flags)

    def removexattr(self, path: str, name: str) -> None:
        _check_name(name, path)
        self.stat(path)
        self._changed(path)
        self._ask("removexattr", path, self.fs.removexattr, path, name)


def permitted(attributes: dict, mode: int, read_only: bool) -> bool:
    """access(2) as the kernel decides it from the modes shown (generic_permission, with the
    real uid and groups): writing on a read-only mount never (EROFS, before any mode); root may
    read and write anything, and execute a directory or a file that someone may execute."""
    st_mode = attributes["st_mode"]
    if mode & os.W_OK and read_only:
        return False
    if os.getuid() == 0:
        return not mode & os.X_OK or stat.S_ISDIR(st_mode) or bool(st_mode & 0o111)
    if attributes["st_uid"] == os.getuid():
        granted = st_mode >> 6
    elif attributes["st_gid"] in (os.getgid(), *os.getgroups()):
        granted = st_mode >> 3
    else:
        granted = st_mode
    return not mode & 7 & ~granted


def _check_name(name: str, path: str) -> None:
    """An attribute's name as the kernel takes it: 1 to XATTR_NAME_MAX bytes, else ERANGE."""
    if not 0 < len(os.fsencode(name)) <= XATTR_NAME_MAX:
        raise refused(errno.ERANGE, path)


class _OpenFile(io.RawIOBase):
    """A file of the core open for reading: preads at a position, closed once."""

    def __init__(self, core: Core, path: str):
        super().__init__()
        self.core, self.fh, self.position = core, core.open(path, os.O_RDONLY), 0
        attributes = core.stat(path)  # after the open, as fstat sees it
        if stat.S_ISDIR(attributes["st_mode"]):  # as Python's open() refuses one (io.FileIO)
            super().close()  # nothing to release: a directory's handle is the kernel's (Core.open)
            raise refused(errno.EISDIR, path)
        self.size = attributes["st_size"]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.core.pread(self.fh, len(buffer), self.position)
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self.position = {os.SEEK_SET: 0, os.SEEK_CUR: self.position, os.SEEK_END: self.size}[whence] + offset
        return self.position

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        if not self.closed:
            self.core.close(self.fh)
        super().close()


@contextlib.contextmanager
def core_of(source, tmp_path, *options, name="core", store=None):
    """The core serving `source` with the -o words `options` (parsed as the command parses
    them; its recovery data in tmp_path; `store`: the store it serves, else opened from
    `source`), started as a mount starts it; yields a Core. Always stopped, which stores every
    write, as an unmount does."""
    parsed, fuse_options, debug = parse_options(private_places(tmp_path, name, options))
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("zarrfs")
    level = logger.level
    logger.setLevel(logging.DEBUG if debug else logging.INFO)  # -o debug, as the command sets it
    logger.addHandler(handler)
    try:
        fs = FileSystem(str(source), parsed, HierarchyEdits, store=store)
        fs.start()
        try:
            yield Core(fs, log, fuse_options)
        finally:
            fs.stop()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
