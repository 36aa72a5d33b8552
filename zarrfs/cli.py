"""zarrfs SOURCE MOUNTPOINT [-f] [-d] [-o OPTION[,OPTION...]]

Start-up errors are one line on stderr and a non-zero exit status; without -f the command
returns only once the mount is live.
"""

import argparse
import logging
import logging.handlers
import os
import socket
import sys

from .errors import ZarrfsError
from .operations import BLKSIZE, Operations, Options, ZarrFUSE

log = logging.getLogger("zarrfs")

MAX_THREADS = 16  # libfuse's worker threads; also silences its warning about an unset limit

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


def parse_size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "")
    try:
        value = int(float(number) * units[unit])
    except ValueError:
        raise UsageError(f"cache_size={text!r} is not a size (e.g. 512M)") from None
    if value <= 0:
        raise UsageError("cache_size must be positive")
    return value


def parse_options(words: list[str]) -> tuple[Options, dict, bool]:
    """-o words -> (Options, options for libfuse, debug)."""
    options, fuse, debug = Options(), {}, False
    for word in (w for group in words for w in group.split(",") if w):
        name, _, value = word.partition("=")
        if name == "ro":
            options.read_only = True
        elif name == "cache_size":
            options.cache_bytes = parse_size(value)
        elif name == "debug":
            debug = True
        elif name in FUSE_OPTIONS:
            fuse[name] = value if value else True
        elif name in IGNORED or word.startswith(IGNORED_PREFIXES):
            continue
        else:
            raise UsageError(f"unknown option {word!r}")
    return options, fuse, debug


def check_startup(source: str, mountpoint: str) -> None:
    if not os.path.isdir(source):
        raise UsageError(f"{source}: no such directory")
    if not os.path.isdir(mountpoint):
        raise UsageError(f"{mountpoint}: mount point is not a directory")
    if os.path.ismount(mountpoint):
        raise UsageError(f"{mountpoint}: is already a mount point")
    if not os.path.exists("/dev/fuse"):
        raise UsageError("/dev/fuse is missing: load the fuse kernel module (modprobe fuse)")


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="zarrfs", description="Mount a Zarr v3 hierarchy as raw binary files.")
    parser.add_argument("source")
    parser.add_argument("mountpoint")
    parser.add_argument("-f", action="store_true", help="stay in the foreground")
    parser.add_argument("-d", action="store_true", help="debug logging (implies -f)")
    parser.add_argument("-o", action="append", default=[], metavar="OPTION[,OPTION...]")
    args = parser.parse_args(argv)
    try:
        options, fuse_options, debug = parse_options(args.o)
        source, mountpoint = os.path.abspath(args.source), os.path.abspath(args.mountpoint)
        check_startup(source, mountpoint)
    except UsageError as e:
        print(f"zarrfs: {e}", file=sys.stderr)
        return 1
    debug = debug or args.d
    foreground = args.f or args.d
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, stream=sys.stderr,
                        format="zarrfs[%(process)d] %(levelname)s %(name)s: %(message)s")
    if foreground:
        return serve(source, mountpoint, options, fuse_options, ready=None)
    return daemonize(source, mountpoint, options, fuse_options)


def daemonize(source, mountpoint, options, fuse_options) -> int:
    """Fork; the parent returns 0 once the child's mount is live, or prints its one-line error."""
    read_end, write_end = os.pipe()
    if os.fork():
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        if message == "ready":
            return 0
        print(message.strip() or f"zarrfs: cannot mount {mountpoint}", file=sys.stderr)
        return 1
    os.close(read_end)
    os.setsid()
    os.chdir("/")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    ready = os.fdopen(write_end, "wb", buffering=0)

    def on_ready():
        ready.write(b"ready")
        ready.close()
        os.dup2(null, 2)  # the terminal may be gone: log to syslog from now on
        _log_to_syslog()

    status = serve(source, mountpoint, options, fuse_options, ready=on_ready)
    if not ready.closed:
        ready.write(f"zarrfs: cannot mount {mountpoint} (see messages above)".encode())
        ready.close()
    os._exit(status)


def _log_to_syslog() -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if os.path.exists("/dev/log"):
        handler = logging.handlers.SysLogHandler("/dev/log")
        handler.setFormatter(logging.Formatter("zarrfs[%(process)d]: %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)


def serve(source, mountpoint, options, fuse_options, ready) -> int:
    """Mount and serve until unmounted or signalled; flush everything before returning."""
    def on_ready():
        notify("READY=1")
        if ready:
            ready()
        log.info("mounted %s on %s%s", source, mountpoint, " (read-only)" if options.read_only else "")

    def on_stop():
        notify("STOPPING=1")
        log.info("unmounting %s", mountpoint)

    try:
        operations = Operations(source, options, on_ready=on_ready, on_stop=on_stop)
    except ZarrfsError as e:
        print(f"zarrfs: {e}", file=sys.stderr)
        return 1
    kwargs = {"fsname": source, "subtype": "zarrfs", "max_read": BLKSIZE, "max_threads": MAX_THREADS, "max_idle_threads": MAX_THREADS, **fuse_options}
    if options.read_only:
        kwargs["ro"] = True
    try:
        ZarrFUSE(operations, mountpoint, foreground=True, **kwargs)
    except RuntimeError as e:
        print(f"zarrfs: cannot mount {mountpoint}: libfuse error {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
