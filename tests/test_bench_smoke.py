"""The benchmark script keeps working: a tiny run prints every row (no timing is asserted)."""

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parent.parent / "scripts" / "bench.py"


def test_bench_smoke_run(tmp_path):
    result = subprocess.run([sys.executable, str(BENCH), "--size-mib", "2", "--runs", "1", "--samples", "5",
                             "--listing", "50", "--layouts", "zstd,sharded,blosc", "--workdir", str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    for row in ["page cache read", "FUSE limit", "zarr-python read", "tensorstore read", "zarrfs cold read", "warm re-read",
                "4 KiB pread p50", "dd overwrite", "peak RSS", "listing 50 arrays, views on", "listing 50 arrays, views=none"]:
        assert row in result.stdout, row
    assert not [line for line in Path("/proc/mounts").read_text().splitlines() if "zarrfs-bench" in line]
