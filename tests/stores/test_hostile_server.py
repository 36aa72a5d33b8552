"""A server whose answers are hostile, through a real mount (SeaweedFS behind a proxy that answers
chosen chunk GETs itself, tests/servers/hostile_proxy.py): a read of such a chunk gets EIO and
one log line naming the key and the sizes, the daemon lives on with bounded memory and serves
the other arrays, and what was written before reaches the store."""

import errno
import json
import mmap
import os
import re
import subprocess
import threading

import numpy as np
import obstore
import pytest
import zarr

from helpers import PROBE_LIMIT, array_doc, group_doc
from mounting import mounted, unmount
from servers.hostile_proxy import HUGE, OVERSIZED, HostileProxy
from servers.seaweed import unique_prefix
from zarrfs.engine.read_budget import MAX_READ_CHUNKS

PAGE = 4096  # one chunk is one page


def direct_read(path, offset: int, size: int) -> bytes | int:
    """A read the page cache does not retry (a buffered read that fails is asked again page by
    page): its bytes, or its errno. It runs in a thread of this process, not in a child: the
    proxy serves the mount from this process, and a child started while written.bin is open
    closes its copy of the descriptor between fork and exec, a FUSE flush whose write-back PUT
    went to a proxy whose threads stood still until the child had exec'd (two seconds, the
    flush's deadline: os.close(fd) then met the failed write-back, EIO)."""
    result: list[bytes | int] = []

    def read():
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT needs
            result.append(buf[:os.preadv(fd, [buf], offset)])
        except OSError as e:
            result.append(e.errno)
        finally:
            os.close(fd)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(PROBE_LIMIT)
    assert result, f"a read of {path} did not finish in {PROBE_LIMIT} s"
    return result[0]
RSS_LIMIT = 512 << 20  # bytes of peak memory the daemon may reach (it starts at about 80 MB)

# the proxy's word for an array's only chunk -> what its log line says, sizes and all
HOSTILE = {
    "huge": rf"announced {HUGE} bytes, more than the {PAGE} expected",
    "oversized": rf"announced {OVERSIZED} bytes, more than the {PAGE} expected",
    "short": rf"the {PAGE} bytes the server announced did not all arrive",
    "endless": rf"the {PAGE} bytes the server announced did not all arrive .*in time",
    "overlong": r"sent more than the \d+ bytes it announced",  # a sharded array: its reads are ranged
}


def peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmHWM:"))


def stored_hierarchy(seaweed, prefix):
    root = zarr.open_group(seaweed.zarr_store(prefix), mode="w")
    for name in [*HOSTILE, "good", "written"]:
        layout = dict(chunks=(PAGE // 4,), shards=(PAGE,)) if name == "overlong" else dict(chunks=(PAGE,))
        root.create_array(name, shape=(PAGE,), dtype="u1", compressors=None, **layout)[...] = np.arange(PAGE) % 251
    return root


@pytest.mark.parametrize("word", sorted(HOSTILE))
def test_a_hostile_answer_is_eio_with_one_line_and_the_daemon_lives(seaweed, tmp_path, word):
    prefix = unique_prefix(f"hostile-{word}")
    stored_hierarchy(seaweed, prefix)
    host, port = seaweed.endpoint.removeprefix("http://").split(":")
    with HostileProxy((host, int(port)), {f"/{prefix}/{word}/c/0": word}) as proxy, \
            mounted(seaweed.url(prefix), tmp_path, f"endpoint={proxy.endpoint}", "timeout=4",
                    env=seaweed.env()) as m:
        fd = os.open(m / "written.bin", os.O_RDWR)  # written before, stored after: never lost
        try:
            os.pwrite(fd, b"\xff" * 8, 0)
            assert direct_read(m / f"{word}.bin", 0, PAGE) == errno.EIO
            assert m.process.poll() is None, m.log()
            assert direct_read(m / "good.bin", 0, PAGE)[:8] == bytes(range(8))
            assert peak_rss(m.process.pid) < RSS_LIMIT
            lines = [line for line in m.settled_log().splitlines() if f"{word}/c/0" in line]
            assert len(lines) == 1 and re.search(HOSTILE[word], lines[0]), m.log()
            assert proxy.requests(f"/{word}/c/0") >= 1
        finally:
            os.close(fd)
    written = zarr.open_array(seaweed.zarr_store(prefix), path="written", mode="r")[:16]
    assert written.tolist() == [255] * 8 + list(range(8, 16))


def test_opening_an_array_probes_no_dimension_name_that_consolidated_metadata_lacks(seaweed, tmp_path):
    """A hung server cost the first read twice -o timeout: the coordinate arrays named like the
    dimensions were probed (three GETs each) though consolidated metadata had answered."""
    prefix = unique_prefix("dimensions")
    root = zarr.open_group(seaweed.zarr_store(prefix), mode="w")
    root.create_array("t", shape=(4, 4), chunks=(4, 4), dtype="u1", dimension_names=["y", "x"])[...] = 1
    zarr.consolidate_metadata(seaweed.zarr_store(prefix))
    host, port = seaweed.endpoint.removeprefix("http://").split(":")
    with HostileProxy((host, int(port)), {}) as proxy, \
            mounted(seaweed.url(prefix), tmp_path, f"endpoint={proxy.endpoint}", "ro", env=seaweed.env()) as m:
        assert (m / "t.bin").read_bytes() == b"\x01" * 16
        assert "GeoTransform" not in (m / "t.vrt").read_text()
        assert proxy.requests("/t/c/0/0") == 1  # the proxy saw the mount's reads
        assert [proxy.requests(f"/{name}/{doc}") for name in "xy" for doc in ("zarr.json", ".zarray", ".zgroup")] \
            == [0] * 6


def test_a_read_of_tiny_chunks_makes_a_bounded_number_of_requests_and_unmount_ends_it(seaweed, tmp_path):
    """shape [2**63-1] in chunks of [1]: a 4 KiB dd once made a GET per byte of the kernel's
    read-ahead, never returned, and the daemon went on fetching after the unmount."""
    prefix = unique_prefix("tiny")
    store = seaweed.store(prefix)
    obstore.put(store, "zarr.json", json.dumps(group_doc()).encode())
    obstore.put(store, "tiny/zarr.json", json.dumps(array_doc([2**63 - 1], "uint8", [1])).encode())
    host, port = seaweed.endpoint.removeprefix("http://").split(":")
    with HostileProxy((host, int(port)), {}) as proxy, \
            mounted(seaweed.url(prefix), tmp_path, f"endpoint={proxy.endpoint}", "ro", "timeout=4",
                    env=seaweed.env()) as m:
        dd = subprocess.run(["dd", f"if={m / 'tiny.bin'}", "of=/dev/null", "bs=4096", "count=1"],
                            capture_output=True, text=True, timeout=PROBE_LIMIT * 3)
        assert dd.returncode == 0 or "Input/output error" in dd.stderr, dd.stderr
        assert m.process.poll() is None, m.log()
        unmount(m.path)
        m.process.wait(PROBE_LIMIT * 3)  # the daemon ends by itself: nothing it does outlasts its deadline
        assert proxy.requests("/tiny/c/") <= 4 * MAX_READ_CHUNKS
        lines = [line for line in m.log().splitlines() if "ERROR" in line]
        assert lines and all(re.search(r"tiny: a read .*(more than zarrfs's limit of \d+ for one read|did not finish "
                                        r"within 4 s)", line) for line in lines), m.log()
