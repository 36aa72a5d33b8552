"""The errno boundary of the FUSE methods: every exception becomes an errno the kernel passes on.

Which errno, and the log line each EIO gets, the core decides (fs/errno_answers.py), so that a
test of the core without a mount sees the same answers; here only the adapter's own refusals
(FuseOSError, raised by the binding's replies) are told apart."""

import errno
import functools
import logging

from zarrfs.fs.errno_answers import errno_of
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
        except Exception as e:
            raise mfusepy.FuseOSError(errno_of(e, method.__name__, subject(self, args))) from None

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
