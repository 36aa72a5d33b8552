import contextlib
import inspect
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))

import subprocess  # noqa: E402

import pytest  # noqa: E402

import leftovers  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(tmp_path_factory):
    """The run fails if its tests left anything in the places zarrfs writes by default (the
    machine's recovery directory and log) or moved the system's zarrfs link: every daemon and
    engine a test starts gets places of its own under the test's tmp_path."""
    before = leftovers.snapshot()
    yield
    found = leftovers.found(before, tmp_path_factory.getbasetemp())
    if found:
        pytest.fail("the tests left these outside their temporary directories:\n" + "\n".join(found), pytrace=False)


# The most descriptors the test process may hold at the end of a run: half of select()'s 1024
# (FD_SETSIZE), which a run once passed, failing a test far from the cause (every local store kept
# its root open, every Icechunk repository its loop). A run on .venv ends holding about 50 (the
# session's servers' logs and pipes, the clients' runtimes): a leak of one a test reaches the bound.
DESCRIPTORS_HELD = 512


@pytest.fixture(scope="session", autouse=True)
def few_descriptors_held():
    """The run fails if the test process ends holding more than DESCRIPTORS_HELD descriptors,
    naming what they lead to: something opened in-process per test is never closed (autouse and
    first, so checked after the session's servers stop)."""
    yield
    held = leftovers.descriptors()
    if len(held) > DESCRIPTORS_HELD:
        pytest.fail(f"the test process holds {len(held)} descriptors at the end of the run (at most "
                    f"{DESCRIPTORS_HELD}), the most common first:\n" + "\n".join(leftovers.most_common(held)),
                    pytrace=False)


@pytest.fixture
def closed_after():
    """`closed_after(thing)` gives `thing` back, closed (its close()) when the test ends, passed
    or failed: what a test opens in its own process must be let go (an Icechunk repository's
    loop, thread and watch), or a run of the suite keeps them all (over 1024 descriptors once)."""
    opened = []

    def register(thing):
        opened.append(thing)
        return thing

    yield register
    for thing in reversed(opened):
        thing.close()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB file system of the test's own, to fill up; always unmounted."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def _session_server(factory, name: str):
    """A real server started for the session in a folder of its own, always stopped."""
    server = factory(name)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    """One real S3-compatible server (SeaweedFS) for the session; tests use unique prefixes."""
    from servers.seaweed import Seaweed

    yield from _session_server(lambda name: Seaweed(tmp_path_factory.mktemp(name)), "seaweed")


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """Azure Blob storage (Azurite) for the session; tests use unique containers or prefixes."""
    from servers.emulators import Azurite

    yield from _session_server(lambda name: Azurite(tmp_path_factory.mktemp(name)), "azurite")


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory):
    """Google Cloud Storage (fake-gcs-server) for the session; tests use unique buckets or prefixes."""
    from servers.emulators import FakeGcs

    yield from _session_server(lambda name: FakeGcs(tmp_path_factory.mktemp(name)), "fake-gcs")


# Markers (declared in pyproject.toml), given by what a test does, so that a new test is marked
# without anyone remembering to: `mount` if it (or a function of its module it calls) mounts,
# `remote` if it starts a server. `pytest -m "not mount and not remote"` is the fast core suite.
MOUNTS = re.compile(r"\bmounted\(|\bRemounts\b|\bZARRFS\b|\bmount_remote\(|\bBENCH\b|\bDEMO\b|fuse\.zarrfs|\bexec_start\(")
SERVERS = re.compile(r"\bseaweed\b|\bSeaweed\(|\bNginx\(|\bnginx\b|\bazurite\b|\bfake_gcs\b")


def _calls_any(source: str, pattern: re.Pattern, helpers: set[str]) -> bool:
    return bool(pattern.search(source)) or any(re.search(rf"\b{name}\(", source) for name in helpers)


def _module_helpers(module, pattern: re.Pattern) -> set[str]:
    """Names of the module's functions and classes that do what pattern finds, directly or
    through one another (a helper that calls a helper that mounts)."""
    sources = {}
    for name, value in vars(module).items():
        if (inspect.isfunction(value) or inspect.isclass(value)) and getattr(value, "__module__", None) == module.__name__:
            with contextlib.suppress(OSError, TypeError):
                sources[name] = inspect.getsource(value)
    found: set[str] = set()
    while True:
        more = {n for n, s in sources.items() if n not in found and _calls_any(s, pattern, found)}
        if not more:
            return found
        found |= more


def _sources(item) -> list[str]:
    """The test's own source and that of every fixture it uses; for a state machine's TestCase,
    the machine's."""
    found = []
    function = getattr(item, "function", None)
    cls = getattr(item, "cls", None)
    for obj in (function, cls):
        with contextlib.suppress(OSError, TypeError):
            if obj is not None:
                found.append(inspect.getsource(obj))
    if cls is not None:  # hypothesis's Machine.TestCase: its machine is the class around it
        machine = getattr(item.module, cls.__qualname__.split(".")[0], None)
        with contextlib.suppress(OSError, TypeError):
            found.append(inspect.getsource(machine))
    for definitions in getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).values():
        for definition in definitions:
            with contextlib.suppress(OSError, TypeError):
                found.append(inspect.getsource(definition.func))
    return found


# What a test that needs icechunk 2 or zarr-python 3.2+ says on 3.11, where neither installs (the
# test extra's markers in pyproject.toml); scripts/test's 3.11 pass deselects these tests.
NEEDS_PYTHON312 = pytest.mark.skip(reason="needs Python >= 3.12 (icechunk 2, zarr-python 3.2+)")
# Left out of scripts/test's 3.11 pass besides those, for CI's 25 minutes (two whole passes took
# 22 + 18 minutes on a busy machine), each group slow for what is the same on every Python:
LEFT_OUT_ON_OLDER_PYTHON = {
    # a fifth of a pass: the servers and obstore's Rust client
    "remote": "the object stores' tests",
    # file managers under Xvfb, about 5 s: what they ask of a mount does not follow zarrfs's
    # Python, and zarrfs's answers to deletes and renames are the edits tests', which run
    "desktop": "pcmanfm and Thunar",
    # a JVM each, about 10 s: Bio-Formats reads the bytes the tifffile tests check on 3.11 too
    "bioformats": "Bio-Formats",
}
# and two modules: the benchmarks' smoke runs (another fifth: the benchmarks run on .venv), and the
# check of this selection (it collects the suite twice, 27 s on a busy machine, and the rules it
# checks are these lines, the same on every Python). An option, not a -m expression, so that a -m
# the caller gives (which replaces an earlier -m) narrows the pass instead of undoing this.
OLDER_PYTHON_PASS = "--older-python-pass"
BENCH_SMOKE = "tests/cli/test_bench_smoke.py"
ONE_PASS_MODULES = (BENCH_SMOKE, "tests/cli/test_test_passes.py")


def pytest_addoption(parser):
    parser.addoption(OLDER_PYTHON_PASS, action="store_true",
                     help="leave out the tests scripts/test's pass on Python 3.11 leaves out (tests/conftest.py)")


def left_out_on_older_python(item) -> bool:
    return any(item.get_closest_marker(name) for name in ("needs_python312", *LEFT_OUT_ON_OLDER_PYTHON)) or \
        item.nodeid.startswith(ONE_PASS_MODULES)


def pytest_collection_modifyitems(config, items):
    _mark(items)
    if config.getoption(OLDER_PYTHON_PASS):
        left_out = [item for item in items if left_out_on_older_python(item)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not left_out_on_older_python(item)]


def _mark(items) -> None:
    helpers: dict = {}
    for item in items:
        if sys.version_info < (3, 12) and item.get_closest_marker("needs_python312"):
            item.add_marker(NEEDS_PYTHON312)
        module = getattr(item, "module", None)
        if module is None:
            continue
        if module not in helpers:
            helpers[module] = (_module_helpers(module, MOUNTS), _module_helpers(module, SERVERS))
        mounts, servers = helpers[module]
        sources = _sources(item)
        if any(_calls_any(source, MOUNTS, mounts) for source in sources):
            item.add_marker(pytest.mark.mount)
        if {"seaweed", "azurite", "fake_gcs"} & set(item.fixturenames) or any(_calls_any(source, SERVERS, servers) for source in sources):
            item.add_marker(pytest.mark.remote)
