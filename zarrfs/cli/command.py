"""zarrfs SOURCE MOUNTPOINT [-f] [-d] [-o OPTION[,OPTION...]]

Start-up errors are one line on stderr and a non-zero exit status; without -f the command
returns only once the mount is live.
"""

import argparse
import ctypes
import dataclasses
import difflib
import gc
import importlib.metadata
import logging
import os
import re
import socket
import stat
import sys
import threading
from typing import TYPE_CHECKING

from zarrfs.cli import commit, daemon_log, fuse_access
from zarrfs.cli.help import epilog
from zarrfs.errors import ZarrfsError
from zarrfs.fs import growable
from zarrfs.fs.filesystem import BLKSIZE, Options
from zarrfs.fs.ownership import Ownership
from zarrfs.names import LineFormatter, printable
from zarrfs.stores.icechunk_repository import IcechunkChoice
from zarrfs.stores.source_url import SCHEMES, is_remote, public_url
from zarrfs.views import ALL_VIEWS, GROUP_VIEWS, preview

if TYPE_CHECKING:  # the adapter is imported where a mount is made (fuse_mount), never with this module
    from zarrfs.fuse.operations import Operations

log = logging.getLogger("zarrfs")

MAX_THREADS = 16  # libfuse's worker threads; also silences its warning about an unset limit
# Allocations between young garbage collections (Python's default: 700). A first listing of
# 10,000 arrays allocates millions of objects, nearly none in cycles: collecting every 700 of
# them took a third of the daemon's time.
GC_THRESHOLD = 50_000
READ_AHEAD_KB = 2048  # two 1 MiB requests in flight: one decodes while the other is copied

# Passed to libfuse as they are.
FUSE_OPTIONS = {"allow_other", "allow_root", "default_permissions", "auto_unmount", "fsname", "subtype"}
# Added by mount(8), fstab or systemd: accepted and ignored, as other FUSE file systems do.
IGNORED = {"rw", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "auto", "noauto", "user", "users", "nouser",
           "owner", "group", "_netdev", "nofail", "defaults", "atime", "noatime", "relatime", "norelatime",
           "strictatime", "diratime", "nodiratime", "lazytime", "sync", "async", "dirsync", "silent", "loud",
           "kernel_cache", "big_writes"}
IGNORED_PREFIXES = ("x-", "comment=", "context=")


class UsageError(Exception):
    pass


def parse_size(name: str, text: str, zero_turns_off: bool = False) -> int:
    """A size such as 512M; `0` too when it turns the option off."""
    if zero_turns_off and text.strip() == "0":
        return 0
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    given = text
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "")
    try:
        value = int(float(number) * units[unit])
    except (ValueError, OverflowError):
        raise UsageError(f"{name}={given!r} is not a size (e.g. 512M)") from None
    if value <= 0:
        raise UsageError(f"{name} must be positive")
    return value


REMOTE_OPTIONS = {"endpoint", "region", "anon", "timeout", "metadata_ttl", "credentials_file", "ca_file",
                  "prefetch_size"}


def parse_remote_option(remote, name: str, value: str) -> None:
    if name == "anon":
        remote.anon = True
    elif name == "prefetch_size":
        remote.prefetch_size = parse_size(name, value, zero_turns_off=True)
    elif name in ("timeout", "metadata_ttl"):
        try:
            seconds = float(value)
        except ValueError:
            raise UsageError(f"{name}={value!r} is not a number of seconds") from None
        if seconds < 0 or (name == "timeout" and seconds == 0):
            raise UsageError(f"{name} must be positive")
        setattr(remote, name, seconds)
    elif not value:
        raise UsageError(f"{name} needs a value")
    else:
        setattr(remote, name, os.path.abspath(value) if name in ("credentials_file", "ca_file") else value)


def parse_options(words: list[str]) -> tuple[Options, dict, bool]:
    """-o words -> (Options, options for libfuse, debug)."""
    options, fuse, debug = Options(), {}, False
    for word in rejoin_views([w for group in words for w in group.split(",") if w]):
        name, _, value = word.partition("=")
        if name == "ro":
            options.read_only = True
        elif name == "cache_size":
            options.cache_bytes = parse_size(name, value)
        elif name == "decode_ahead":
            options.ahead_bytes = parse_size(name, value, zero_turns_off=True)
        elif name == "dirty_size":
            options.dirty_limit = parse_size(name, value)
        elif name in REMOTE_OPTIONS:
            parse_remote_option(options.remote, name, value)
        elif name == "recovery_dir":
            if not value:
                raise UsageError("recovery_dir needs a directory")
            options.recovery_dir = os.path.abspath(value)
        elif name == "symlinks":
            if value not in ("follow", "contain"):
                raise UsageError(f"symlinks={value!r}: choose follow (a trusted store) or contain")
            options.follow_symlinks = value == "follow"
        elif name == "log_file":
            if not value:
                raise UsageError("log_file needs a path")
            options.log_file = os.path.abspath(value)
        elif name == "views":
            options.views = parse_views(value)
        elif name == "previews":
            if not preview.available():
                raise UsageError("previews need Pillow: pip install 'zarrfs[previews]'")
            options.previews = True
        elif name == "noxattr":
            options.xattrs = False
        elif name == "grow":
            if value not in growable.CHOICES:
                raise UsageError(f"grow={value!r}: choose all, marked (arrays netCDF marks unlimited) or none")
            options.grow = value
        elif name == "nozerocopy":
            options.zero_copy = False
        elif name == "header_cache_size":
            options.header_cache_bytes = parse_size(name, value)
        elif name in ("uid", "gid", "umask"):
            options.ownership = parse_ownership(options.ownership, name, value)
        elif name == "commit_on_unmount":
            if not value:
                raise UsageError("commit_on_unmount needs a commit message (e.g. commit_on_unmount='nightly run')")
            options.icechunk = dataclasses.replace(options.icechunk, commit_on_unmount=value)
        elif name in ("icechunk", "branch", "tag", "snapshot"):
            options.icechunk = parse_icechunk(options.icechunk, name, value)
        elif name == "debug":
            debug = True
        elif name in FUSE_OPTIONS:
            fuse[name] = value if value else True
        elif name == "nonempty":  # checked by check_startup, never passed on: libfuse 3 has no such option
            fuse[name] = True
        elif name in IGNORED or word.startswith(IGNORED_PREFIXES):
            continue
        else:
            raise UsageError(unknown_option(word))
    if "allow_other" in fuse or options.ownership != Ownership():
        # the kernel checks each request against the owner and modes shown: what they refuse is
        # never carried out by the daemon with the owner's credentials
        fuse["default_permissions"] = True
    return options, fuse, debug


def parse_icechunk(choice: IcechunkChoice, name: str, value: str) -> IcechunkChoice:
    """-o icechunk, and the one version of branch=, tag= or snapshot= a mount shows."""
    if name == "icechunk":
        return dataclasses.replace(choice, forced=True)
    if not value:
        raise UsageError(f"{name} needs a value (e.g. {name}=main)" if name != "snapshot" else
                         "snapshot needs a snapshot id (e.g. snapshot=1CECHNKREP0F1RSTCMT0)")
    if any((choice.branch, choice.tag, choice.snapshot)):
        raise UsageError("choose one of branch=, tag= and snapshot=: a mount shows one version")
    return dataclasses.replace(choice, **{name: value})


def parse_ownership(ownership: Ownership, name: str, value: str) -> Ownership:
    """uid=N and gid=N (numbers, as sshfs takes them) and umask=OCTAL."""
    try:
        number = int(value, 8 if name == "umask" else 10)
    except ValueError:
        number = -1
    if name == "umask" and not 0 <= number <= 0o777:
        raise UsageError(f"umask={value!r} is not an octal mask from 000 to 777 (e.g. 022, 077)")
    if name != "umask" and not 0 <= number < 1 << 32:
        raise UsageError(f"{name}={value!r} is not a numeric {'user' if name == 'uid' else 'group'} id "
                         f"(e.g. {name}=$(id -{name[0]}))")
    return dataclasses.replace(ownership, **{name: number})


# Every option name parse_options takes (the ones mount(8) adds aside): what a typo is matched to.
OPTION_NAMES = ("ro", "cache_size", "decode_ahead", "dirty_size", *sorted(REMOTE_OPTIONS), "recovery_dir", "log_file",
                "symlinks", "views", "previews", "noxattr", "grow", "nozerocopy", "header_cache_size", "uid", "gid", "umask",
                "debug", "nonempty", *sorted(FUSE_OPTIONS))


def unknown_option(word: str) -> str:
    """The refusal of an unknown -o word, naming the closest known option (a typo is the usual
    cause). Never its value, which may be a secret key, nor a name unlike any option's (a key
    pasted without one)."""
    name, equals, _ = word.partition("=")
    closest = difflib.get_close_matches(name, OPTION_NAMES, n=1)
    hint = f": did you mean {closest[0]}{equals}?" if closest else ""
    said = repr(name) if OPTION_LIKE.fullmatch(name) else "(not shown: not like an option's name)"
    return f"unknown option {said}{hint} (zarrfs --help lists the options)"


OPTION_LIKE = re.compile(r"[a-z][a-z_-]{0,31}")  # the shape of every option's name


def rejoin_views(words: list[str]) -> list[str]:
    """`-o views=npy,envi,ro` splits into views=npy, envi, ro: give the view names back to views."""
    out = []
    for word in words:
        if out and out[-1].startswith("views=") and out[-1] != "views=none" and word in ALL_VIEWS:
            out[-1] += f",{word}"
        else:
            out.append(word)
    return out


def parse_views(value: str) -> tuple[str, ...]:
    names = [v for v in value.split(",") if v]
    if names == ["none"]:
        return ()
    unknown = [v for v in names if v not in ALL_VIEWS]
    if unknown or not names:
        raise UsageError(f"views={value!r}: choose from {', '.join(ALL_VIEWS)}, or none")
    for name in names:
        group = GROUP_VIEWS.get(name)
        if group is not None and not group.available():
            raise UsageError(f"views={name} needs its extra: pip install 'zarrfs[{group.extra}]'")
    return tuple(dict.fromkeys(names))


def check_startup(source: str, mountpoint: str, nonempty: bool = False) -> None:
    """One precise line for each way SOURCE or MOUNTPOINT can be wrong."""
    if not is_remote(source):
        check_directory(source, "source")
    check_directory(mountpoint, "mount point")
    if os.path.ismount(mountpoint):
        raise UsageError(f"{mountpoint}: is already a mount point")
    if not nonempty:
        check_empty(mountpoint)
    if not os.path.exists("/dev/fuse"):
        raise UsageError("/dev/fuse is missing: load the fuse kernel module (modprobe fuse)")


def check_scheme(source: str) -> None:
    """SOURCE as given: a URL of a scheme zarrfs does not take (s4://, a typo) is said as such, not as a local
    directory that does not exist."""
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", source)
    if scheme and not is_remote(source):
        raise UsageError(f"{public_url(source)}: unknown scheme {scheme.group(1)}://: zarrfs takes "
                         f"{', '.join(f'{s}://' for s in sorted(SCHEMES))} or a local directory")


def check_empty(mountpoint: str) -> None:
    """A mount over files hides them until unmount: refused unless asked for (-o nonempty)."""
    try:
        with os.scandir(mountpoint) as entries:
            first = next(entries, None)
    except OSError as e:
        raise UsageError(f"{mountpoint}: mount point: {e.strerror}") from None
    if first is not None:
        raise UsageError(f"{mountpoint}: mount point is not empty (it holds {first.name!r}, which the mount would "
                         "hide): choose an empty directory, or add -o nonempty")


def package_version() -> str:
    try:
        return importlib.metadata.version("zarrfs")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def check_directory(path: str, what: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        parent = os.path.dirname(path)
        missing = "its parent directory does not exist" if not os.path.isdir(parent) else "no such directory"
        raise UsageError(f"{path}: {what}: {missing}") from None
    except OSError as e:
        raise UsageError(f"{path}: {what}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path}: {what} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise UsageError(f"{path}: {what}: permission denied")


# glibc's malloc, set once in the daemon before any of its threads take an arena (keep_freed_chunk_memory)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # malloc.h
MMAP_THRESHOLD = 32 << 20  # glibc's ceiling (half its 64 MiB heaps): every chunk-sized block from a heap
TRIM_THRESHOLD = 128 << 20  # free memory a heap keeps at its top before giving it back
ARENA_MAX = 2  # its default, 8 per core, spreads a stream's blocks in flight over up to 16 heaps


def keep_freed_chunk_memory() -> None:
    """Ask glibc to reuse freed chunk-sized blocks instead of returning them to the kernel
    (its defaults mmap blocks from 128 KiB and trim heaps early). Memory the daemon touches
    anew costs a page fault per 4 KiB; a flush frees whole batches of chunks that the next
    writes can take again, and a remote stream frees each body, its decode and its reply for
    the next chunk's. Fewer arenas: the blocks in flight share heaps, so fewer pages are ever
    touched (docs/object-stores.md). The peak stays what the caches, prefetch_size and
    dirty_size allow."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        libc.mallopt(M_ARENA_MAX, ARENA_MAX)
    except (OSError, AttributeError):
        pass  # not glibc: its defaults stay


def raise_read_ahead(mountpoint: str) -> None:
    """The kernel caps a FUSE mount's read-ahead at 128 KiB; as root, raise it (in a thread of
    its own: the stat below is answered by this daemon)."""
    try:
        dev = os.stat(mountpoint).st_dev
        with open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb", "w") as f:
            f.write(str(READ_AHEAD_KB))
    except OSError as e:
        log.info("kernel read-ahead stays at its default: %s", e)


def notify(message: str) -> None:
    """sd_notify: tell systemd (Type=notify) about readiness and stopping."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(message.encode(), address)
    except OSError as e:
        log.warning("cannot notify systemd at %s: %s", address, e)


def _asks_message(words: list[str]) -> bool:
    """Whether `zarrfs commit ...` gives a message (-m, --message): a commit whatever ./commit is."""
    return any(w in ("-m", "--message") or w.startswith(("-m", "--message=")) for w in words[1:])


def main(argv=None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == ["commit"] and (_asks_message(words) or not os.path.exists("commit")):  # else ./commit is a SOURCE
        return commit.main(words[1:])  # zarrfs commit MOUNT -m MESSAGE (an Icechunk branch mounted): its parser says what is missing
    parser = argparse.ArgumentParser(prog="zarrfs", description="Mount a Zarr (v2 or v3) hierarchy as raw binary "
                                     "files: NAME.bin (little-endian, C order) and NAME.json for each array.",
                                     epilog=epilog(Options(), ALL_VIEWS), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"zarrfs {package_version()}")
    parser.add_argument("source", help="a Zarr hierarchy (directory), a group or array inside one, or an object-store URL (s3://BUCKET/PREFIX, gs://, az://, http:// or https://)")
    parser.add_argument("mountpoint", help="an existing empty directory (-o nonempty: one that holds files)")
    parser.add_argument("-f", action="store_true", help="stay in the foreground")
    parser.add_argument("-d", action="store_true",
                        help="debug: log one line per request, chunk decode and store read (implies -f)")
    parser.add_argument("-s", action="store_true", help="accepted for FUSE compatibility; ignored")
    parser.add_argument("-o", action="append", default=[], metavar="OPTION[,OPTION...]", help="mount options, listed below")
    args = parser.parse_args(argv)
    try:
        options, fuse_options, debug = parse_options(args.o)
        # before anything can log: a refusal found while opening SOURCE is one line, in this format
        stderr = logging.StreamHandler(sys.stderr)
        stderr.setFormatter(LineFormatter("zarrfs[%(process)d] %(levelname)s %(name)s: %(message)s"))
        logging.basicConfig(level=logging.DEBUG if debug or args.d else logging.INFO, handlers=[stderr])
        check_scheme(args.source)
        source = args.source if is_remote(args.source) else os.path.abspath(args.source)
        mountpoint = os.path.abspath(args.mountpoint)
        check_startup(source, mountpoint, fuse_options.pop("nonempty", False))
        refused = fuse_access.refusal(fuse_options)
        if refused:
            raise UsageError(refused)
    except (UsageError, ZarrfsError) as e:
        print(f"zarrfs: {e}", file=sys.stderr)
        return 1

    def make_mount() -> Mount:
        return fuse_mount(source, options, mountpoint, fuse_options, traced=debug or args.d)

    if not (args.f or args.d or debug):
        return daemonize(make_mount, daemon_log.log_file_for(options.log_file))
    try:
        if options.log_file:  # besides stderr
            logging.getLogger().addHandler(daemon_log.file_handler(options.log_file))
    except OSError as e:
        print(f"zarrfs: {cannot_log(options.log_file, e)}", file=sys.stderr)
        return 1
    try:
        mount = make_mount()
    except ZarrfsError as e:
        print(f"zarrfs: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a bug, or an input obstore panics on: one line here, the traceback in the log
        log.debug("unexpected error while opening the store", exc_info=True)
        print(f"zarrfs: {unexpected(e)}", file=sys.stderr)
        return 1
    except BaseException as e:  # a Rust panic (pyo3's PanicException is no Exception)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        print(f"zarrfs: {unexpected(e)}", file=sys.stderr)
        return 1
    error = mount.serve()
    if error:
        print(f"zarrfs: {error}", file=sys.stderr)
    return 1 if error else 0


def fuse_mount(source: str, options: Options, mountpoint: str, fuse_options: dict, traced: bool) -> "Mount":
    """The mount of `source`: the FUSE adapter and the binding are imported here, so that only
    making a mount loads libfuse (mfusepy), and parsing options (zarrfs-recover, the core's
    tests) never does."""
    keep_freed_chunk_memory()  # before opening the store starts its threads
    from zarrfs.fuse.binding import ZarrFUSE
    from zarrfs.fuse.operations import Operations
    from zarrfs.fuse.tracing import TracingFUSE, quiet_binding

    quiet_binding()
    shown = public_url(source) if is_remote(source) else source
    return Mount(Operations(source, options), shown, mountpoint, fuse_options, TracingFUSE if traced else ZarrFUSE)


class Mount:
    """One mount: serve() runs until unmounted or signalled and flushes everything before returning."""

    def __init__(self, operations: "Operations", source: str, mountpoint: str, fuse_options: dict, binding: type):
        self.operations, self.source, self.mountpoint = operations, source, mountpoint
        self.fuse_options = fuse_options
        self.on_ready = None  # extra readiness action (the daemon's pipe)
        self.was_live = False
        self.binding = binding  # ZarrFUSE, or TracingFUSE with -d
        operations.on_ready, operations.on_stop = self._ready, self._stopping

    def _ready(self) -> None:
        self.was_live = True
        threading.Thread(target=raise_read_ahead, args=(self.mountpoint,), daemon=True).start()
        notify("READY=1")
        if self.on_ready:
            self.on_ready()
        read_only = self.operations.options.read_only
        log.info("mounted %s on %s%s", self.source, self.mountpoint, " (read-only)" if read_only else "")

    def _stopping(self) -> None:
        notify("STOPPING=1")
        log.info("unmounting %s", self.mountpoint)

    def serve(self) -> str | None:
        """Returns None after a clean unmount, else a one-line error."""
        kwargs = {"fsname": self.source, "subtype": "zarrfs", "max_read": BLKSIZE, "max_threads": MAX_THREADS,
                  "max_idle_threads": MAX_THREADS, **self.fuse_options}
        if self.operations.options.read_only:
            kwargs["ro"] = True
        gc.set_threshold(GC_THRESHOLD, 20, 20)
        try:
            self.binding(self.operations, self.mountpoint, foreground=True, **kwargs)
        except RuntimeError as e:
            if not self.was_live:
                return f"cannot mount {self.mountpoint}: libfuse error {e}"
            log.debug("libfuse loop ended with status %s", e)  # the signal that ended it: a clean stop
        if self.operations.unstored:
            return f"written data of {', '.join(self.operations.unstored)} could not be stored (see the log)"
        return None


def unexpected(error: BaseException) -> str:
    first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
    return f"unexpected error while opening the source: {type(error).__name__}: {first}"


def cannot_log(path: str, error: OSError) -> str:
    return f"cannot open the log file {path}: {error.strerror or error} (choose another with -o log_file=PATH)"


def daemonize(make_mount, log_file: str | None) -> int:
    """Fork; the parent returns 0 once the child's mount is live, saying in one line where its
    log goes (syslog, else `log_file`), or prints the child's error.

    The store is opened in the child: an object store's client (obstore's tokio runtime) does
    not survive a fork, so nothing may touch it before one. The log file is opened once the
    store is: a refused mount leaves none."""
    read_end, write_end = os.pipe()
    if os.fork():
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        if message == "ready":
            print(f"zarrfs: mounted; {daemon_log.describe(log_file)}", file=sys.stderr)
            return 0
        print(f"zarrfs: {message or 'cannot mount'}", file=sys.stderr)
        return 1
    os.close(read_end)
    os.setsid()
    os.chdir("/")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    pipe = os.fdopen(write_end, "wb", buffering=0)
    try:
        mount = make_mount()
    except BaseException as e:  # a refusal, said in one line by the parent (a Rust panic too)
        if not isinstance(e, ZarrfsError):
            log.debug("unexpected error while opening the store", exc_info=True)
        message = str(e) if isinstance(e, ZarrfsError) else unexpected(e)
        pipe.write(printable(message).encode())  # SOURCE's name may be any bytes
        os._exit(1)
    try:
        handler = daemon_log.file_handler(log_file) if log_file else daemon_log.syslog_handler()
    except OSError as e:
        pipe.write(cannot_log(log_file, e).encode())
        os._exit(1)

    def ready():
        pipe.write(b"ready")
        pipe.close()
        os.dup2(null, 2)  # the terminal may be gone: log to syslog or the file from now on
        daemon_log.log_only_to(handler)

    mount.on_ready = ready
    error = mount.serve()
    if not pipe.closed:
        pipe.write(printable(error or f"cannot mount {mount.mountpoint}").encode())
        pipe.close()
    os._exit(1 if error else 0)


if __name__ == "__main__":
    sys.exit(main())
