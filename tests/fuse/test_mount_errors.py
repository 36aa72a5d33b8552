"""Start-up errors, corrupt chunks, broken nodes, name collisions, daemon mode and signals.

What the file system answers (errnos, log lines, listings) is asked of the core without a mount
(core.py); start-up, the kernel's retried reads, daemon mode and signals need a real mount."""

import errno
import gzip
import json
import os
import signal
import stat
import subprocess

import numpy as np
import pytest
import zarr

from core import core_of
from helpers import array_doc, group_doc, write_doc
from mounting import ZARRFS, daemon_places, mounted, reap, unmount, wait_for


def small_hierarchy(root):
    group = zarr.open_group(str(root), mode="w")
    z = group.create_array("good", shape=(8,), chunks=(4,), dtype="int32", compressors=None)
    z[...] = np.arange(8)
    from zarr.codecs import BytesCodec, Crc32cCodec
    # page-sized chunks: the kernel reads whole pages, so a corrupt chunk fails only its own pages
    z = group.create_array("checked", shape=(4096,), chunks=(1024,), dtype="int32", serializer=BytesCodec(),
                           compressors=[Crc32cCodec()])
    z[...] = np.arange(4096)
    return root


def run_zarrfs(*args):
    return subprocess.run([ZARRFS, *map(str, args)], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("case", ["missing source", "not zarr", "missing mountpoint", "mountpoint is a file",
                                  "mountpoint under a missing directory", "already mounted", "unknown option",
                                  "misspelt option", "bad cache size", "mountpoint not empty",
                                  "unknown scheme"])
def test_startup_errors_are_one_line_and_leave_no_mount(tmp_path, case):
    source = small_hierarchy(tmp_path / "data.zarr")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    args, expect = [source, mnt], None
    if case == "missing source":
        args[0], expect = tmp_path / "nope", "nope: source: no such directory"
    elif case == "not zarr":
        (tmp_path / "plain").mkdir()
        args[0], expect = tmp_path / "plain", "not a Zarr hierarchy: neither zarr.json (v3) nor .zgroup or .zarray (v2)"
    elif case == "missing mountpoint":
        args[1], expect = tmp_path / "nomnt", "nomnt: mount point: no such directory"
    elif case == "mountpoint is a file":
        (tmp_path / "file").write_bytes(b"")
        args[1], expect = tmp_path / "file", "file: mount point is not a directory"
    elif case == "mountpoint under a missing directory":
        args[1], expect = tmp_path / "no" / "mnt", "mnt: mount point: its parent directory does not exist"
    elif case == "unknown option":
        args += ["-o", "ro,frobnicate"]
        expect = "unknown option 'frobnicate' (zarrfs --help lists the options)"  # nothing close to it
    elif case == "misspelt option":
        args += ["-o", "ro,endpiont=http://h:1"]
        expect = "unknown option 'endpiont': did you mean endpoint=? (zarrfs --help lists the options)"
    elif case == "bad cache size":
        args += ["-o", "cache_size=lots"]
        expect = "cache_size='lots' is not a size"  # as given, not as parsed
    elif case == "mountpoint not empty":
        (mnt / "notes.txt").write_bytes(b"mine")
        expect = "mnt: mount point is not empty (it holds 'notes.txt', which the mount would hide)"
    elif case == "unknown scheme":
        args[0], expect = "s4://test/exp.zarr", "s4://test/exp.zarr: unknown scheme s4://: zarrfs takes az://, gs://"
    if case == "already mounted":
        with mounted(source, tmp_path, "ro") as m:
            result = run_zarrfs(source, m.path)
            assert result.returncode != 0 and "already a mount point" in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
        return
    result = run_zarrfs(*args)
    assert result.returncode != 0
    assert expect in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not os.path.ismount(mnt)


def test_nonempty_mounts_over_files_and_leaves_them_there(tmp_path):
    source = small_hierarchy(tmp_path / "data.zarr")
    (tmp_path / "mnt").mkdir()
    (tmp_path / "mnt" / "notes.txt").write_bytes(b"mine")
    with mounted(source, tmp_path, "ro", "nonempty") as m:
        assert "good.bin" in os.listdir(m.path) and "notes.txt" not in os.listdir(m.path)
    assert (tmp_path / "mnt" / "notes.txt").read_bytes() == b"mine"


def test_corrupt_chunk_is_eio_for_that_read_only(tmp_path):
    source = small_hierarchy(tmp_path / "data.zarr")
    chunk = source / "checked" / "c" / "1"
    chunk.write_bytes(bytes([chunk.read_bytes()[0] ^ 0xFF]) + chunk.read_bytes()[1:])
    with core_of(source, tmp_path, "ro") as c:
        fh = c.open("/checked.bin", os.O_RDONLY)
        try:
            assert c.pread(fh, 16, 0) == np.arange(4, dtype="<i4").tobytes()
            with pytest.raises(OSError) as info:
                c.pread(fh, 4, 4096)
            assert info.value.errno == errno.EIO
            assert c.pread(fh, 8, 8192) == np.arange(2048, 2050, dtype="<i4").tobytes()
        finally:
            c.close(fh)
        assert c.read_bytes("/good.bin") == np.arange(8, dtype="<i4").tobytes()
        [line] = [line for line in c.log().splitlines() if "checked/c/1" in line]
        assert "crc32c mismatch" in line and "/checked.bin" in line


def test_a_gzip_bomb_fails_reads_of_every_size(tmp_path):
    """An 8 KiB gzip chunk whose stream inflates to 1 MiB of zeros: the kernel's 8 KiB read got
    EIO, and its 4 KiB retry 4096 zero bytes (a prefix decode answered from the refused chunk)."""
    from zarr.codecs import BytesCodec, GzipCodec
    source = tmp_path / "data.zarr"
    z = zarr.open_group(str(source), mode="w").create_array(
        "bomb", shape=(4096,), chunks=(2048,), dtype="int32", serializer=BytesCodec(), compressors=[GzipCodec(level=1)])
    z[...] = np.arange(4096)
    (source / "bomb" / "c" / "0").write_bytes(gzip.compress(bytes(1 << 20), 1))
    with mounted(source, tmp_path, "ro") as m:
        for size in (4, 4096, 8192):
            fd = os.open(m / "bomb.bin", os.O_RDONLY)
            try:
                with pytest.raises(OSError) as info:
                    os.pread(fd, size, 0)
                assert info.value.errno == errno.EIO, size
            finally:
                os.close(fd)
        head = subprocess.run(["head", "-c", "4", str(m / "bomb.bin")], capture_output=True)
        assert head.returncode != 0 and head.stdout == b""
        with open(m / "bomb.bin", "rb") as f:  # the next chunk is sound
            f.seek(8192)
            assert f.read(8) == np.arange(2048, 2050, dtype="<i4").tobytes()
        assert "bomb/c/0: gzip stream decodes to more than the 8192 bytes expected" in m.log()


def test_broken_nodes_are_listed_and_fail_to_open_with_a_log_line(tmp_path):
    source = small_hierarchy(tmp_path / "data.zarr")
    write_doc(source, "unsupported", array_doc([4], "int8", [2], codecs=[{"name": "bytes"}, {"name": "lzma"}]))
    (source / "malformed").mkdir()
    (source / "malformed" / "zarr.json").write_text("{ not json")
    write_doc(source, "weird", array_doc([4], "float128", [2]))
    with core_of(source, tmp_path, "ro") as c:
        names = set(c.listdir())
        assert {"unsupported.bin", "unsupported.json", "malformed.bin", "weird.bin", "good.bin"} <= names
        for name, code in [("unsupported.bin", errno.EOPNOTSUPP), ("malformed.bin", errno.EIO),
                           ("weird.bin", errno.EOPNOTSUPP)]:
            with pytest.raises(OSError) as info:
                c.open(f"/{name}", os.O_RDONLY)
            assert info.value.errno == code, name
        assert c.read_bytes("/good.bin") == np.arange(8, dtype="<i4").tobytes()
        log = c.log()
        assert "unsupported/zarr.json: codecs[1] (lzma): unsupported codec" in log
        assert "malformed/zarr.json: not valid JSON" in log
        assert "weird/zarr.json: data_type: unsupported data type 'float128'" in log


def test_every_eio_has_a_line_naming_the_file_and_the_cause(tmp_path):
    """zarr-extensions' own examples (scale_offset on float32 and cast_value from float64, each
    followed by a "bytes" without endian or with a "+Infinity" zarrfs refuses), a Zarr v2 zfpy
    array without the zfpy package, and a corrupt chunk: each failure has its line in the
    daemon's log naming the file and why (a broken node's once, when it is read)."""
    source = small_hierarchy(tmp_path / "data.zarr")
    write_doc(source, "scaled", array_doc([4], "float32", [4], codecs=[
        {"name": "scale_offset", "configuration": {"offset": 5, "scale": 0.1}}, "bytes"]))
    write_doc(source, "cast", array_doc([4], "float64", [4], codecs=[
        {"name": "cast_value", "configuration": {"data_type": "uint8", "rounding": "towards-zero", "out_of_range": "wrap",
                                                 "scalar_map": {"encode": [["NaN", 0], ["+Infinity", 0]]}}}, "bytes"]))
    (source / "zfp").mkdir()
    (source / "zfp" / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f8", "fill_value": 0.0, "order": "C", "filters": None,
        "compressor": {"id": "zfpy", "mode": 4, "tolerance": -1, "rate": -1, "precision": -1}}))
    chunk = source / "checked" / "c" / "1"
    chunk.write_bytes(bytes([chunk.read_bytes()[0] ^ 0xFF]) + chunk.read_bytes()[1:])
    with core_of(source, tmp_path, "ro") as c:
        for name, code in [("scaled.bin", errno.EIO), ("cast.bin", errno.EIO), ("zfp.bin", errno.EOPNOTSUPP)]:
            for _ in range(2):
                with pytest.raises(OSError) as info:
                    c.open(f"/{name}", os.O_RDONLY)
                assert info.value.errno == code, name
        fh = c.open("/checked.bin", os.O_RDONLY)
        with pytest.raises(OSError) as info:
            c.pread(fh, 4, 4096)
        c.close(fh)
        assert info.value.errno == errno.EIO
        lines = c.log().splitlines()
        for start, cause in [("scaled/zarr.json: ", "codecs[1] (bytes): missing configuration.endian for float32"),
                             ("cast/zarr.json: ", "'+Infinity' is not a float fill value"),
                             ("zfp/.zarray: ", "needs the Python package 'zfpy'"),
                             ("read /checked.bin: ", "checked/c/1: crc32c mismatch")]:
            found = [line for line in lines if start in line and cause in line]
            assert len(found) == 1, (start, c.log())


def test_name_collisions_hide_nothing(tmp_path):
    source = tmp_path / "data.zarr"
    write_doc(source, "", group_doc())
    write_doc(source, "zarr", array_doc([2], "uint8", [2]))  # zarr.json would collide with the group's
    write_doc(source, "x.bin", group_doc())  # a group named like an array file
    write_doc(source, "x", array_doc([3], "uint8", [3], fill_value=7))
    with core_of(source, tmp_path, "ro", "views=none") as c:  # with views: test_views_listing.py
        assert sorted(c.listdir()) == ["x.array.bin", "x.array.json", "x.bin", "zarr.array.bin", "zarr.array.json",
                                       "zarr.json"]
        assert c.read_bytes("/x.array.bin") == b"\x07" * 3
        assert json.loads(c.read_text("/x.array.json"))["data_file"] == "x.array.bin"
        assert stat.S_ISDIR(c.stat("/x.bin")["st_mode"])
        assert json.loads(c.read_text("/zarr.json"))["node_type"] == "group"
        assert "collides" in c.log()


def test_source_may_be_a_group_or_an_array_inside_a_hierarchy(tmp_path):
    source = small_hierarchy(tmp_path / "data.zarr")
    with core_of(source / "good", tmp_path, "ro") as c:
        assert sorted(c.listdir()) == ["good.bin", "good.bin.hdr", "good.bin.nhdr", "good.json", "good.mhd", "good.npy",
                                       "good.vrt"]
        assert c.read_bytes("/good.bin") == np.arange(8, dtype="<i4").tobytes()


def test_daemon_mode_returns_once_live_and_exits_after_unmount(tmp_path):
    source = small_hierarchy(tmp_path / "data.zarr")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = run_zarrfs(source, mnt, "-o", f"ro,cache_size=64M,{daemon_places(tmp_path)}")
    try:
        assert result.returncode == 0, result.stderr
        assert os.path.ismount(mnt)  # live when the command returns
        assert (mnt / "good.bin").read_bytes() == np.arange(8, dtype="<i4").tobytes()
        pids = subprocess.run(["pgrep", "-f", f"zarrfs {source} {mnt}"], capture_output=True, text=True).stdout.split()
        assert len(pids) == 1
    finally:
        unmount(mnt)
    wait_for(lambda: subprocess.run(["pgrep", "-f", f"zarrfs {source} {mnt}"], capture_output=True).returncode,
             what="the daemon to exit")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_unmount_cleanly(tmp_path, sig):
    source = small_hierarchy(tmp_path / "data.zarr")
    with mounted(source, tmp_path) as m:
        m.process.send_signal(sig)
        reap(m.process)
        assert m.process.returncode == 0
        assert not os.path.ismount(m.path)
