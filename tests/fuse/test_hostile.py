"""A hostile or broken store through a real mount: every bad node is listed, opening it fails with
the documented errno and a log line, its siblings keep working, nothing outside the store is read
or written, and no request hangs (probes run in a child process with a time limit)."""

import errno
import json
import os

import numpy as np
import pytest
import zarr

import zarrfs
from helpers import OPEN_ERRNO, READ, array_doc, group_doc, probe, sharding, write_doc
from mounting import mounted

ROW = bytes(range(256)) * 16
ZSTD_SPIN = bytes.fromhex("28b52ffd10198100004445464754557651646566677475767728b5")
ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]

# name -> (what is wrong, errno of opening NAME.bin, a phrase of the log line)
BROKEN = {
    "nested": (b"[" * 200_000, errno.EIO, "nested too deeply"),
    "bigint": (None, errno.EIO, "not valid JSON"),
    "superscript": ("r²", errno.EOPNOTSUPP, "unsupported data type 'r²'"),
    "wide": ("r88888888888888888888", errno.EOPNOTSUPP, "wider than zarrfs's limit"),
    "transformers": (5, errno.EIO, "storage_transformers must be a list"),
    "docdir": (None, errno.EIO, "is a directory, not a regular file"),
    "docfifo": (None, errno.EIO, "is a FIFO, socket or device"),
    "loop": (None, errno.ELOOP, "loop/zarr.json"),
    "escape": (None, errno.EACCES, "leads outside the store"),
    "hugechunk": (None, errno.EOPNOTSUPP, "more than zarrfs's limit"),
    "hugeshard": (None, errno.EOPNOTSUPP, "inner chunks per shard, more than"),
}


def build(root, outside):
    """A store whose every child but `good*` is broken in one way, and a directory outside it."""
    write_doc(root, "", group_doc())
    z = zarr.create_array(str(root / "good"), shape=(8,), chunks=(4,), dtype="int32", compressors=None)
    z[...] = np.arange(8)
    write_doc(root, "nested", {})
    (root / "nested" / "zarr.json").write_bytes(BROKEN["nested"][0])
    write_doc(root, "bigint", {})
    (root / "bigint" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", "shape": [%s]}' % ("9" * 5000))
    write_doc(root, "superscript", array_doc([4], "r²", [4], fill_value=[0]))
    write_doc(root, "wide", array_doc([4], "r88888888888888888888", [4], fill_value=[0]))
    write_doc(root, "transformers", array_doc([4], "int8", [4], storage_transformers=5))
    (root / "docdir" / "zarr.json").mkdir(parents=True)
    (root / "docfifo").mkdir()
    os.mkfifo(root / "docfifo" / "zarr.json")
    os.symlink("loop", root / "loop")
    write_doc(outside, "secret", array_doc([4], "uint8", [4], fill_value=42))
    os.symlink(outside / "secret", root / "escape")
    write_doc(root, "hugechunk", array_doc([4], "uint8", [2**40]))
    write_doc(root, "hugeshard", array_doc([2**20, 2**20], "uint8", [2**20, 2**20], codecs=[sharding([1, 1])]))
    # chunks that are hostile, in arrays that are not
    # page-sized rows: the kernel reads whole pages, so each row's error stays its own
    write_doc(root, "chunky", array_doc([4, 4096], "uint8", [1, 4096], fill_value=7))
    chunks = root / "chunky" / "c"
    chunks.mkdir()
    (chunks / "0").mkdir()
    (chunks / "0" / "0").write_bytes(ROW)  # row 0: stored
    os.symlink("0", chunks / "1")  # row 1: a symlink that stays inside: followed
    (chunks / "2").mkdir()
    os.mkfifo(chunks / "2" / "0")  # row 2: a FIFO where a chunk should be
    (outside / "row").mkdir()
    (outside / "row" / "0").write_bytes(b"LEAK")
    os.symlink(outside / "row", chunks / "3")  # row 3: a chunk directory outside the store
    for size in (16, 4096):  # the frame holds 16 bytes: a valid chunk of the first, short for the second
        write_doc(root, f"spin{size}", array_doc([size], "uint8", [size], codecs=ZSTD))
        (root / f"spin{size}" / "c").mkdir()
        (root / f"spin{size}" / "c" / "0").write_bytes(ZSTD_SPIN)
    write_doc(root, "escaping_chunks", array_doc([4], "uint8", [4]))
    os.symlink(outside / "row", root / "escaping_chunks" / "c")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    root, outside = base / "store", base / "outside"
    outside.mkdir()
    build(root, outside)
    before = snapshot(outside)
    with mounted(root, base) as m:
        yield m, outside, before


def snapshot(directory) -> dict:
    return {str(p.relative_to(directory)): (p.stat().st_mtime_ns, p.is_file() and p.read_bytes())
            for p in sorted(directory.rglob("*"))}


def test_every_bad_node_is_listed_and_its_siblings_work(hostile):
    m, _, _ = hostile
    names = set(os.listdir(m.path))
    assert {f"{name}.bin" for name in BROKEN} <= names and {f"{name}.json" for name in BROKEN} <= names
    assert (m / "good.bin").read_bytes() == np.arange(8, dtype="<i4").tobytes()


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_opening_a_bad_node_fails_with_its_errno_and_one_log_line(hostile, name):
    m, _, _ = hostile
    _, code, phrase = BROKEN[name]
    result = probe(OPEN_ERRNO, m / f"{name}.bin")
    assert int(result.stdout) == code, (name, result)
    assert phrase in m.log(), m.log()[-2000:]
    assert m.process.poll() is None
    assert (m / "good.bin").read_bytes() == np.arange(8, dtype="<i4").tobytes()


def test_no_traceback_in_the_log(hostile):
    m, _, _ = hostile
    os.listdir(m.path)
    assert "Traceback" not in m.log()


def test_chunks_that_are_symlinks_fifos_or_outside_the_store(hostile):
    m, _, _ = hostile
    path = m / "chunky.bin"
    assert probe(READ, path, 0, 8192).stdout.strip() == (ROW * 2).hex()  # row 1 follows its inside symlink
    assert probe(READ, path, 8192, 4).stdout.split() == ["errno", str(errno.EIO)]  # the FIFO: no hang
    result = probe(READ, path, 12288, 4)
    assert result.stdout.split() == ["errno", str(errno.EACCES)] and b"LEAK".hex() not in result.stdout
    log = m.log()
    assert "chunky/c/2/0" in log and "chunky/c/3/0" in log and "leads outside the store" in log


def test_a_zstd_frame_that_makes_numcodecs_spin_fails_quickly(hostile):
    m, _, _ = hostile
    # one whole frame of 16 bytes, then the first 2 bytes of another: a stream cut short
    for size in (16, 4096):
        assert probe(READ, m / f"spin{size}.bin", 0, 16).stdout.split() == ["errno", str(errno.EIO)]
        assert f"spin{size}/c/0: undecodable zstd stream (truncated)" in m.log()


def test_writes_never_create_or_change_anything_outside(hostile):
    m, outside, before = hostile
    code = ("import os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\ntry:\n"
            "    os.pwrite(fd, b'XYZW' * int(sys.argv[3]), int(sys.argv[2]))\n    os.fsync(fd)\n    print(0)\n"
            "except OSError as e:\n    print(e.errno)\nfinally:\n    try:\n        os.close(fd)\n"
            "    except OSError:\n        pass")
    assert probe(code, m / "escaping_chunks.bin", 0, 1).stdout.strip() == str(errno.EACCES)  # a whole chunk
    assert probe(code, m / "chunky.bin", 12288, 1024).stdout.strip() == str(errno.EACCES)  # a whole row
    assert snapshot(outside) == before
    assert m.process.poll() is None


def test_the_python_api_refuses_keys_that_leave_the_root(hostile, tmp_path):
    m, outside, _ = hostile
    for path in ["../outside/secret", "/etc", "good/../../outside/secret", "escape"]:
        with pytest.raises(zarrfs.ZarrfsError):
            zarrfs.open_raw(str(m.source), path)
    with zarrfs.open_raw(str(m.source), "good") as view:
        assert view.read(0, 8) == np.arange(2, dtype="<i4").tobytes()


def test_a_store_that_is_a_symlink_inside_out_is_still_contained(tmp_path):
    """SOURCE may itself be a symlink (the user's choice); what it holds is still contained."""
    outside = tmp_path / "outside"
    (outside / "leak").mkdir(parents=True)
    (outside / "leak" / "zarr.json").write_text(json.dumps(array_doc([4], "uint8", [4], fill_value=9)))
    real = tmp_path / "real"
    write_doc(real, "", group_doc())
    os.symlink("../outside/leak", real / "up")  # leaves through '..'
    os.symlink(real, tmp_path / "link")
    with mounted(tmp_path / "link", tmp_path) as m:
        assert "up.bin" in os.listdir(m.path)
        assert int(probe(OPEN_ERRNO, m / "up.bin").stdout) == errno.EACCES
