"""The demo runs, stays short, ends with the next step and leaves nothing behind."""

import os
import re
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).parents[2] / "scripts" / "demo.py"


def test_demo_tours_and_cleans_up(tmp_path):
    scratch = tmp_path / "tmp"  # its own TMPDIR: another demo may run on the machine meanwhile
    scratch.mkdir()
    result = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TMPDIR": str(scratch)})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert str(scratch) in out  # it worked where it was told to
    assert len(out.splitlines()) < 60
    assert "od -A n -t f4" in out and "equator mean" in out
    # the mostly-fill frames: 6.3M long, and the copy cp makes of them takes tens of KiB
    assert re.search(r"^  6\.3M\t\S+/frames\.bin$", out, re.M)
    assert re.search(r"^  \d+K\t\S+/frames-copy\.bin$", out, re.M)
    assert out.rstrip().splitlines()[-4].startswith("Next: mount your own data")
    assert list(scratch.iterdir()) == []
    assert not result.stderr.strip()  # no warnings
