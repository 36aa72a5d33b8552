"""The file system core is tested without FUSE: importing every module of zarrfs.fs, the
command's option parser (tests/core.py parses -o as the command does) and tests/core.py itself
loads neither the adapter nor mfusepy, and so no libfuse. Only making a mount does
(cli/command.py, fuse_mount)."""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parents[1]

LOADED = """
import importlib, pkgutil, sys
import zarrfs.fs
for module in pkgutil.iter_modules(zarrfs.fs.__path__, "zarrfs.fs."):
    importlib.import_module(module.name)
import core, zarrfs.cli.recover
print(" ".join(sorted(m for m in sys.modules if m == "mfusepy" or m.startswith("zarrfs.fuse"))))
"""


def test_the_core_and_its_test_fixture_load_no_fuse():
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run([sys.executable, "-c", LOADED], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []
