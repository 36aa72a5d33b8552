"""The benchmark script keeps working: a tiny run of two rounds prints every row, each cell a
median with its spread over the rounds (no timing is asserted)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "scripts" / "bench.py"
LAYOUTS = ["uncompressed", "sharded"]  # two of the four: every row shows, in half the time (CI minutes)


def test_bench_smoke_run(tmp_path):
    result = subprocess.run([sys.executable, str(BENCH), "--size-mib", "2", "--runs", "2", "--samples", "5",
                             "--listing", "50", "--layouts", ",".join(LAYOUTS), "--workdir", str(tmp_path),
                             "--json", str(tmp_path / "rounds.json")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    for row in ["page cache read", "FUSE limit", "zarr-python read", "tensorstore read", "zarrfs cold read", "warm re-read",
                "filled at zarrfs's cold pace",
                "4 KiB pread p50", "dd overwrite", "peak RSS", "listing 50 arrays, views on", "listing 50 arrays, views=none",
                "NAME.tif cold read", "/ NAME.bin of the 2-D copy", "listing 50 arrays, views on but tiff", "NAME.tif's cost",
                "/ best peer", "-o nozerocopy cold read", "-o nozerocopy 4 KiB pread p50",
                "pages physically next to their successor", "h5py read_direct", "NAME.bin in one read into the same memory",
                "zarrfs append in 1 MiB records", "zarr-python append of the same records",
                "CPU s per GiB of the cold read: tensorstore", "zarr-python (its process)", "zarrfs's daemon",
                "the reader of zarrfs's file", "FUSE limit's daemon", "zarrfs's daemon / tensorstore",
                "zarrs-python read GB/s", "zarrs-python (its process)", "zarrs-python 4 KiB window p50 ms",
                "/ best peer (the fastest of tensorstore, zarr-python, zarrs-python)"]:
        assert row in result.stdout, row
    assert "2 interleaved rounds" in result.stdout
    ratio = next(line for line in result.stdout.splitlines() if "zarrfs / min(FUSE limit, best peer)" in line)
    cells = [cell.strip() for cell in ratio.strip("| ").split("|")[1:]]
    assert len(cells) == len(LAYOUTS)
    for cell in cells:  # a median, then the spread of the two rounds' ratios around it
        median, low, high = map(float, re.fullmatch(r"([\d.]+)x \(([\d.]+)-([\d.]+)\)", cell).groups())
        assert low <= median <= high
    rounds = json.loads((tmp_path / "rounds.json").read_text())
    assert sorted(rounds) == sorted(LAYOUTS) and all(len(rs) == 2 for rs in rounds.values())
    for r in (r for rs in rounds.values() for r in rs):  # CPU per GiB for every reader of the round
        for reader in ("tensorstore", "zarr-python", "zarrs-python", "zarrfs daemon", "zarrfs reader", "fuse limit daemon",
                       "fuse limit reader"):
            assert r[f"{reader} cpu s per GiB"] >= 0, reader
        assert r["tensorstore cpu s per GiB"] > 0 and r["zarr-python cpu s per GiB"] > 0  # measured, not left at 0
        assert r["zarrs-python read"] > 0 and r["zarrs-python 4k p50 ms"] > 0
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    # every mount of this run undone: its sources lie in the workdir (other runs on the machine may mount meanwhile)
    assert not [m for m in mounts if m[0].startswith(str(tmp_path)) and m[2].startswith("fuse")]


@pytest.mark.parametrize("store", ["s3", "http"])
def test_remote_bench_smoke_run(tmp_path, store):
    """The object-store bench: its server on loopback behind the delaying proxy, every mount undone."""
    before = set(bench_mounts())
    process = subprocess.Popen([sys.executable, str(BENCH), "--store", store, "--size-mib", "2", "--runs", "1",
                                "--samples", "5", "--listing", "20", "--layouts", "zstd,sharded", "--delay-ms", "1",
                                "--workdir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=600)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    for row in ["tensorstore read", "zarr-python read", "zarrfs cold read", "4 KiB pread p50", "peak RSS",
                "requests per GiB streamed", "1 ms each way (a small GET's round trip:",
                "CPU s per GiB streamed: tensorstore", "zarr-python (its process, the proxy apart)", "zarrfs's daemon",
                "zarrs-python read GB/s (a process of its own)", "zarrs-python (its own process)",
                "20 arrays with consolidated metadata: requests to open {'GET': 1}"]:
        assert row in stdout, (row, stdout)
    for reader in ("zarrfs", "zarrs-python"):
        requests = next(line for line in stdout.splitlines() if line.startswith(f"|   {reader} "))
        assert all(float(cell.split()[0]) > 0 for cell in requests.strip("| ").split("|")[1:])  # the proxy saw them
    assert not [line for line in set(bench_mounts()) - before if line.split()[0].startswith(("s3://", "http://"))]


def bench_mounts() -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if "zarrfs-bench" in line]
