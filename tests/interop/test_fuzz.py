"""Hostile input never raises anything but a zarrfs error, and never hangs. Each target runs in a
child process with a time limit: a decoder that spins fails the test, not the test run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parents[1]  # tests/, where the shared fixtures and C programs are
LIMIT = 120  # seconds; the targets take a few; a hang is caught by this bound


@pytest.mark.parametrize("target", ["metadata", "metadata_v2", "decoders"])
def test_fuzz_target_raises_only_zarrfs_errors_and_finishes(target, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    try:
        result = subprocess.run([sys.executable, str(HERE / "fuzz_targets.py"), target], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {target} fuzz target did not finish in {LIMIT} s: a hang")
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stdout[-3000:] + result.stderr[-3000:]
