"""The errno boundary of the FUSE methods: every exception becomes an errno the kernel passes on."""

import errno
import functools
import logging

from zarrfs.errors import CorruptChunkError, RoutineError, ZarrfsError
from zarrfs.fuse.libfuse import mfusepy

log = logging.getLogger(__name__)


def errno_boundary(method):
    """Map every exception to an errno: typed errors to theirs, anything else to EIO with a log line."""

    @functools.wraps(method)
    def wrapper(self, *args):
        try:
            return method(self, *args)
        except mfusepy.FuseOSError:
            raise
        except RoutineError as e:  # an expected answer (no such attribute...): nothing to log
            raise mfusepy.FuseOSError(e.errno) from None
        except ZarrfsError as e:
            level = logging.ERROR if isinstance(e, CorruptChunkError) or e.errno == errno.EIO else logging.WARNING
            log.log(level, "%s: %s", method.__name__, e)
            raise mfusepy.FuseOSError(e.errno) from None
        except OSError as e:
            log.warning("%s: %s", method.__name__, e)
            raise mfusepy.FuseOSError(e.errno or errno.EIO) from None
        except Exception:
            log.exception("%s%r failed", method.__name__, args[:1])
            raise mfusepy.FuseOSError(errno.EIO) from None

    return wrapper


def fail(code: int):
    raise mfusepy.FuseOSError(code)
