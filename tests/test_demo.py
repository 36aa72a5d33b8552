"""The demo runs, stays short, ends with the next step and leaves nothing behind."""

import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEMO = Path(__file__).parent.parent / "scripts" / "demo.py"


def test_demo_tours_and_cleans_up():
    pattern = os.path.join(tempfile.gettempdir(), "zarrfs-demo-*")
    before = set(glob.glob(pattern))
    result = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert len(out.splitlines()) < 60
    assert "od -A n -t f4" in out and "equator mean" in out
    assert out.rstrip().splitlines()[-4].startswith("Next: mount your own data")
    assert set(glob.glob(pattern)) == before
    assert not result.stderr.strip()  # no warnings
