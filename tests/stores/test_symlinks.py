"""-o symlinks=follow, for trusted stores that share chunks through symlinks (neuroglancer's
OME-Zarr test data links array/c/0/0/0 to ../../../../../../base_array/0): links out of the
store are read through, never to a FIFO, socket, device or anything under /proc, /sys or /dev,
and never written through: a write replaces the link with a value of the store's own. Without
the option such a chunk is refused (tests/fuse/test_hostile.py).

Asked of the core without a mount (core.py), but for the links to FIFOs and devices: a read
that hung there would hang the test's own process, so those are read through a mount by a
probe of their own."""

import errno
import os

import pytest

from core import core_of
from helpers import READ, array_doc, group_doc, probe, write_doc
from mounting import mounted

CHUNK = 4096  # page-sized chunks: the kernel reads whole pages, so each chunk's error stays its own
SHARED = bytes(range(256)) * 16
OWN, OTHER = b"\x08" * CHUNK, b"\x09" * CHUNK


@pytest.fixture
def linked(tmp_path):
    """(store, the shared directory outside it): arrays of two uint8 chunks whose chunk 0
    lives elsewhere, as a link to a file, through a linked chunk directory, or at a FIFO, a
    device or a file of /proc or /sys."""
    root, shared = tmp_path / "store", tmp_path / "shared"
    (shared / "dir").mkdir(parents=True)
    (shared / "0").write_bytes(SHARED)
    (shared / "dir" / "0").write_bytes(SHARED)
    (shared / "dir" / "1").write_bytes(OTHER)
    os.mkfifo(shared / "fifo")
    targets = {"file": shared / "0", "fifo": shared / "fifo", "device": "/dev/zero", "proc": "/proc/version",
               "sys": "/sys/kernel/mm/transparent_hugepage/enabled", "upward": "../../../shared/0",
               "dangling": shared / "gone", "loop": shared / "loop"}
    os.symlink("loop", shared / "loop")
    write_doc(root, "", group_doc())
    for name, target in targets.items():
        write_doc(root, name, array_doc([2 * CHUNK], "uint8", [CHUNK], fill_value=0))
        (root / name / "c").mkdir()
        (root / name / "c" / "1").write_bytes(OWN)
        os.symlink(target, root / name / "c" / "0")
    write_doc(root, "linkeddir", array_doc([2 * CHUNK], "uint8", [CHUNK], fill_value=0))
    os.symlink(shared / "dir", root / "linkeddir" / "c")
    return root, shared


def read(path, offset=0, size=2 * CHUNK):
    out = probe(READ, path, offset, size).stdout.split()
    return int(out[1]) if out[0] == "errno" else bytes.fromhex(out[0])


def read_core(core, path, offset=0, size=2 * CHUNK):
    """What one pread of the core's `path` gives: its bytes, or the errno."""
    fh = core.open(path, os.O_RDONLY)
    try:
        return core.pread(fh, size, offset)
    except OSError as e:
        return e.errno
    finally:
        core.close(fh)


def test_links_out_of_a_trusted_store_are_read_through(linked, tmp_path):
    root, _ = linked
    with core_of(root, tmp_path, "ro", "symlinks=follow") as c:
        assert read_core(c, "/file.bin") == SHARED + OWN
        assert read_core(c, "/upward.bin") == SHARED + OWN  # relative, as neuroglancer's are
        assert read_core(c, "/linkeddir.bin") == SHARED + OTHER


@pytest.mark.parametrize("name", ["fifo", "device", "proc", "sys"])
def test_links_to_fifos_devices_and_kernel_files_are_never_followed(linked, tmp_path, name):
    root, _ = linked
    with mounted(root, tmp_path, "ro", "symlinks=follow") as m:
        assert read(m / f"{name}.bin", 0, 4) == errno.EACCES  # no hang on the FIFO, nothing of the kernel's
        assert read(m / f"{name}.bin", CHUNK, CHUNK) == OWN  # the chunk beside it
        assert f"{name}/c/0" in m.log()


def test_a_link_out_that_leads_nowhere_reads_as_a_missing_chunk_and_a_loop_fails(linked, tmp_path):
    root, _ = linked
    with core_of(root, tmp_path, "ro", "symlinks=follow") as c:
        assert read_core(c, "/dangling.bin") == bytes(CHUNK) + OWN  # the fill value
        assert read_core(c, "/loop.bin", 0, 4) == errno.ELOOP
        assert read_core(c, "/loop.bin", CHUNK, CHUNK) == OWN


def test_without_the_option_links_out_stay_refused(linked, tmp_path):
    root, _ = linked
    with core_of(root, tmp_path, "ro") as c:
        assert read_core(c, "/file.bin", 0, 4) == errno.EACCES
        assert read_core(c, "/linkeddir.bin", 0, 4) == errno.EACCES
        assert "leads outside the store" in c.log()


def test_a_write_replaces_the_link_and_leaves_the_shared_chunk_as_it_is(linked, tmp_path):
    root, shared = linked
    with core_of(root, tmp_path, "symlinks=follow") as c:
        fh = c.open("/file.bin", os.O_RDWR)
        try:
            c.pwrite(fh, b"\xff", 1)  # part of the linked chunk: merged with the shared values
            c.fsync(fh)
        finally:
            c.close(fh)
        assert read_core(c, "/file.bin") == SHARED[:1] + b"\xff" + SHARED[2:] + OWN
    chunk = root / "file" / "c" / "0"
    assert not chunk.is_symlink() and chunk.read_bytes() == SHARED[:1] + b"\xff" + SHARED[2:]
    assert (shared / "0").read_bytes() == SHARED


def test_a_write_under_a_linked_chunk_directory_is_refused_and_changes_nothing_outside(linked, tmp_path):
    """The directory is shared as a whole: writing in it would write through the link."""
    root, shared = linked
    with core_of(root, tmp_path, "symlinks=follow") as c:
        fh = c.open("/linkeddir.bin", os.O_RDWR)
        try:
            c.pwrite(fh, b"\xff", 1)
            with pytest.raises(OSError) as raised:
                c.fsync(fh)
            assert raised.value.errno == errno.EACCES
        finally:
            try:
                c.close(fh)
            except OSError:
                pass
    assert sorted(p.name for p in (shared / "dir").iterdir()) == ["0", "1"]
    assert (shared / "dir" / "0").read_bytes() == SHARED


def test_an_unknown_symlinks_value_is_refused():
    from zarrfs.cli.command import UsageError, parse_options
    assert parse_options(["symlinks=follow"])[0].follow_symlinks
    assert not parse_options(["symlinks=contain"])[0].follow_symlinks and not parse_options([])[0].follow_symlinks
    with pytest.raises(UsageError, match="choose follow"):
        parse_options(["symlinks=yes"])
