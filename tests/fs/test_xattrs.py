"""Extended attributes as the file system answers them (fs/xattrs.py), without FUSE: typed
errors carry the errno, and the errno boundary passes those on without a log line."""

import errno
import json
import logging

import pytest

from helpers import make_store
from zarrfs.errors import RoutineError
from zarrfs.fs.hierarchy import Hierarchy
from zarrfs.fs.xattrs import ExtendedAttributes
from zarrfs.fuse.errno_boundary import errno_boundary
from zarrfs.fuse.libfuse import mfusepy
from zarrfs.stores.local import LocalStore


@pytest.fixture
def xattrs(tmp_path):
    hierarchy = Hierarchy(LocalStore(str(make_store(tmp_path / "s.zarr"))))
    return ExtendedAttributes(hierarchy, enabled=True, is_draft=lambda path: path == "/draft.json")


def answer(method, *args) -> int:
    with pytest.raises(RoutineError) as raised:
        method(*args)
    return raised.value.errno


def test_an_arrays_files_describe_it_and_a_group_gives_its_attributes(xattrs):
    assert {"user.zarr.shape", "user.zarr.dtype", "user.mime_type"} <= set(xattrs.list("/a.bin"))
    assert json.loads(xattrs.get("/a.json", "user.zarr.shape")) == [4]
    assert xattrs.get("/a.bin", "user.mime_type") == b"application/x-zarrfs-raw"  # the mount's own type
    assert xattrs.list("/sub") == ["user.zarr.attributes"]
    assert json.loads(xattrs.get("/sub", "user.zarr.attributes")) == {"title": "inner"}


def test_the_routine_answers_carry_their_errno(xattrs):
    assert answer(xattrs.get, "/sub", "user.zarr.shape") == errno.ENODATA
    assert answer(xattrs.get, "/a.bin", "security.selinux") == errno.ENOTSUP
    assert answer(xattrs.list, "/nothing.bin") == errno.ENOENT
    assert xattrs.list("/draft.json") == []
    assert answer(xattrs.get, "/draft.json", "user.mime_type") == errno.ENODATA
    xattrs.check("user.zarr.attr.units")  # a name setxattr may be asked for
    xattrs.enabled = False  # -o noxattr
    assert answer(xattrs.list, "/a.bin") == errno.ENOSYS


def test_the_boundary_passes_a_routine_answer_on_without_a_log_line(caplog):
    class Probe:
        @errno_boundary
        def getxattr(self):
            raise RoutineError("/a.bin: no attribute user.x", errno.ENODATA)

    with caplog.at_level(logging.DEBUG), pytest.raises(mfusepy.FuseOSError) as raised:
        Probe().getxattr()
    assert raised.value.errno == errno.ENODATA and caplog.records == []
