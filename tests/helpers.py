"""Test helpers: zarr.json builders, a counting store, array factories."""

import contextlib
import errno
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

from leftovers import descriptors
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.flat_file import RawFile
from zarrfs.format.v3 import parse_document
from zarrfs.stores.local import LocalStore

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128", "r24"]


def default_fill(data_type: str):
    if data_type == "bool":
        return False
    if data_type.startswith("complex"):
        return [0.0, 0.0]
    if data_type.startswith("r"):
        return [0] * (int(data_type[1:]) // 8)
    return 0


def array_doc(shape, data_type, chunk_shape, codecs=None, fill_value=None, key_encoding=None, **extra) -> dict:
    return {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk_shape)}},
        "chunk_key_encoding": key_encoding or {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": default_fill(data_type) if fill_value is None else fill_value,
        "codecs": codecs or [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}, **extra,
    }


def write_sharded(store, values: np.ndarray, inner: int, per_shard: int):
    """`values` (1-D uint8) as an array of shards of `per_shard` inner chunks of `inner` bytes,
    the bytes codec alone, encoded by our own sharding codec into `store`; returns the codec."""
    doc = array_doc([values.size], "uint8", [inner * per_shard], codecs=[sharding([inner])])
    store.set("zarr.json", json.dumps(doc).encode())
    codec = open_array(store, "", parse_document(store.get("zarr.json"), "zarr.json"), ChunkCache(1 << 20)).chain.sharding
    for s in range(values.size // (inner * per_shard)):
        shard = values[s * inner * per_shard:(s + 1) * inner * per_shard]
        chunks = [shard[i * inner:(i + 1) * inner].tobytes() for i in range(per_shard)]
        store.set(f"c/{s}", codec.assemble(chunks))
    return codec


def sharding(inner_chunk_shape, codecs=None, index_location="end", index_codecs=None) -> dict:
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(inner_chunk_shape),
        "codecs": codecs or [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_codecs": index_codecs or [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
        "index_location": index_location}}


def write_doc(root, path, doc) -> None:
    directory = os.path.join(root, path)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "zarr.json"), "w") as f:
        json.dump(doc, f)


def group_doc(attributes=None) -> dict:
    return {"zarr_format": 3, "node_type": "group", "attributes": attributes or {}}


class CountingStore(LocalStore):
    """A LocalStore that records every get: (key, byte_range, bytes returned)."""

    def __init__(self, root, read_only=False):
        super().__init__(root, read_only)
        self.gets = []
        self.sets = []
        self.stats = []
        self.opened = []
        self.listed = []  # prefixes of files(): each a listing of everything below it
        self.dirs_listed = []  # prefixes of list_dir()

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        """Every read comes here (get too): recorded once."""
        data, version = super().get_versioned(key, byte_range, expect, limit)
        self.gets.append((key, byte_range, 0 if data is None else len(data)))
        return data, version

    def open_value(self, key):
        """Every read opens the value: gets, and reads of stored parts or stored-as-is bytes,
        which do not get it."""
        self.opened.append(key)
        return super().open_value(key)

    def stat(self, key):
        self.stats.append(key)
        return super().stat(key)

    def files(self, prefix, directories=False):
        self.listed.append(prefix)
        return super().files(prefix, directories)

    def list_dir(self, prefix):
        self.dirs_listed.append(prefix)
        return super().list_dir(prefix)

    def stage(self, key, data):
        if data is not None:
            self.sets.append((key, len(data)))
        return super().stage(key, data)

    def reset(self):
        self.gets.clear()
        self.sets.clear()
        self.stats.clear()
        self.opened.clear()
        self.listed.clear()
        self.dirs_listed.clear()

    @property
    def bytes_read(self):
        return sum(n for _, _, n in self.gets)


def open_raw_file(store, path="", cache_bytes=64 << 20, writable=True) -> RawFile:
    key = f"{path}/zarr.json" if path else "zarr.json"
    meta = parse_document(store.get(key), key)
    return RawFile(open_array(store, path, meta, ChunkCache(cache_bytes)), writable=writable)


def fill_disk(path) -> None:
    """Write zeros to `path` until its file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


class Worker:
    """A thread whose exception reaches the test that started it: join() raises it once the
    thread has ended. A bare Thread only prints its exception, and the test goes on to pass."""

    def __init__(self, target, *args):
        self.error: BaseException | None = None
        self.result = None
        self._thread = threading.Thread(target=self._run, args=(target, args), daemon=True)

    def _run(self, target, args) -> None:
        try:
            self.result = target(*args)
        except BaseException as e:  # noqa: BLE001 - handed to join(), whatever it is
            self.error = e

    def start(self) -> "Worker":
        self._thread.start()
        return self

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the thread (up to `timeout`) without raising; whether it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Waits for the thread (up to `timeout`); raises what it raised, if it has ended."""
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error


def run_together(*targets, timeout: float = 120) -> list:
    """Runs each callable in its own thread at once; their results, or the first exception any
    raised (after all have ended). A thread still running after `timeout` fails the test."""
    workers = [Worker(target).start() for target in targets]
    ended = [worker.wait(timeout) for worker in workers]  # all of them, before any exception is raised
    assert all(ended), "a thread did not end"
    for worker in workers:
        worker.join()
    return [worker.result for worker in workers]


# A child process probes the mount, so that a hang is a failed test, not a hung run.
PROBE_LIMIT = 20  # seconds: far more than any answer takes; a hang is a failure


def probe(code: str, *args) -> subprocess.CompletedProcess:
    """Run `code` in a child process; a time-out is a hang, and fails the test."""
    try:
        return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                              timeout=PROBE_LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"probe did not finish in {PROBE_LIMIT} s: {code} {args}")


OPEN_ERRNO = "import os, sys\ntry:\n    os.close(os.open(sys.argv[1], os.O_RDONLY))\n    print(0)\nexcept OSError as e:\n    print(e.errno)"
READ = ("import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\ntry:\n    print(os.pread(fd, int(sys.argv[3]), "
        "int(sys.argv[2])).hex())\nexcept OSError as e:\n    print('errno', e.errno)")


def make_store(root, zarr_format=3, consolidated=False):
    """A small hierarchy: array a (4 int32 in chunks of 2) and group sub with an attribute."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
        group.create_array("a", shape=(4,), chunks=(2,), dtype="<i4", fill_value=0)[...] = np.arange(4)
        group.create_group("sub").attrs["title"] = "inner"
        if consolidated:
            zarr.consolidate_metadata(str(root), zarr_format=zarr_format)
    return root


def array_files(directory, stem: str) -> list[Path]:
    """The files array `stem` shows in `directory` of a mount (NAME.bin, NAME.json, its views)."""
    return sorted(Path(directory) / n for n in os.listdir(directory)
                  if n.startswith(stem + ".") and not os.path.isdir(Path(directory) / n))


def delete_array(directory, stem: str) -> None:
    """Delete array `stem` as `rm NAME.*` does: an array goes with the last of its files."""
    files = array_files(directory, stem)
    assert files, f"{stem}: no files in {directory}"
    for path in files:
        os.unlink(path)


@contextlib.contextmanager
def another_user(shared: Path, prefix: str):
    """A real user with a group of its own and its home in `shared` (a directory every user can
    reach: pytest's own are root's alone), always deleted with its home. Yields its pwd entry."""
    name = f"{prefix}{os.getpid()}"
    subprocess.run(["useradd", "--create-home", "--home-dir", str(shared / "home"), "--user-group",
                    "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


@contextlib.contextmanager
def reachable_directory(prefix: str):
    """A temporary directory every user can reach, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def small_icechunk_repository(path, storage=None):
    """An Icechunk repository at `path` (or in icechunk's `storage`, on an object store) whose main
    has one commit of `a` (40 x 30 int32 in 10 x 10 chunks). Returns (repo, its head). Python >=
    3.12 (icechunk 2)."""
    import icechunk
    import zarr

    repo = icechunk.Repository.create(storage or icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    array = zarr.group(session.store).create_array("a", shape=(40, 30), chunks=(10, 10), dtype="<i4", fill_value=0)
    array[...] = np.arange(1200, dtype="<i4").reshape(40, 30)
    return repo, session.commit("a")


def descriptors_in(root) -> list[str]:
    """The targets of this process's descriptors that are `root` or lie below it. Other threads
    of the test process open and close their own descriptors at any time, so only the ones in
    the test's own directory say anything about the code under test."""
    root = str(root)
    return sorted(link for link in descriptors() if link == root or link.startswith(root + "/"))
