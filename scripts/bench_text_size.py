"""What NAME.txt's size costs at its first stat: the pass that reads a string array chunk by
chunk and counts its lines (views/text.py, Texts.size), timed in-process on a local store for
arrays of 2M, 16M and 64M elements: vlen-utf8 strings in v3 (zstd, zarr-python's default) and
v2 (blosc) of three kinds (dates of one length, 10 bytes; ASCII labels of 3 to 20 bytes; labels
of 8 to 24 characters with non-ASCII ones and backslashes), and a v2 json2 array of numbers.
Prints CPU ns per element, the figures behind textview.LISTED_ELEMENTS and DECODED_ELEMENTS; a
first `ls -l` of a folder of such arrays costs the sum of its arrays'. A benchmark, not a test
(issue 40). Run it on an older tree (PYTHONPATH) to compare: it lifts every bound it knows.

Every chunk of an array holds the same 1,048,576 elements (the first written by zarr-python,
the others copies of its file), so building 64M elements costs one chunk's encode.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_text_size.py [--sizes 2,16,64] [--repeat 3]
    .venv/bin/python scripts/bench_text_size.py --ls /tmp/before --ls $PWD   # a first ls -l, two trees
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import zarr

from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.fs.hierarchy import Hierarchy
from zarrfs.stores.local import LocalStore
from zarrfs.views import text as textview

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ZARRFS, _mounted  # noqa: E402
from daemon_cpu import usage  # noqa: E402

CHUNK = 1 << 20  # elements a chunk


def labels(n: int) -> np.ndarray:
    """Labels of 8 to 24 characters, some non-ASCII, a few with a backslash (64M of them pass
    TEXT_LIMIT: that pass stops there, refused, as the open would be)."""
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 _-éü\\"))
    widths = rng.integers(0, 17, n)
    body = rng.choice(letters, (n, 16)).view("<U16").reshape(-1)
    return np.array([f"{i:08d}{s[:w]}" for i, s, w in zip(range(n), body, widths, strict=True)], dtype=object)


def dates(n: int) -> np.ndarray:
    """Days from 1970 as text: 10 bytes each, a length whose vlen prefix holds a newline byte."""
    days = np.datetime64("1970-01-01") + np.arange(n) % 40_000
    return np.array(days.astype(str).tolist(), dtype=object)


def ascii_labels(n: int) -> np.ndarray:
    """Identifiers of 3 to 20 ASCII characters, no backslash (some 10 bytes long)."""
    rng = np.random.default_rng(2)
    widths = rng.integers(0, 18, n)
    return np.array([(f"id{i:x}" + "x" * 20)[:3 + w] for i, w in zip(range(n), widths, strict=True)], dtype=object)


KINDS = {"dates": dates, "ascii": ascii_labels, "labels": labels}


def copies(directory: Path, first: str, keys: list[str]) -> None:
    for key in keys:
        target = directory / key
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(directory / first, target)


def make(root: Path, millions: list[int]) -> list[str]:
    """The arrays, one per kind and size (the v3 strings of each size in a folder of their own,
    `2M`: what a first `ls -l` of it costs, --ls); their store paths."""
    group = zarr.open_group(str(root), mode="w")
    v2 = zarr.open_group(str(root / "v2"), mode="w", zarr_format=2)
    paths = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind, values in KINDS.items():
            one = values(CHUNK)
            for m in millions:
                n = m * CHUNK
                array = group.require_group(f"{m}M").create_array(kind, shape=(n,), chunks=(CHUNK,), dtype=str)
                array[:CHUNK] = one
                copies(root / f"{m}M" / kind, "c/0", [f"c/{i}" for i in range(1, m)])
                paths.append(f"{m}M/{kind}")
        for m in millions:
            n = m * CHUNK
            array = v2.create_array(f"v2_{m}M", shape=(n,), chunks=(CHUNK,), dtype=str)
            array[:CHUNK] = labels(CHUNK)
            copies(root / "v2" / f"v2_{m}M", "0", [str(i) for i in range(1, m)])
            paths += [f"v2/v2_{m}M", json_numbers(root / "v2" / f"json_{m}M", n)]
    return paths


def json_numbers(directory: Path, n: int) -> str:
    """A v2 object array of numbers (numcodecs' json2, as zarr-python 2 wrote mixed values)."""
    directory.mkdir(parents=True)
    meta = {"zarr_format": 2, "shape": [n], "chunks": [CHUNK], "dtype": "|O", "fill_value": None, "order": "C",
            "filters": [{"id": "json2", "encoding": "utf-8"}], "compressor": {"id": "zstd", "level": 1}}
    (directory / ".zarray").write_text(json.dumps(meta))
    values = np.empty(CHUNK, dtype=object)
    values[:] = list(np.random.default_rng(1).normal(280, 5, CHUNK).round(2))
    values[::3] = list(range(0, CHUNK, 3))
    chunk = numcodecs.Zstd(1).encode(numcodecs.JSON().encode(values))
    (directory / "0").write_bytes(chunk)
    copies(directory, "0", [str(i) for i in range(1, n // CHUNK)])
    return f"v2/{directory.name}"


def timed_pass(store: LocalStore, path: str) -> tuple[float, float, int]:
    """Seconds (elapsed, and CPU of this process: what it costs on a machine shared with others)
    of one first stat's size pass of a fresh mount (its own Hierarchy and caches)."""
    node = Hierarchy(store, ()).node(path)
    start, cpu = time.perf_counter(), time.process_time()
    size = textview.Texts().size(store, node, ChunkCache(256 << 20), version=0)
    return time.perf_counter() - start, time.process_time() - cpu, size


def listing_cpu(root: Path, folders: list[str], tree: str) -> list[float]:
    """The daemon's CPU seconds for a first `ls -l` of each folder (readdir, then a stat of
    every entry), on a fresh mount of zarrfs with `tree` first on the path."""
    args = [ZARRFS, str(root), "{mnt}", "-f", "-o", "ro"]
    with _mounted(args, "", env={**os.environ, "PYTHONPATH": tree}) as (mnt, process):
        spent = []
        for folder in folders:
            before = usage(process.pid)[0]
            for name in os.listdir(mnt / folder):
                os.stat(mnt / folder / name)
            spent.append(usage(process.pid)[0] - before)
        return spent


def ls_runs(root: Path, millions: list[int], trees: list[str], runs: int) -> None:
    """--ls: each tree's first `ls -l` of each size's folder, the trees interleaved run by run."""
    folders = [f"{m}M" for m in millions]
    spent: dict[str, list[list[float]]] = {tree: [] for tree in trees}
    for _ in range(runs):
        for tree in trees:
            spent[tree].append(listing_cpu(root, folders, tree))
    print(f"first ls -l of a folder of {', '.join(KINDS)} (daemon CPU s, median of {runs}):")
    for tree in trees:
        medians = [statistics.median(run[i] for run in spent[tree]) for i in range(len(folders))]
        print(f"  {tree}: " + ", ".join(f"{folder} {cpu:.2f}" for folder, cpu in zip(folders, medians, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,16,64", help="array sizes in millions of elements (2**20)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ls", action="append", metavar="TREE",
                        help="instead, time a first ls -l of each size's folder through a mount of this "
                             "zarrfs tree (repeat to compare trees; their own bounds hold)")
    args = parser.parse_args()
    if args.ls:
        with tempfile.TemporaryDirectory() as tmp:
            millions = [int(m) for m in args.sizes.split(",")]
            make(Path(tmp) / "s.zarr", millions)
            ls_runs(Path(tmp) / "s.zarr", millions, args.ls, args.repeat)
        return
    textview.LISTED_ELEMENTS = textview.LISTED_CHUNKS = textview.DECODED_ELEMENTS = 1 << 40  # time every size
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "s.zarr"
        paths = make(root, [int(m) for m in args.sizes.split(",")])
        store = LocalStore(str(root), read_only=True)
        print(f"{'array':14} {'elements':>11} {'text bytes':>13} {'median s':>9} {'CPU s':>6} {'CPU ns/element':>15}",
          flush=True)
        for path in paths:
            runs = [timed_pass(store, path) for _ in range(args.repeat)]
            seconds, cpu, size = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2]
            n = Hierarchy(store, ()).node(path).meta.shape[0]
            print(f"{path:14} {n:11,} {size:13,} {seconds:9.2f} {cpu:6.2f} {cpu / n * 1e9:15.0f}", flush=True)


if __name__ == "__main__":
    main()
