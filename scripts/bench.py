"""zarrfs benchmark: every row of the performance issue in one run, interleaved, as ratios.

    .venv/bin/python scripts/bench.py [--size-mib 512] [--runs 5] [--layouts zstd,sharded,blosc] [--json FILE]

Builds float32 arrays (1 MiB zstd chunks; 64 MiB shards of 1 MiB zstd inner chunks; 1 MiB
blosc-lz4 chunks) with zarr-python, then measures side by side: the page-cache read of the same
bytes (the limit), the same bytes served from memory by a trivial FUSE file system (the limit
of any FUSE file: scripts/trivial_fuse.py), zarr-python and tensorstore in-process, and zarrfs
through a real mount. NAME.tif, which needs two dimensions, is read from a 2-D copy of the same
values (1 MiB chunks of whole rows, so the same bytes in the same chunks) against that copy's NAME.bin.
Every ratio is taken within a round (the machine's speed drifts between rounds); the report gives
each one's median over --runs interleaved rounds and its spread (min-max). Needs the bench extra (pip install -e '.[bench]') and root for mounts.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from zarrfs.cli.command import raise_read_ahead

MIB = 1 << 20
GB = 1e9
ZARRFS = str(Path(sys.executable).parent / "zarrfs")
TRIVIAL_FUSE = Path(__file__).parent / "trivial_fuse.py"


IMAGE_WIDTH = 1024  # of the 2-D copy NAME.tif is read from


def layout_options(layout: str, chunks: tuple, shards: tuple) -> dict:
    from zarr.codecs import BloscCodec, ZstdCodec
    return {"zstd": dict(chunks=chunks, compressors=[ZstdCodec(level=0)]),
            "sharded": dict(chunks=chunks, shards=shards, compressors=[ZstdCodec(level=0)]),
            "blosc": dict(chunks=chunks, compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")])}[layout]


def build(root: Path, layout: str, size_mib: int) -> tuple[Path, np.ndarray]:
    import zarr
    n = size_mib * MIB // 4
    rng = np.random.default_rng(0)
    data = (np.sin(np.arange(n, dtype=np.float32) / 1000) + rng.normal(0, 0.01, n).astype(np.float32)).astype("<f4")
    chunk = MIB // 4
    path = root / f"{layout}.zarr"
    z = zarr.create_array(str(path), shape=(n,), dtype="float32", fill_value=0.0, overwrite=True,
                          **layout_options(layout, (chunk,), (64 * chunk,)))
    z[...] = data
    return path, data


def build_image(root: Path, layout: str, data: np.ndarray) -> Path:
    """The same values as a 2-D array, for NAME.tif: chunks of whole rows, 1 MiB each as before."""
    import zarr
    rows = MIB // 4 // IMAGE_WIDTH
    path = root / f"{layout}-image.zarr"
    z = zarr.create_array(str(path), shape=(data.size // IMAGE_WIDTH, IMAGE_WIDTH), dtype="float32", fill_value=0.0,
                          overwrite=True, **layout_options(layout, (rows, IMAGE_WIDTH), (64 * rows, IMAGE_WIDTH)))
    z[...] = data.reshape(-1, IMAGE_WIDTH)
    return path


@contextmanager
def mount(source: Path, *options: str):
    """zarrfs on `source`; yields the array's file and the daemon."""
    args = [ZARRFS, str(source), "{mnt}", "-f"] + (["-o", ",".join(options)] if options else [])
    with _mounted(args, f"{source.name}.bin") as mounted:
        yield mounted


@contextmanager
def mount_limit(raw: Path, pace: float | None = None):
    """The FUSE limit: `raw`'s bytes served from memory by scripts/trivial_fuse.py; at most
    `pace` bytes per second if given."""
    command = [sys.executable, str(TRIVIAL_FUSE), str(raw), "{mnt}"] + ([str(pace / GB)] if pace else [])
    with _mounted(command, "data.bin") as mounted:
        raise_read_ahead(str(mounted[0].parent))  # as zarrfs does for itself
        yield mounted


@contextmanager
def _mounted(command: list[str], name: str, log: Path | None = None):
    mnt = Path(tempfile.mkdtemp(prefix="zarrfs-bench-"))
    args = [a.replace("{mnt}", str(mnt)) for a in command]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log, "wb") if log else subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mnt):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{' '.join(args)} did not mount")
            time.sleep(0.01)
        yield mnt / name, process
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.rmdir(mnt)


def read_through(path: Path) -> float:
    """Seconds to read a file in 1 MiB blocks."""
    buf = bytearray(MIB)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return time.perf_counter() - t0


def warm_read(path: Path) -> float:
    """Seconds to read a file the page cache holds: the median of 3 reads. The first read after
    the one that filled the cache is slower for every file system (the kernel moves each page to
    its active list), so a single read would measure that, not the cache."""
    return statistics.median(read_through(path) for _ in range(3))


def evict(path: Path) -> None:
    """Drop a file's pages from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def open_tensorstore(path: Path):
    import tensorstore as ts
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)},
            "context": {"cache_pool": {"total_bytes_limit": 0}}}
    return ts.open(spec).result()


def random_offsets(nbytes: int, count: int, seed: int) -> list[int]:
    return [int(x) * 4096 for x in np.random.default_rng(seed).integers(0, nbytes // 4096, count)]


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_layout(layout: str, path: Path, data: np.ndarray, raw: Path, image: Path, seed: int, samples: int) -> dict:
    import zarr
    nbytes = data.nbytes
    r = {}
    evict(raw)
    read_through(raw)  # the page cache is filled by a read, as a cold read through a mount fills it
    r["page cache read"] = nbytes / warm_read(raw)
    r["zarr-python read"] = nbytes / timed(lambda: zarr.open_array(str(path))[...])
    r["tensorstore read"] = nbytes / timed(lambda: open_tensorstore(path).read().result())
    with mount_limit(raw) as (limit_path, _):
        r["fuse limit cold read"] = nbytes / read_through(limit_path)
        r["fuse limit warm re-read"] = nbytes / warm_read(limit_path)
    with mount(path) as (bin_path, process):
        cpu = cpu_seconds(process.pid)
        r["zarrfs cold read"] = nbytes / read_through(bin_path)
        r["daemon cpu ms in cold read"] = (cpu_seconds(process.pid) - cpu) * 1000
        cpu = cpu_seconds(process.pid)
        r["zarrfs warm re-read"] = nbytes / warm_read(bin_path)
        r["daemon cpu ms in warm re-read"] = (cpu_seconds(process.pid) - cpu) * 1000
    with mount(image) as (bin_path, _):  # NAME.tif against NAME.bin of the same 2-D array, each mounted cold
        r["image bin cold read"] = nbytes / read_through(bin_path)
    with mount(image) as (bin_path, _):
        r["image tif cold read"] = nbytes / read_through(bin_path.with_suffix(".tif"))
    with mount_limit(raw, pace=r["zarrfs cold read"]) as (limit_path, _):  # filled as slowly as zarrfs's
        read_through(limit_path)
        r["fuse limit paced warm re-read"] = nbytes / warm_read(limit_path)
    offsets = random_offsets(nbytes, samples, seed)
    with mount(path) as (bin_path, _):
        fd = os.open(bin_path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead: one 4 KiB page per pread
        lat = [timed(lambda o=o: os.pread(fd, 4096, o)) for o in offsets]
        os.close(fd)
    r["zarrfs 4k p50 ms"] = p50_ms(lat)
    store = open_tensorstore(path)
    r["tensorstore 4k p50 ms"] = p50_ms([timed(lambda o=o: store[o // 4:o // 4 + 1024].read().result())
                                         for o in offsets])
    z = zarr.open_array(str(path))
    r["zarr-python 4k p50 ms"] = p50_ms([timed(lambda o=o: z[o // 4:o // 4 + 1024]) for o in offsets])
    with mount(path) as (bin_path, _):
        t = timed(lambda: subprocess.run(["dd", f"if={raw}", f"of={bin_path}", "bs=1M", "conv=notrunc,fsync",
                                          "status=none"], check=True))
        r["zarrfs dd write"] = nbytes / t
    r["zarr-python write"] = nbytes / timed(lambda: zarr.open_array(str(path)).__setitem__(Ellipsis, data))
    return r


def bench_memory(path: Path, nbytes: int, cache_mib: int) -> int:
    """Peak RSS (bytes) of the daemon streaming the whole array with a small cache."""
    with mount(path, f"cache_size={cache_mib}M") as (bin_path, process):
        read_through(bin_path)
        status = Path(f"/proc/{process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) * 1024


def build_many(root: Path, count: int) -> Path:
    """A hierarchy of `count` small arrays in groups of 100 (metadata only: listing reads no chunk)."""
    doc = {"zarr_format": 3, "node_type": "array", "shape": [10, 10], "data_type": "float64",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 5]}},
           "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
           "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "attributes": {}}
    group = json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}})
    path = root / "many.zarr"
    shutil.rmtree(path, ignore_errors=True)  # a --workdir from an earlier run
    path.mkdir()
    (path / "zarr.json").write_text(group)
    for i in range(count):
        g = path / f"g{i // 100:03d}"
        if i % 100 == 0:
            g.mkdir()
            (g / "zarr.json").write_text(group)
        (g / f"a{i % 100:02d}").mkdir()
        (g / f"a{i % 100:02d}" / "zarr.json").write_text(json.dumps(doc))
    return path


def bench_listing(path: Path) -> dict[str, tuple[float, float]]:
    """First and second `ls -lR`, with the default header views (8 files a 2-D array), with them
    but NAME.tif, and without any (2)."""
    times = {}
    for label, options in [("views on", ()), ("views on but tiff", ("views=npy,envi,mhd,nrrd,vrt",)),
                           ("views=none", ("views=none",))]:
        with mount(path, *options) as (bin_path, _):
            ls = lambda: subprocess.run(["ls", "-lR", str(bin_path.parent)], stdout=subprocess.DEVNULL, check=True)  # noqa
            times[label] = timed(ls), timed(ls)
    return times




def ratio(a: str, b: str):
    return lambda r: r[a] / r[b]


# (label, value of one round, format): every ratio is taken within a round, then summarized
ROWS = [
    ("page cache read GB/s (the limit)", lambda r: r["page cache read"] / GB, "{:.2f}"),
    ("FUSE limit: file in memory, cold GB/s", lambda r: r["fuse limit cold read"] / GB, "{:.2f}"),
    ("FUSE limit: file in memory, warm GB/s", lambda r: r["fuse limit warm re-read"] / GB, "{:.2f}"),
    ("  the same, filled at zarrfs's cold pace, warm GB/s", lambda r: r["fuse limit paced warm re-read"] / GB,
     "{:.2f}"),
    ("tensorstore read GB/s", lambda r: r["tensorstore read"] / GB, "{:.2f}"),
    ("zarr-python read GB/s", lambda r: r["zarr-python read"] / GB, "{:.2f}"),
    ("zarrfs cold read GB/s", lambda r: r["zarrfs cold read"] / GB, "{:.2f}"),
    ("zarrfs / min(FUSE limit, tensorstore) (target >= 0.9)",
     lambda r: r["zarrfs cold read"] / min(r["fuse limit cold read"], r["tensorstore read"]), "{:.2f}x"),
    ("  / tensorstore (target >= 1 where the FUSE limit is higher)", ratio("zarrfs cold read", "tensorstore read"),
     "{:.2f}x"),
    ("  / FUSE limit cold", ratio("zarrfs cold read", "fuse limit cold read"), "{:.2f}x"),
    ("  / zarr-python", ratio("zarrfs cold read", "zarr-python read"), "{:.2f}x"),
    ("  daemon CPU during the cold read, ms", lambda r: r["daemon cpu ms in cold read"], "{:.0f}"),
    ("zarrfs NAME.tif cold read GB/s (2-D copy)", lambda r: r["image tif cold read"] / GB, "{:.2f}"),
    ("  / NAME.bin of the 2-D copy (target >= 0.95)", ratio("image tif cold read", "image bin cold read"), "{:.2f}x"),
    ("zarrfs warm re-read GB/s (median of 3)", lambda r: r["zarrfs warm re-read"] / GB, "{:.2f}"),
    ("  / FUSE limit warm (target >= 0.95)", ratio("zarrfs warm re-read", "fuse limit warm re-read"), "{:.2f}x"),
    ("  / FUSE limit filled at zarrfs's cold pace, warm", ratio("zarrfs warm re-read", "fuse limit paced warm re-read"),
     "{:.2f}x"),
    ("  / page cache", ratio("zarrfs warm re-read", "page cache read"), "{:.2f}x"),
    ("  daemon CPU during the re-reads, ms", lambda r: r["daemon cpu ms in warm re-read"], "{:.0f}"),
    ("zarrfs 4 KiB pread p50 ms", lambda r: r["zarrfs 4k p50 ms"], "{:.3f}"),
    ("tensorstore 4 KiB window p50 ms", lambda r: r["tensorstore 4k p50 ms"], "{:.3f}"),
    ("zarr-python 4 KiB window p50 ms", lambda r: r["zarr-python 4k p50 ms"], "{:.3f}"),
    ("  zarrfs / tensorstore (target <= 1.0)", ratio("zarrfs 4k p50 ms", "tensorstore 4k p50 ms"), "{:.2f}x"),
    ("zarrfs dd overwrite + fsync GB/s", lambda r: r["zarrfs dd write"] / GB, "{:.2f}"),
    ("zarr-python write GB/s", lambda r: r["zarr-python write"] / GB, "{:.2f}"),
    ("  / zarr-python (target >= 1.2)", ratio("zarrfs dd write", "zarr-python write"), "{:.2f}x"),
]


def summary(values: list[float], fmt: str) -> str:
    """The median, and the spread (min-max) when there was more than one round."""
    cell = fmt.format(statistics.median(values))
    if len(values) > 1:
        cell += f" ({fmt.format(min(values)).rstrip('x')}-{fmt.format(max(values)).rstrip('x')})"
    return cell


def table(runs: dict[str, list[dict]], rows: list, memory: dict, rss_limit_mib: int) -> list[str]:
    """The rows as a Markdown table, a column per layout, and the daemon's peak RSS."""
    width = max(len(label) for label, _, _ in rows) + 1
    cells = {label: [summary([fn(r) for r in rs], fmt) for rs in runs.values()] for label, fn, fmt in rows}
    cells["daemon peak RSS MiB, cache = size/4"] = [f"{memory[layout] / MIB:.0f} (<= {rss_limit_mib})" for layout in runs]
    cw = max(22, *(len(c) for row in cells.values() for c in row))
    lines = [f"| {'row':<{width}} | " + " | ".join(f"{layout:>{cw}}" for layout in runs) + " |",
             f"|{'-' * (width + 2)}|" + "|".join("-" * (cw + 2) for _ in runs) + "|"]
    for label, row in cells.items():
        lines.append(f"| {label:<{width}} | " + " | ".join(f"{c:>{cw}}" for c in row) + " |")
    return lines


def report(runs: dict[str, list[dict]], memory: dict, listing, args) -> str:
    rounds = len(next(iter(runs.values())))
    lines = [f"zarrfs benchmark: {args.size_mib} MiB float32 per layout, {rounds} interleaved rounds; each cell is "
             f"the median over the rounds (min-max), every ratio taken within a round; {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    lines += table(runs, ROWS, memory, args.size_mib // 4 + 150) + [""]
    for label, (first, second) in listing.items():
        lines.append(f"listing {args.listing} arrays, {label}: first ls -lR {first:.2f} s (target < 5), "
                     f"second {second:.2f} s (target < 0.5)")
    if "views on" in listing and "views on but tiff" in listing:
        lines.append("  NAME.tif's cost: first ls -lR {:.2f}x, second {:.2f}x (target <= 1.2)".format(
            *(a / b for a, b in zip(listing["views on"], listing["views on but tiff"], strict=False))))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (every layout in each)")
    parser.add_argument("--layouts", default="zstd,sharded,blosc")
    parser.add_argument("--samples", type=int, default=100, help="random 4 KiB reads per run")
    parser.add_argument("--listing", type=int, help="arrays in the listing hierarchy (0: no listing; default 10000, "
                        "1000 for --store s3/http)")
    parser.add_argument("--workdir", help="where to build the arrays (default: a temporary directory)")
    parser.add_argument("--json", help="also write every round's figures to this file")
    parser.add_argument("--store", choices=("local", "s3", "http"), default="local",
                        help="s3: SeaweedFS, http: nginx, each in a network namespace of its own (bench_remote.py)")
    parser.add_argument("--delay-ms", type=float, default=5.0, help="tc netem delay each way, for --store s3/http")
    args = parser.parse_args(argv)
    if args.store != "local":
        import bench_remote
        args.listing = 1000 if args.listing is None else args.listing
        return bench_remote.run(args)
    args.listing = 10000 if args.listing is None else args.listing
    work = Path(args.workdir or tempfile.mkdtemp(prefix="zarrfs-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        arrays = {}
        for layout in args.layouts.split(","):
            path, data = build(work, layout, args.size_mib)
            raw = work / f"{layout}.raw"
            raw.write_bytes(data.tobytes())
            arrays[layout] = (path, data, raw, build_image(work, layout, data))
        runs: dict[str, list[dict]] = {layout: [] for layout in arrays}
        for run in range(args.runs):  # interleaved: every layout in every round, so ratios compare like moments
            for layout, (path, data, raw, image) in arrays.items():
                runs[layout].append(bench_layout(layout, path, data, raw, image, seed=run, samples=args.samples))
        if args.json:
            Path(args.json).write_text(json.dumps(runs, indent=1))
        cache_mib = max(1, args.size_mib // 4)
        memory = {layout: bench_memory(path, data.nbytes, cache_mib) for layout, (path, data, *_) in arrays.items()}
        listing = bench_listing(build_many(work, args.listing)) if args.listing else {}
        print(report(runs, memory, listing, args))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
