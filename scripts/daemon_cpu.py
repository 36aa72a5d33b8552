"""The daemon's CPU seconds per GiB of a cold stream through NAME.bin, for one or more zarrfs
trees, interleaved: a lever is judged by what the daemon spends, which load changes far less
than the wall time it took.

    .venv/bin/python scripts/daemon_cpu.py --layout zstd --runs 5 --tree /tmp/before --tree .

Builds a float32 array as scripts/bench.py does (1 MiB chunks; benchlib.build), then per run and
per tree: a fresh mount of `zarrfs` with PYTHONPATH=TREE, --passes reads of NAME.bin in 1 MiB
blocks (the kernel's pages of it dropped between them: each is cold),
the daemon's user + system time and minor page faults from /proc/PID/stat before and after,
its peak RSS (VmHWM) and its RSS once the reads are done (VmRSS: what it keeps after a stream). The
stored chunk files stay in the page cache (read once before the runs), as in bench.py, where the
in-process peers read them first: the daemon's figure is its CPU, not the disk's latency. Prints
each run and the median per tree. Never run it beside scripts/bench.py.

With `--store s3 --delay-ms D` the array is read from SeaweedFS (`weed mini`, as
scripts/bench_remote.py starts it) through the delaying proxy, D ms each way: the daemon's CPU
on the fetch path, obstore's GETs included. SeaweedFS is not counted; the proxy runs in this
process, so "reader s/GiB" includes its thread there.
"""

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import GIB, ZARRFS, _mounted, build, read_through  # noqa: E402


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from field 3 (state) on: field N is at index N - 3."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def rss_mib(pid: int) -> tuple[float, float]:
    """(peak RSS, RSS now) of a process in MiB: VmHWM and VmRSS of /proc/PID/status."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


def usage(pid: int) -> tuple[float, int]:
    """(user + system CPU seconds, minor page faults) of a process so far."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[7])


@contextmanager
def mounted(source: str, name: str, tree: str, options: list[str]):
    """zarrfs on `source` with `tree`'s zarrfs first on the path; yields (NAME.bin, pid)."""
    args = [ZARRFS, source, "{mnt}", "-f"] + (["-o", ",".join(options)] if options else [])
    with _mounted(args, f"{name}.bin", env={**os.environ, "PYTHONPATH": tree}) as (path, process):
        yield path, process.pid


@contextmanager
def local_source(root: Path, layout: str, size_mib: int):
    """(SOURCE, the array's name in the mount, mount options): the array in `root`, its files in
    the page cache."""
    source = root / f"{layout}.zarr"
    if not source.exists():
        build(root, layout, size_mib)
    warm_store(source)
    yield str(source), source.name, []


@contextmanager
def s3_source(root: Path, layout: str, size_mib: int, delay_ms: float):
    """(SOURCE, the array's name in the mount, mount options): the array in SeaweedFS, read
    through the delaying proxy."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test servers
    from bench_remote import S3Target
    from servers.delay_proxy import DelayProxy
    target = S3Target(root)
    target.start()
    try:
        path, _ = build(root, layout, size_mib)
        prefix = target.upload(layout, path)
        with DelayProxy(target.address, delay_ms / 1000) as proxy:
            target.via(proxy)
            yield target.source(prefix), prefix, list(target.mount_options())
    finally:
        target.stop()


def warm_store(path: Path) -> None:
    """Every stored file read once: in the page cache, as bench.py's peers leave them."""
    for name in path.rglob("*"):
        if name.is_file():
            name.read_bytes()


def drop_pages(path: Path) -> None:
    """The kernel's cached pages of a file in the mount dropped: the next read reaches the daemon."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def one_run(source: str, name: str, tree: str, options: list[str], nbytes: int, passes: int) -> dict:
    """`passes` cold reads through one fresh mount, the file's pages dropped before each but the
    first: the daemon's CPU over all of them (a 10 ms clock tick is 0.04 s/GiB of one 256 MiB read)."""
    with mounted(source, name, tree, options) as (bin_path, pid):
        cpu, faults = usage(pid)
        reader = time.process_time()
        started = time.perf_counter()
        for n in range(passes):
            if n:
                drop_pages(bin_path)
            read_through(bin_path)
        seconds = time.perf_counter() - started
        reader = time.process_time() - reader
        cpu_after, faults_after = usage(pid)
        peak_rss, rss = rss_mib(pid)
    nbytes *= passes
    scale = GIB / nbytes
    return {"daemon s/GiB": (cpu_after - cpu) * scale, "reader s/GiB": reader * scale,
            "faults/MiB": (faults_after - faults) * (1 << 20) / nbytes, "GB/s": nbytes / seconds / 1e9,
            "peak RSS MiB": peak_rss, "RSS after MiB": rss}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", default="zstd", choices=("uncompressed", "zstd", "sharded", "blosc"))
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--passes", type=int, default=1, help="cold reads per mount (the pages dropped between)")
    parser.add_argument("--tree", action="append", help="a zarrfs checkout (PYTHONPATH of the daemon); repeat to compare")
    parser.add_argument("-o", dest="options", action="append", default=[], help="a mount option, e.g. -o ahead_size=32M")
    parser.add_argument("--root", help="build the array here and keep it (default: a temporary directory)")
    parser.add_argument("--store", default="local", choices=("local", "s3"), help="s3: SeaweedFS through the proxy")
    parser.add_argument("--delay-ms", type=float, default=5.0, help="the proxy's delay each way (--store s3)")
    args = parser.parse_args(argv)
    trees = [str(Path(t).resolve()) for t in args.tree or ["."]]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        root = Path(args.root or tmp)
        if args.store == "s3":
            source, name, store_options = stack.enter_context(s3_source(root, args.layout, args.size_mib,
                                                                         args.delay_ms))
        else:
            source, name, store_options = stack.enter_context(local_source(root, args.layout, args.size_mib))
        options = store_options + args.options
        nbytes = args.size_mib << 20
        results: dict[str, list[dict]] = {tree: [] for tree in trees}
        for run in range(args.runs):
            for tree in trees:
                r = one_run(source, name, tree, options, nbytes, args.passes)
                results[tree].append(r)
                print(f"run {run + 1} {tree}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)
        for tree, rs in results.items():
            print(f"median {tree}: " + ", ".join(f"{k} {statistics.median(r[k] for r in rs):.3f}" for k in rs[0]))


if __name__ == "__main__":
    main()
