"""Where a daemonized zarrfs logs. Its terminal is gone, so its errors (among them "written data
of ... could not be stored; saved in ...") must reach a place the user can find: syslog when the
machine has one (/dev/log), else a file (containers and minimal machines have no syslog), or the
file given with -o log_file=PATH. The mount says where, in one line on stderr."""

import logging
import logging.handlers
import os

from zarrfs.names import LineFormatter

SYSLOG_SOCKET = "/dev/log"
FILE_FORMAT = "%(asctime)s zarrfs[%(process)d] %(levelname)s %(name)s: %(message)s"
SYSLOG_FORMAT = "zarrfs[%(process)d]: %(levelname)s %(name)s: %(message)s"  # the ident journalctl -t zarrfs finds


def default_log_file() -> str:
    """Root logs in /var/log, like other daemons; users in XDG's state home (as recovery data)."""
    if os.geteuid() == 0:
        return "/var/log/zarrfs/zarrfs.log"
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "zarrfs", "zarrfs.log")


def log_file_for(given: str | None) -> str | None:
    """The file a daemon logs to: the one given, else none when there is syslog, else the default."""
    if given:
        return given
    return None if os.path.exists(SYSLOG_SOCKET) else default_log_file()


def describe(path: str | None) -> str:
    """Where the log goes, as the mount tells the user."""
    return f"the log is {path}" if path else "the log goes to syslog (journalctl -t zarrfs)"


class PrivateFileHandler(logging.handlers.WatchedFileHandler):
    """WatchedFileHandler whose file is the owner's alone (0600), when made and when reopened
    after logrotate: the log names URLs, endpoints, buckets and credential files."""

    def _open(self):
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a log made before (by an older zarrfs, or by hand) is tightened
        except PermissionError:
            pass  # another user's file that we may append to: its mode is that user's to set
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def file_handler(path: str) -> logging.Handler:
    """A handler appending to `path` (its directory made), reopened when logrotate moves it away.
    Raises OSError when it cannot be opened."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)  # a new directory: its logs are the owner's alone
    handler = PrivateFileHandler(path, encoding="utf-8")
    handler.setFormatter(LineFormatter(FILE_FORMAT))  # one line of UTF-8 whatever names it holds
    return handler


def syslog_handler() -> logging.Handler | None:
    if not os.path.exists(SYSLOG_SOCKET):
        return None
    handler = logging.handlers.SysLogHandler(SYSLOG_SOCKET)
    handler.setFormatter(LineFormatter(SYSLOG_FORMAT))
    return handler


def log_only_to(handler: logging.Handler | None) -> None:
    """From now on the daemon's records go to `handler` alone (stderr is /dev/null by now)."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    if handler is not None:
        root.addHandler(handler)
