"""A hierarchy 1,000 groups deep: a read of its deepest array takes time linear in the depth, and
a read-write mount starts (the leftover-temporary scan is iterative)."""

import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import array_doc, group_doc, write_doc
from mounting import mounted

DEPTH = 1000
LIMIT = 15  # seconds: a linear walk takes about 1; a walk quadratic per lookup took 30 to over 60


@pytest.fixture(scope="module")
def deep_store(tmp_path_factory):
    base = tmp_path_factory.mktemp("deep")
    root = base / "store"
    path = ""
    write_doc(root, "", group_doc())
    for _ in range(DEPTH):
        path = f"{path}/g" if path else "g"
        write_doc(root, path, group_doc())
    doc = array_doc([4], "int16", [4], fill_value=0)
    write_doc(root, f"{path}/a", doc)
    (root / path / "a" / "c").mkdir()
    (root / path / "a" / "c" / "0").write_bytes(np.arange(4, dtype="<i2").tobytes())
    (root / path / "a" / "c" / ".zarrfs-tmp-1-1").write_bytes(b"left by a crash")
    yield base, root, path
    subprocess.run(["rm", "-rf", str(root)], check=True)  # shutil.rmtree recurses once per level


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_the_deepest_array_reads_in_bounded_time(deep_store, mode):
    base, root, path = deep_store
    options = ["ro"] if mode == "ro" else []
    with mounted(root, base, *options, name=f"mnt-{mode}") as m:
        started = time.monotonic()
        code = "import sys; print(open(sys.argv[1], 'rb').read().hex())"
        try:
            result = subprocess.run([sys.executable, "-c", code, str(m / path / "a.bin")], capture_output=True,
                                    text=True, timeout=LIMIT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"reading an array {DEPTH} groups deep took more than {LIMIT} s")
        assert result.stdout.strip() == np.arange(4, dtype="<i2").tobytes().hex(), result.stderr
        print(f"read through {DEPTH} levels in {time.monotonic() - started:.2f} s")
    leftover = root / path / "a" / "c" / ".zarrfs-tmp-1-1"
    assert leftover.exists() == (mode == "ro")  # a read-write mount removed it, however deep
