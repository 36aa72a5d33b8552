"""Typed errors. Each carries the errno the file system answers with."""

import errno
from collections.abc import Iterable


class ZarrfsError(Exception):
    """Base of every error zarrfs raises on purpose."""

    errno = errno.EIO


class MetadataError(ZarrfsError):
    """A zarr.json that is malformed or breaks the spec."""

    errno = errno.EIO


class UnsupportedError(MetadataError):
    """Valid Zarr, but a codec, data type or extension zarrfs does not implement."""

    errno = errno.EOPNOTSUPP


class CorruptChunkError(ZarrfsError):
    """Stored bytes that cannot be decoded: checksum mismatch, truncated shard, bad stream."""

    errno = errno.EIO


class BudgetError(ZarrfsError):
    """Work refused because it would pass a bound its caller set (a stat's size pass decodes at
    most so many elements): no fault of the data, which the same work without the bound reads."""

    errno = errno.EFBIG


class OutOfBoundsError(ZarrfsError):
    """A write that would pass the end of the array's flat view; the size never changes."""

    errno = errno.EFBIG


class EncodeError(ZarrfsError):
    """A codec refused to encode a chunk (numcodecs' codecs can: a shuffle of the wrong size...)."""

    errno = errno.EIO


class InvalidValueError(ZarrfsError):
    """Written bytes that are no value of the array's data type (UTF-32 past U+10FFFF)."""

    errno = errno.EINVAL


class ReadOnlyError(ZarrfsError):
    errno = errno.EROFS


class StoreError(ZarrfsError):
    """The store refused an operation; errno is the one the OS gave (ENOSPC, EROFS, EACCES...).
    From a publish of several values, `stored` names those stored all the same (the rest kept
    their old values)."""

    def __init__(self, message: str, os_errno: int | None = None, stored: Iterable[str] = ()):
        super().__init__(message)
        self.errno = os_errno or errno.EIO
        self.stored = tuple(stored)

    @classmethod
    def from_os(cls, what: str, key: str, e: OSError) -> "StoreError":
        """A local store's OSError, naming the key: "cannot read 'a/c/0': No space left on device"."""
        return cls(f"{what} {key!r}: {e.strerror}", e.errno)


class HeaderWriteError(ZarrfsError):
    """A write that would change the header bytes of a view (NAME.npy): they follow the metadata."""

    errno = errno.EPERM


class ConflictError(StoreError):
    """A conditional write found the value changed by another writer since it was read; `keys`
    names the values."""

    def __init__(self, message: str, os_errno: int | None = None, keys: Iterable[str] = (),
                 stored: Iterable[str] = ()):
        super().__init__(message, os_errno, stored)
        self.keys = tuple(keys)


class ValueChangedError(StoreError):
    """A read asked for the version of a value an earlier read saw, and the value is another now
    (another writer replaced it): what was read with it, a shard's index, is out of date."""


class RefusedError(ZarrfsError):
    """A change of the hierarchy that cannot be made as asked; errno says why (EEXIST, ENOTEMPTY,
    EPERM, EBUSY...)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.errno = code


class RoutineError(ZarrfsError):
    """An answer callers expect all the time, not a failure: no such attribute (ENODATA),
    attributes not supported (ENOTSUP, ENOSYS), no such file (ENOENT). The errno boundary
    logs nothing for it: `ls -l` asks every file for attributes it has not."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.errno = code


class ViewError(ZarrfsError):
    """A view file made from many nodes (a group's zarr.h5) cannot be made: that one file fails."""


class ViewTooLargeError(ViewError):
    """The hierarchy below a group is beyond the bounds of one view file."""

    errno = errno.EFBIG


class AlreadyLoggedError(ZarrfsError):
    """Refused with `code` after the cause was logged where it was found, naming the file (a
    node that could not be read, a group file that cannot be made): no second line for it."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.errno = code
