"""scripts/test's second pass, on Python 3.11 (`pytest --older-python-pass`, tests/conftest.py),
leaves out the tests that need a newer Python, the object stores' tests, the file managers' and
Bio-Formats' tests and the benchmarks' smoke runs, whatever -m the caller adds: pytest keeps
only the last -m it is given, so a -m that says what to leave out would be undone by the
caller's own."""

import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).parents[2]
BENCH_SMOKE = "tests/cli/test_bench_smoke.py"
MODULES = ["tests/stores/test_store_contract.py", BENCH_SMOKE, "tests/interop/test_rectilinear_zarr_python.py",
           "tests/fs/test_kernel_caching.py", "tests/fs/test_desktop_deletes.py",
           "tests/views/test_views_pyramid.py"]  # each with tests left out, or kept (local stores, the core, tifffile)


def collected(*args: str) -> set[str]:
    """The test ids pytest collects with `args`, in the checkout, as scripts/test runs it."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args,
                             *MODULES], cwd=CHECKOUT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return {line for line in result.stdout.splitlines() if "::" in line}


def test_the_older_python_pass_leaves_out_the_same_tests_under_a_callers_m():
    callers = "mount or not mount"  # a -m that chooses every test
    in_pass = collected("--older-python-pass", "-m", callers)
    meant = collected("-m", f"({callers}) and not remote and not desktop and not bioformats and not needs_python312",
                      "--deselect", BENCH_SMOKE)
    assert in_pass == meant
    left_out = collected("-m", callers) - in_pass
    kinds = (BENCH_SMOKE, "test_rectilinear_zarr_python.py", "TestSeaweedS3",  # bench, newer Python, remote
             "test_desktop_deletes.py", "test_bioformats_reads_a_region")  # file managers, Java
    assert any("test_views_pyramid.py::test_tifffile" in test for test in in_pass)
    assert in_pass and all(any(kind in test for test in left_out) for kind in kinds)
