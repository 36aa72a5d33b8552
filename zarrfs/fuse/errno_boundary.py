"""The errno boundary of the FUSE methods: every exception becomes an errno the kernel passes on.

No EIO leaves it unexplained: each one it returns has a log line naming the file (or the node
of an open file) and the cause, written here unless the code that refused wrote it already
(AlreadyLoggedError)."""

import errno
import functools
import logging

from zarrfs.errors import AlreadyLoggedError, CorruptChunkError, RoutineError, ZarrfsError
from zarrfs.fuse.libfuse import mfusepy

log = logging.getLogger(__name__)


def errno_boundary(method):
    """Map every exception to an errno: typed errors to theirs, anything else to EIO, each EIO
    with one log line naming what it was asked of (`subject`) and why."""

    @functools.wraps(method)
    def wrapper(self, *args):
        try:
            return method(self, *args)
        except mfusepy.FuseOSError as e:
            if e.errno == errno.EIO:  # raised without a cause: say at least where
                log.error("%s %s: input/output error", method.__name__, subject(self, args))
            raise
        except AlreadyLoggedError as e:  # its line was written where it was found
            raise mfusepy.FuseOSError(e.errno) from None
        except RoutineError as e:  # an expected answer (no such attribute...): nothing to log
            if e.errno == errno.EIO:
                log.error("%s %s: %s", method.__name__, subject(self, args), e)
            raise mfusepy.FuseOSError(e.errno) from None
        except ZarrfsError as e:
            level = logging.ERROR if isinstance(e, CorruptChunkError) or e.errno == errno.EIO else logging.WARNING
            log.log(level, "%s %s: %s", method.__name__, subject(self, args), e)
            raise mfusepy.FuseOSError(e.errno) from None
        except OSError as e:
            level = logging.ERROR if e.errno in (None, errno.EIO) else logging.WARNING
            log.log(level, "%s %s: %s", method.__name__, subject(self, args), e)
            raise mfusepy.FuseOSError(e.errno or errno.EIO) from None
        except Exception:
            log.exception("%s %s failed", method.__name__, subject(self, args))
            raise mfusepy.FuseOSError(errno.EIO) from None

    return wrapper


def subject(operations, args: tuple) -> str:
    """What a FUSE method was asked about: its path, or for a method given a file handle first
    (read_into, read_buf) the node of that open file (operations.node_of)."""
    first = args[0] if args else None
    if isinstance(first, bytes):
        return first.decode(errors="replace")
    if isinstance(first, str):
        return first
    if isinstance(first, int):
        return operations.node_of(first)
    return "-"
