"""What a file manager's sniff costs: the first 4 KiB of arrays with one 16 MiB chunk each, per
codec, read as GIO reads them (open, read 4 KiB, close) through a fresh mount, and in-process
through zarrfs.open_raw (a small read, as the mount gets from O_DIRECT readers). Prints median
times per file. A benchmark, not a test (issue 29, item 3).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_sniff.py [--files 20] [--keep DIR]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

import zarrfs

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from mounting import mounted

CODECS = {
    "gzip": {"name": "gzip", "configuration": {"level": 1}},
    "zlib": {"name": "numcodecs.zlib", "configuration": {"level": 1}},
    "zstd": {"name": "zstd", "configuration": {"level": 1}},
    "blosc-lz4": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}},
    "lz4 (block, whole)": {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}},
}
SHAPE = (2048, 2048)  # float32: one 16 MiB chunk


def make(root: Path, files: int) -> None:
    values = np.random.default_rng(0).normal(280, 5, SHAPE).astype("float32").round(1)
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for label, codec in CODECS.items():
        sub = group.create_group(label.split()[0])
        for i in range(files):
            sub.create_array(f"field_{i:03d}", shape=SHAPE, chunks=SHAPE, dtype="float32",
                             serializer={"name": "bytes", "configuration": {"endian": "little"}},
                             compressors=[codec])[...] = values


def sniff(path: Path) -> float:
    """One read(2) of 4 KiB, as GIO's sniff (Python's buffered open would ask st_blksize, 1 MiB)."""
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.read(fd, 4096)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def first_bytes(store: Path, path: str) -> float:
    view = zarrfs.open_raw(str(store), path)
    start = time.perf_counter()
    view.read(0, 4096)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        make(tmp / "store", args.files)
        print(f"{'codec':<22} {'mount, ms':>10} {'in-process, ms':>15}   ({args.files} arrays, one 16 MiB chunk each)")
        with mounted(tmp / "store", tmp, "ro") as m:
            for label in CODECS:
                folder = label.split()[0]
                mount = [sniff(m / folder / f"field_{i:03d}.bin") for i in range(args.files)]
                direct = [first_bytes(tmp / "store", f"{folder}/field_{i:03d}") for i in range(args.files)]
                print(f"{label:<22} {statistics.median(mount) * 1e3:>10.2f} {statistics.median(direct) * 1e3:>15.2f}")


if __name__ == "__main__":
    main()
