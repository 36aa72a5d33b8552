"""What a request that failed answers: its errno, and for each EIO one log line naming the file
(or the node of an open file) and the cause, unless the code that refused wrote it already
(AlreadyLoggedError). The FUSE adapter's boundary (fuse/errno_boundary.py) answers through this,
and so does a caller of the core without a mount: both give the same errnos and log lines."""

import errno
import logging

from zarrfs.errors import AlreadyLoggedError, CorruptChunkError, RoutineError, ZarrfsError

log = logging.getLogger(__name__)


def errno_of(error: Exception, request: str, subject: str) -> int:
    """The errno `error` answers to `request` (the operation's name) about `subject` (a path or
    an open file's node): typed errors their own, anything else EIO, each EIO with its line."""
    if isinstance(error, AlreadyLoggedError):  # its line was written where it was found
        return error.errno
    if isinstance(error, RoutineError):  # an expected answer (no such attribute...): nothing to log
        if error.errno == errno.EIO:
            log.error("%s %s: %s", request, subject, error)
        return error.errno
    if isinstance(error, ZarrfsError):
        level = logging.ERROR if isinstance(error, CorruptChunkError) or error.errno == errno.EIO else logging.WARNING
        log.log(level, "%s %s: %s", request, subject, error)
        return error.errno
    if isinstance(error, OSError):
        level = logging.ERROR if error.errno in (None, errno.EIO) else logging.WARNING
        log.log(level, "%s %s: %s", request, subject, error)
        return error.errno or errno.EIO
    log.error("%s %s failed", request, subject, exc_info=error)
    return errno.EIO
