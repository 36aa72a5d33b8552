"""Arrays that grow (docs/writing.md, "Appending"): records appended to NAME.bin through the mount
(pwrite at the end, O_APPEND from the shell, dd, a C program's fwrite), truncate to whole records,
a partial record at close, kill -9 while appending, a reader while a writer appends; zarr-python
reads what the mount stored."""

import errno
import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

import h5py
import numcodecs
import numpy as np
import pytest
import tensorstore
import zarr
from zarr.codecs import ZstdCodec

from core import core_of
from mounting import kill_9_with_open, mounted, wait_for
from servers.seaweed import unique_prefix

RECORD = (3, 5)  # each record: a 3 x 5 plane of int32, 60 bytes
RECORD_BYTES = 60
KINDS = {
    "v3-uncompressed": dict(zarr_format=3, compressors=None),
    "v3-zstd": dict(zarr_format=3, compressors=[ZstdCodec(level=1)]),
    "v3-sharded": dict(zarr_format=3, shards=(4, 3, 5), compressors=[ZstdCodec(level=1)]),
    "v2-zstd": dict(zarr_format=2, compressors=numcodecs.Zstd(level=1)),
}


def records(first: int, count: int) -> np.ndarray:
    return (np.arange(first * 15, (first + count) * 15, dtype="<i4") * 7 + 1).reshape(count, *RECORD)


def make(root, kind: str, count: int = 5, attributes: dict | None = None) -> None:
    """Group `root` (a directory, or zarr-python's store) holding array `frames` of `count`
    records, chunks of 2 records."""
    where = str(root) if isinstance(root, Path) else root
    group = zarr.open_group(where, mode="w", zarr_format=KINDS[kind]["zarr_format"])
    options = {k: v for k, v in KINDS[kind].items() if k != "zarr_format"}
    array = group.create_array("frames", shape=(count, *RECORD), chunks=(2, 3, 5), dtype="<i4", fill_value=-1,
                               attributes=attributes or {}, **options)
    if count:
        array[:] = records(0, count)


def stored(root: Path) -> np.ndarray:
    return zarr.open_array(str(root / "frames"), mode="r")[...]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_appends_grow_the_array(tmp_path, kind):
    """pwrite at the end (a partial record first, then the rest of it), `cat >>`, `dd
    oflag=append conv=notrunc` and Python's append mode: each grows dimension 0 by the records
    it completes; stat and reads follow at once, the store and the views after close."""
    root = tmp_path / "g.zarr"
    make(root, kind)
    more = tmp_path / "more.raw"
    with mounted(root, tmp_path, "grow=all") as m:
        data = m / "frames.bin"
        npy_before, tif_before = os.stat(m / "frames.npy").st_size, os.stat(m / "frames.tif").st_size
        with h5py.File(m / "zarr.h5", "r") as h5:  # opened before the growth: the kernel caches it
            assert h5["frames"].shape == (5, *RECORD)
        fd = os.open(data, os.O_WRONLY)
        try:
            new = records(5, 2).tobytes()
            assert os.pwrite(fd, new[:25], 5 * RECORD_BYTES) == 25  # a partial record: pending
            assert os.fstat(fd).st_size == 5 * RECORD_BYTES + 25
            assert os.pwrite(fd, new[25:], 5 * RECORD_BYTES + 25) == len(new) - 25
            assert os.fstat(fd).st_size == 7 * RECORD_BYTES
        finally:
            os.close(fd)
        assert stored(root).shape == (7, *RECORD)
        more.write_bytes(records(7, 3).tobytes())
        subprocess.run(f"cat {more} >> {data}", shell=True, check=True)
        more.write_bytes(records(10, 2).tobytes())
        subprocess.run(["dd", f"if={more}", f"of={data}", "oflag=append", "conv=notrunc", "status=none"], check=True)
        with open(data, "ab") as f:
            f.write(records(12, 1).tobytes())
        assert os.stat(data).st_size == 13 * RECORD_BYTES
        assert data.read_bytes() == records(0, 13).tobytes()
        assert np.array_equal(stored(root), records(0, 13))  # zarr-python: shape and values
        wait_for(lambda: os.stat(m / "frames.npy").st_size == npy_before + 8 * RECORD_BYTES, what="NAME.npy's size")
        wait_for(lambda: os.stat(m / "frames.tif").st_size >= tif_before + 8 * RECORD_BYTES, what="NAME.tif's size")
        header = (m / "frames.npy").read_bytes()[:128]
        assert b"'shape': (13, 3, 5)" in header
        assert json.loads((m / "frames.json").read_bytes())["shape"] == [13, *RECORD]
        with h5py.File(m / "zarr.h5", "r") as h5:
            assert h5["frames"].shape == (13, *RECORD) and np.array_equal(h5["frames"][...], records(0, 13))
    assert np.array_equal(stored(root), records(0, 13))
    driver = "zarr3" if KINDS[kind]["zarr_format"] == 3 else "zarr"  # tensorstore reads it as well
    spec = {"driver": driver, "kvstore": {"driver": "file", "path": str(root / "frames")}}
    assert np.array_equal(tensorstore.open(spec).result().read().result(), records(0, 13))


def test_which_arrays_grow(tmp_path):
    """By default (grow=marked) an array grows when NCZarr marks its first dimension unlimited,
    or when dimension 0 is stored empty; others keep their size (EFBIG), and grow=none keeps
    every size."""
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2,
                            attributes={"_nczarr_group": {"dims": {"time": {"size": 2, "unlimited": 1}, "y": 3}}})
    for name, dims in (("marked", ["/time", "/y"]), ("fixed", ["/y", "/y"])):
        array = group.create_array(name, shape=(2, 3), chunks=(1, 3), dtype="<i2",
                                   attributes={"_nczarr_array": {"dimrefs": dims}})
        array[:] = 1
    group.create_array("empty", shape=(0, 3), chunks=(4, 3), dtype="<i2")
    row = np.array([5, 6, 7], "<i2").tobytes()
    with mounted(root, tmp_path) as m:
        for name in ("marked", "empty"):
            with open(m / f"{name}.bin", "ab") as f:
                f.write(row)
        with pytest.raises(OSError) as info, open(m / "fixed.bin", "ab") as f:
            f.write(row)
        assert info.value.errno == errno.EFBIG
    assert zarr.open_array(str(root / "marked"))[:].tolist() == [[1, 1, 1], [1, 1, 1], [5, 6, 7]]
    assert zarr.open_array(str(root / "empty"))[:].tolist() == [[5, 6, 7]]
    assert zarr.open_array(str(root / "fixed")).shape == (2, 3)
    with mounted(root, tmp_path, "grow=none", name="none") as m:
        with pytest.raises(OSError) as info, open(m / "marked.bin", "ab") as f:
            f.write(row)
        assert info.value.errno == errno.EFBIG
    assert zarr.open_array(str(root / "marked")).shape == (3, 3)


def test_nczarr_before_4_9_marks_unlimited_dimensions_in_its_zgroup_and_zarray(tmp_path):
    """NCZarr before 4.9 wrote `_nczarr_group` into .zgroup and `_nczarr_array` into .zarray,
    not into the attributes: read from the documents as parsed, the marked array grows."""
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("marked", "fixed"):
        group.create_array(name, shape=(2, 3), chunks=(1, 3), dtype="<i2")[:] = 1
    zgroup = json.loads((root / ".zgroup").read_text())
    zgroup["_nczarr_group"] = {"dims": {"time": {"size": 2, "unlimited": 1}, "y": 3}}
    (root / ".zgroup").write_text(json.dumps(zgroup))
    for name, dims in (("marked", ["/time", "/y"]), ("fixed", ["/y", "/y"])):
        zarray = json.loads((root / name / ".zarray").read_text())
        zarray["_nczarr_array"] = {"dimrefs": dims}
        (root / name / ".zarray").write_text(json.dumps(zarray))
    row = np.array([5, 6, 7], "<i2").tobytes()
    with core_of(root, tmp_path) as c:
        fh = c.open("/marked.bin", os.O_WRONLY)
        assert c.pwrite(fh, row, 12) == 6
        c.close(fh)
        fh = c.open("/fixed.bin", os.O_WRONLY)
        with pytest.raises(OSError) as info:
            c.pwrite(fh, row, 12)
        assert info.value.errno == errno.EFBIG
        c.close(fh)
    assert zarr.open_array(str(root / "marked"))[:].tolist() == [[1, 1, 1], [1, 1, 1], [5, 6, 7]]


@pytest.mark.parametrize("kind", ["v3-zstd", "v3-sharded", "v2-zstd"])
def test_truncate_to_whole_records(tmp_path, kind):
    """truncate shrinks dimension 0 (chunks past the end deleted, the edge chunk's old values
    gone) and grows it with the fill value, storing nothing for it; other sizes: EINVAL."""
    root = tmp_path / "g.zarr"
    make(root, kind, count=7)
    with mounted(root, tmp_path, "grow=all") as m:
        data = m / "frames.bin"
        subprocess.run(["truncate", "-s", str(3 * RECORD_BYTES), str(data)], check=True)
        assert os.stat(data).st_size == 3 * RECORD_BYTES
        assert np.array_equal(stored(root), records(0, 3))
        subprocess.run(["truncate", "-s", str(6 * RECORD_BYTES), str(data)], check=True)
        grown = stored(root)
        assert grown.shape == (6, *RECORD) and np.array_equal(grown[:3], records(0, 3)) and (grown[3:] == -1).all()
        assert data.read_bytes() == grown.tobytes()
        result = subprocess.run(["truncate", "-s", str(6 * RECORD_BYTES + 1), str(data)], capture_output=True)
        assert result.returncode != 0 and os.stat(data).st_size == 6 * RECORD_BYTES
        assert "not a whole number of 60-byte records" in m.settled_log()
    chunk_dir = root / "frames" / ("c" if kind.startswith("v3") else "")
    names = {p.relative_to(chunk_dir).as_posix() for p in chunk_dir.rglob("*") if p.is_file()}
    rows = 4 if kind == "v3-sharded" else 2  # records a chunk (shard) holds
    first = {int(n.split("/" if kind.startswith("v3") else ".")[0]) for n in names - {".zarray", ".zattrs"}}
    assert first == set(range(-(-3 // rows)))  # those past 3 records deleted, none stored for the grown ones


def appends_1000_records(root, tmp_path, compiler: str, source) -> None:
    """`source` compiled with `compiler`, run on the mount's frames.bin (dimension 0 stored empty:
    it grows by default): its 1000 records are the array's, in order."""
    program = tmp_path / "append"
    subprocess.run([compiler, "-O1", "-o", str(program), str(source)], check=True)
    with mounted(root, tmp_path) as m:
        subprocess.run([str(program), str(m / "frames.bin")], check=True)
        assert os.stat(m / "frames.bin").st_size == 1000 * RECORD_BYTES
    assert np.array_equal(stored(root), records(0, 1000))


def test_a_c_program_fwriting_records(tmp_path):
    """A C program that fopen(..., "ab")s NAME.bin and fwrites one record at a time (stdio
    buffers them in 4 KiB writes, which split records): every record arrives, none torn."""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=0)
    source = tmp_path / "append.c"
    source.write_text(r'''
#include <stdio.h>
#include <stdint.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "ab");
    if (!f) { perror("fopen"); return 1; }
    int32_t record[15];
    for (int r = 0; r < 1000; r++) {
        for (int i = 0; i < 15; i++) record[i] = (r * 15 + i) * 7 + 1;
        if (fwrite(record, sizeof record, 1, f) != 1) { perror("fwrite"); return 1; }
    }
    if (fclose(f)) { perror("fclose"); return 1; }
    return 0;
}
''')
    appends_1000_records(root, tmp_path, "gcc", source)


def test_a_fortran_program_writing_records(tmp_path):
    """A Fortran program that opens NAME.bin for stream access at its end (position='append')
    and writes one record at a time: every record arrives."""
    root = tmp_path / "g.zarr"
    make(root, "v2-zstd", count=0)
    source = tmp_path / "append.f90"
    source.write_text("""
program append
  implicit none
  integer(4) :: record(15)
  integer :: r, i
  character(len=4096) :: path
  call get_command_argument(1, path)
  open(unit=10, file=trim(path), access='stream', form='unformatted', position='append', &
       status='old', action='write')
  do r = 0, 999
    do i = 1, 15
      record(i) = (r * 15 + i - 1) * 7 + 1
    end do
    write(10) record
  end do
  close(10)
end program append
""")
    appends_1000_records(root, tmp_path, "gfortran", source)


def test_a_partial_record_at_close_is_saved_not_stored(tmp_path):
    """A close with a partial record pending fails (EIO, one log line naming the file); the whole
    records are stored, and the partial one's bytes are saved in the recovery directory."""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=2)
    tail = records(3, 1).tobytes()[:17]
    with mounted(root, tmp_path, "grow=all") as m:
        fd = os.open(m / "frames.bin", os.O_WRONLY | os.O_APPEND)
        os.write(fd, records(2, 1).tobytes() + tail)
        with pytest.raises(OSError) as info:
            os.close(fd)
        assert info.value.errno == errno.EIO
        log = m.settled_log()
        assert "the last 17 bytes written are a partial record (records are 60 bytes)" in log
        assert "/frames.bin" in log
    assert np.array_equal(stored(root), records(0, 3))
    saved = list((tmp_path / "mnt.recovery").glob("*/partial-record.bin"))
    assert len(saved) == 1 and saved[0].read_bytes() == tail
    manifest = json.loads((saved[0].parent / "recovery.json").read_text())
    assert manifest["partial_record"]["offset"] == 3 * RECORD_BYTES


def test_an_unmount_with_a_handle_open_and_a_partial_record_pending_saves_its_bytes(tmp_path):
    """Unmounted while a descriptor still holds a partial record (no close came): the whole
    records are stored, the partial one's bytes saved in the recovery directory with one log
    line, and the array counted as not stored (the daemon exits non-zero)."""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=2)
    tail = records(3, 1).tobytes()[:17]
    with core_of(root, tmp_path, "grow=all") as c:
        fh = c.open("/frames.bin", os.O_WRONLY)
        c.pwrite(fh, records(2, 1).tobytes() + tail, 2 * RECORD_BYTES)
    lines = [line for line in c.log().splitlines() if "never completed" in line]
    assert len(lines) == 1 and lines[0].startswith("ERROR") and "frames: 17 bytes of a record never completed " \
        "(records are 60 bytes) were not stored; saved in " in lines[0]
    assert c.fs.unstored == ["frames"]
    assert np.array_equal(stored(root), records(0, 3))
    saved = list((tmp_path / "core.recovery").glob("*/partial-record.bin"))
    assert len(saved) == 1 and saved[0].read_bytes() == tail and str(saved[0].parent) in lines[0]
    manifest = json.loads((saved[0].parent / "recovery.json").read_text())
    assert (manifest["partial_record"]["offset"], manifest["pieces"]) == (3 * RECORD_BYTES, [])


def test_kill_9_while_appending_leaves_the_old_or_the_new_array(tmp_path):
    """kill -9 while records are appended and fsynced: the store holds a shape some fsync
    stored (or one after it), and every record that shape shows is the one written."""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=1)
    with mounted(root, tmp_path, "grow=all") as m:
        fd = os.open(m / "frames.bin", os.O_WRONLY | os.O_APPEND)
        for r in range(1, 40):
            os.write(fd, records(r, 1).tobytes())
            if r % 5 == 0:
                os.fsync(fd)
        kill_9_with_open(m, fd)
    after = stored(root)
    assert 36 <= after.shape[0] <= 40
    assert np.array_equal(after, records(0, after.shape[0]))
    # records stored without the shape that shows them never show later: a truncate grows over
    # them with the fill value, an append writes its own
    n = after.shape[0]
    with mounted(root, tmp_path, "grow=all", name="again") as m:
        subprocess.run(["truncate", "-s", str((n + 4) * RECORD_BYTES), str(m / "frames.bin")], check=True)
        with open(m / "frames.bin", "ab") as f:
            f.write(records(n + 4, 2).tobytes())
    again = stored(root)
    assert again.shape == (n + 6, *RECORD) and np.array_equal(again[:n], records(0, n))
    assert (again[n:n + 4] == -1).all() and np.array_equal(again[n + 4:], records(n + 4, 2))


def test_a_reader_sees_records_as_they_are_appended(tmp_path):
    """A reader process re-reading NAME.bin in a loop while a writer appends 10,000 records one
    write each: every read shows the records written, in order, never others; the last, all.
    It reads with O_DIRECT, each read an answer of the daemon's (the page cache's readers: the
    next test)."""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=0)
    count = 10_000
    with mounted(root, tmp_path) as m:
        data = m / "frames.bin"
        reader = subprocess.Popen([sys.executable, "-c", READER, str(data), str(count * RECORD_BYTES)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert said_within(reader, 60) == "reading\n"  # its loop runs before the first append
            with open(data, "ab", buffering=0) as f:
                for r in range(count):
                    f.write(records(r, 1).tobytes())
            out, _ = reader.communicate(timeout=120)
        finally:
            reader.kill()
            reader.wait()
        sizes = [int(n) for n in out.split()]
        assert sizes[-1] == count * RECORD_BYTES and sizes == sorted(sizes)
    assert np.array_equal(stored(root), records(0, count))


READER = r'''
import mmap, os, sys, numpy as np
path, final = sys.argv[1], int(sys.argv[2])
seen = []
print("reading", flush=True)
while True:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(fd).st_size
    buffer = mmap.mmap(-1, size + 4096)  # page-aligned, as O_DIRECT wants
    data = bytes(buffer[:os.preadv(fd, [buffer], 0)])
    os.close(fd)
    whole = len(data) - len(data) % 60
    values = np.frombuffer(data[:whole], "<i4")
    bad = np.flatnonzero(values != np.arange(len(values), dtype="<i4") * 7 + 1)
    assert not len(bad), f"element {bad[0]} of {len(values)} read as {values[bad[0]]}, {len(bad)} wrong"
    if not seen or seen[-1] != len(data):
        seen.append(len(data))
    if len(data) >= final:
        break
print(" ".join(map(str, seen)))
'''



def said_within(reader: subprocess.Popen, seconds: float) -> str:
    """The next line a reader process prints, within `seconds` (one stuck opening the mount fails
    the test rather than holding it)."""
    waiting = select.poll()  # not select(): a whole run's pytest holds descriptors past its 1024
    waiting.register(reader.stdout, select.POLLIN)
    assert waiting.poll(seconds * 1000), f"the reader printed nothing within {seconds} s"
    return reader.stdout.readline()


def test_page_cache_readers_see_every_record_as_appended(tmp_path):
    """Readers through the kernel's page cache re-read NAME.bin while a writer appends 10,000
    records one write each: a whole-file read opened again each time, tail -f's one descriptor
    read on, np.memmap made again. Each sees every record as written. The kernel used to drop
    the file's pages whenever a getattr showed the mtime that each write moves (libfuse's default
    auto_inval_data), and a drop racing the next write lost that write's bytes from the page
    cache: a reader read the page again before the write arrived, and kept zeros for a record."""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=0)
    page_cache_readers_beside_appends(tmp_path, root, lambda: stored(root))


def test_page_cache_readers_see_every_record_as_appended_on_an_object_store(seaweed, tmp_path):
    """The same on an object store, whose mount looks at the stored values again after
    metadata_ttl (another machine may write them): there the kernel kept auto_inval_data and
    auto_cache, both dropping the pages for the mtime the mount's own writes move, and a reader
    kept zeros for a record; now the mount drops them itself, for another writer's change only."""
    prefix = unique_prefix("readers")
    make(seaweed.zarr_store(prefix), "v3-zstd", count=0)
    page_cache_readers_beside_appends(
        tmp_path, seaweed.url(prefix), lambda: zarr.open_array(seaweed.zarr_store(prefix), path="frames", mode="r")[...],
        seaweed.mount_options("grow=all"), seaweed.env())


def page_cache_readers_beside_appends(tmp_path, source, read_stored, options=(), env=None) -> None:
    """Three page-cache readers of `source`'s array frames (no record yet) through a mount,
    beside a writer appending 10,000 records through the same mount: each saw every record as
    written, and `read_stored` reads them all once it is unmounted."""
    count = 10_000
    with mounted(source, tmp_path, *options, env=env) as m:
        data = m / "frames.bin"
        readers = [subprocess.Popen([sys.executable, "-c", PAGE_CACHE_READER, str(data), str(count * RECORD_BYTES),
                                     style], stdout=subprocess.PIPE, text=True) for style in ("read", "tail", "memmap")]
        try:
            for reader in readers:
                assert said_within(reader, 60) == "reading\n"  # its loop runs before the first append
            with open(data, "ab", buffering=0) as f:
                for r in range(count):
                    f.write(records(r, 1).tobytes())
            said = [reader.communicate(timeout=300)[0].strip() for reader in readers]
        finally:
            for reader in readers:
                reader.kill()
                reader.wait()
        assert said == [f"{style}: every record as written" for style in ("read", "tail", "memmap")]
        assert "ERROR" not in m.settled_log()
    assert np.array_equal(read_stored(), records(0, count))


def test_a_stat_after_an_append_keeps_the_pages_read(tmp_path):
    """The kernel keeps NAME.bin's pages when a stat after an append shows the file's new mtime:
    the bytes read before are not asked of the daemon again. (It dropped them there, and such a
    drop racing the next append is what the test above catches.)"""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=100)  # 6,000 bytes: two pages
    with mounted(root, tmp_path, "grow=all", "debug") as m:
        data = m / "frames.bin"
        before = data.read_bytes()  # read through the page cache, which keeps it
        with open(data, "ab", buffering=0) as f:
            f.write(records(100, 1).tobytes())
        assert os.stat(data).st_size == 101 * RECORD_BYTES  # the write made the attributes stale: asked again
        with open(data, "rb") as f:
            assert f.read(4096) == before[:4096]
        log = m.settled_log()
    assert "read /frames.bin offset=0 " in log[:log.index("write /frames.bin")]
    assert "read /frames.bin offset=0 " not in log[log.index("write /frames.bin"):]


PAGE_CACHE_READER = r'''
import os, sys, time
import numpy as np
path, final, style = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print("reading", flush=True)
wrong, deadline = [], time.monotonic() + 240  # bounded: the writer's 10,000 appends end well before

def check(data, start=0):
    """The whole records of `data` from byte `start` (a record's) on, each as written."""
    values = np.frombuffer(data[start:len(data) - len(data) % 60], "<i4")
    first = start // 4
    bad = np.flatnonzero(values != np.arange(first, first + len(values), dtype="<i4") * 7 + 1)
    if len(bad):
        wrong.append(f"bytes {start + bad[0] * 4}..{start + bad[-1] * 4 + 4} of {len(data)} read as {values[bad[0]]}")
    return len(data)

if style == "tail":  # bytes once read are kept, as tail -f prints them: only the new ones are checked
    seen = bytearray()
    with open(path, "rb", buffering=0) as f:
        while len(seen) < final and time.monotonic() < deadline:
            checked = len(seen) - len(seen) % 60
            more = f.read(1 << 16)
            if more:
                seen += more
                check(seen, checked)
    reached = len(seen)
else:
    reached = 0
    while reached < final and time.monotonic() < deadline:
        if style == "memmap":
            size = os.stat(path).st_size
            data = bytes(np.memmap(path, "u1", "r", shape=(size - size % 60,))) if size >= 60 else b""
        else:
            with open(path, "rb") as f:
                data = f.read()
        reached = check(data)
if reached < final:
    wrong.append(f"read {reached} of the {final} bytes written")
print(f"{style}: " + ("; ".join(wrong[:3]) if wrong else "every record as written"), flush=True)
'''


def test_two_appenders_in_one_mount_never_overwrite(tmp_path):
    """Two processes appending with O_APPEND through one mount: every record written is there once."""
    root = tmp_path / "g.zarr"
    make(root, "v3-zstd", count=0)
    with mounted(root, tmp_path) as m:
        def append(first):
            with open(m / "frames.bin", "ab", buffering=0) as f:
                for r in range(first, first + 200):
                    f.write(records(r, 1).tobytes())
        writers = [threading.Thread(target=append, args=(first,)) for first in (0, 1000)]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
    got = stored(root).reshape(400, -1)
    firsts = sorted((got[:, 0] - 1) // 7 // 15)
    assert firsts == list(range(200)) + list(range(1000, 1200))
    for row in got:
        r = (row[0] - 1) // 7 // 15
        assert np.array_equal(row, records(r, 1).reshape(-1))


def test_an_array_made_from_a_sidecar_to_append_to(tmp_path):
    """A sidecar with shape [0, ...] makes an empty array; `cp frames.raw NAME.bin` then fills it
    whole and `cat >>` appends: zarr-python reads every record."""
    root = tmp_path / "g.zarr"
    zarr.open_group(str(root), mode="w")
    raw = tmp_path / "frames.raw"
    raw.write_bytes(records(0, 4).tobytes())
    with mounted(root, tmp_path) as m:
        (m / "new.json").write_text(json.dumps({"shape": [0, *RECORD], "dtype": "<i4", "chunk_shape": [2, 3, 5]}))
        assert os.stat(m / "new.bin").st_size == 0
        subprocess.run(["cp", str(raw), str(m / "new.bin")], check=True)
        raw.write_bytes(records(4, 3).tobytes())
        subprocess.run(f"cat {raw} >> {m.path / 'new.bin'}", shell=True, check=True)
        assert os.stat(m / "new.bin").st_size == 7 * RECORD_BYTES
    assert np.array_equal(zarr.open_array(str(root / "new"))[...], records(0, 7))


def two_mounts_append(tmp_path, source, read_stored, then, options=(), env=None) -> None:
    """Mounts a and b of `source` append to array `frames` of 3 records (chunks of 2: its end is
    inside a chunk). b writes first, a partial record that no write-back stores; a appends 3
    records and stores them; b completes its 2 records and stores them. b's write-back finds a's
    shape and moves its records after a's: zarr-python (`read_stored`) reads every record of
    both, a's first, and so does a reader of b's NAME.bin, whose cached pages and size follow
    (`then` "read": looked at first), and b's descriptor appends one more record at the new end,
    not at the one b's kernel had (`then` "append": before anything looks at b's size again).
    Nothing is saved for recovery."""
    expected = np.concatenate([records(0, 3), records(50, 3), records(100, 2)])
    mine = records(100, 2).tobytes()
    with mounted(source, tmp_path, "grow=all", *options, name="a", env=env) as a, \
            mounted(source, tmp_path, "grow=all", *options, name="b", env=env) as b:
        second = os.open(b / "frames.bin", os.O_WRONLY | os.O_APPEND)
        reader = os.open(b / "frames.bin", os.O_RDONLY)  # its pages and size, cached, must follow
        try:
            os.write(second, mine[:50])  # pending in b: never stored before it is completed
            with open(a / "frames.bin", "ab") as first:
                first.write(records(50, 3).tobytes())
            assert np.array_equal(read_stored(), expected[:6])
            # as b has it (nothing to store yet, so no write-back of b's moved anything): cached
            assert os.pread(reader, 4096, 0) == records(0, 3).tobytes() + mine[:50]
            os.write(second, mine[50:])
            os.fstat(reader)  # the kernel holds b's size (that write had it look again) for ENTRY_TIMEOUT
            os.fsync(second)
            assert np.array_equal(read_stored(), expected)
            # b drops its kernel's size and pages at once (asynchronously), well before the
            # kernel's own look again at the size after ENTRY_TIMEOUT (30 s) would
            if then == "read":
                wait_for(lambda: os.pread(reader, 4096, 0) == expected.tobytes(), 20,
                         "b's NAME.bin to show both writers' records in the stored order")
            os.write(second, records(102, 1).tobytes())
            os.fsync(second)
            expected = np.concatenate([expected, records(102, 1)])
            assert np.array_equal(read_stored(), expected)
            wait_for(lambda: os.pread(reader, 4096, 0) == expected.tobytes(), 20,
                     "b's NAME.bin to show every record in the stored order")
            assert os.fstat(reader).st_size == 9 * RECORD_BYTES
        finally:
            os.close(reader)
            os.close(second)
        assert "ERROR" not in b.settled_log()
    assert np.array_equal(read_stored(), expected)
    assert not list((tmp_path / "b.recovery").glob("*")) and not list((tmp_path / "a.recovery").glob("*"))


@pytest.mark.parametrize("then", ["read", "append"])
@pytest.mark.parametrize("kind", ["v3-zstd", "v3-sharded"])
def test_a_second_mount_s_appends_follow_the_first_one_s_records(tmp_path, kind, then):
    """Sharded: shards of 4 records, inner chunks of 2; a's records end inside the second
    shard, b's move there and into the third (docs/writing.md, Two writers appending)."""
    root = tmp_path / "g.zarr"
    make(root, kind, count=3)
    two_mounts_append(tmp_path, root, lambda: stored(root), then)


@pytest.mark.parametrize("then", ["read", "append"])
@pytest.mark.parametrize("kind", ["v2-zstd", "v3-sharded"])
def test_a_second_mount_s_appends_follow_the_first_one_s_records_on_an_object_store(seaweed, tmp_path, kind, then):
    prefix = unique_prefix("rebase")
    make(seaweed.zarr_store(prefix), kind, count=3)
    two_mounts_append(tmp_path, seaweed.url(prefix),
                      lambda: zarr.open_array(seaweed.zarr_store(prefix), path="frames", mode="r")[...], then,
                      seaweed.mount_options(), seaweed.env())


