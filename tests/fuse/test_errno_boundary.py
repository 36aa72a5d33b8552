"""Every EIO the errno boundary returns has one log line naming the file or node and the cause."""

import errno
import logging

import pytest

from zarrfs.errors import AlreadyLoggedError, CorruptChunkError
from zarrfs.fuse.errno_boundary import errno_boundary
from zarrfs.fuse.libfuse import mfusepy


class Probe:
    """FUSE methods as Operations has them: a path first, or a file handle (read_into)."""

    def __init__(self, error):
        self.error = error

    def node_of(self, fh) -> str:
        return {7: "g/temperature"}[fh]

    @errno_boundary
    def open(self, path, flags):
        raise self.error

    @errno_boundary
    def read_into(self, fh, buffer, size, offset):
        raise self.error


def answer(call, caplog) -> tuple[int, list[str]]:
    caplog.clear()
    with caplog.at_level(logging.DEBUG), pytest.raises(mfusepy.FuseOSError) as raised:
        call()
    return raised.value.errno, [r.getMessage() for r in caplog.records]


def test_an_eio_raised_without_a_cause_still_gets_a_line_naming_the_file(caplog):
    code, lines = answer(lambda: Probe(mfusepy.FuseOSError(errno.EIO)).open("/g/a.bin", 0), caplog)
    assert code == errno.EIO and lines == ["open /g/a.bin: input/output error"]


def test_an_eio_logged_where_it_was_refused_gets_no_second_line(caplog):
    code, lines = answer(lambda: Probe(AlreadyLoggedError("logged where it was found", errno.EIO)).open("/g/a.bin", 0), caplog)
    assert code == errno.EIO and lines == []


def test_a_read_names_the_node_of_its_open_file(caplog):
    code, lines = answer(lambda: Probe(CorruptChunkError("chunk c/0: crc32c mismatch")).read_into(7, None, 4, 0), caplog)
    assert code == errno.EIO and lines == ["read_into g/temperature: chunk c/0: crc32c mismatch"]


def test_other_errnos_raised_as_such_are_not_logged(caplog):
    code, lines = answer(lambda: Probe(mfusepy.FuseOSError(errno.ENOENT)).open("/g/a.bin", 0), caplog)
    assert code == errno.ENOENT and lines == []
