"""What the benchmark scripts share: building the arrays, mounting, timing, and the report table.
bench.py (local stores) and bench_remote.py (object stores) both import it; neither imports the other
at the top."""

import os
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
GIB = 1 << 30
PAGE = os.sysconf("SC_PAGE_SIZE")


GB = 1e9


ZARRFS = str(Path(sys.executable).parent / "zarrfs")


TRIVIAL_FUSE = Path(__file__).resolve().parent / "trivial_fuse.py"


def layout_options(layout: str, chunks: tuple, shards: tuple) -> dict:
    from zarr.codecs import BloscCodec, ZstdCodec
    return {"uncompressed": dict(chunks=chunks, compressors=None),  # the bytes codec alone, little-endian
            "zstd": dict(chunks=chunks, compressors=[ZstdCodec(level=0)]),
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
def _mounted(command: list[str], name: str, log: Path | None = None, env: dict[str, str] | None = None):
    """`command` (its "{mnt}" a new directory) mounted; yields (the file `name` in it, the process)."""
    mnt = Path(tempfile.mkdtemp(prefix="zarrfs-bench-"))
    args = [a.replace("{mnt}", str(mnt)) for a in command]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log, "wb") if log else subprocess.DEVNULL,
                               env=env)
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mnt):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{' '.join(args)} did not mount")
            time.sleep(0.01)
        yield mnt / name, process
    finally:
        _unmount(mnt)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.rmdir(mnt)


def _unmount(mnt: Path, wait: float = 30.0) -> None:
    """Unmount `mnt`, trying again while it is busy (a reader's descriptor closing late on a loaded
    machine made fusermount's only try fail with EBUSY, and the rmdir after it), then lazily."""
    deadline = time.monotonic() + wait
    while os.path.ismount(mnt):
        done = subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, text=True)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            print(f"{mnt}: unmounted lazily, busy for {wait:.0f} s: {done.stderr.strip()}", file=sys.stderr)
            subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True)
            return
        time.sleep(0.1)


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


def costed(fn, nbytes: int, pids: tuple[int, ...] = (), but: int | None = None) -> tuple[float, dict[str, float]]:
    """(bytes per second, {whose: CPU seconds per GiB}) of `fn()` reading `nbytes`: "self" is this
    process (every thread: an in-process reader's decodes, or a FUSE file's reader's copies out
    of the kernel) but its thread `but` (the delaying proxy's), then each process of `pids` (a
    mount's daemon) by its pid, from /proc/PID/stat before and after (clock ticks of 10 ms: a
    read of less than a second rounds)."""
    def now() -> dict[str, float]:
        own = time.process_time() - (thread_cpu_seconds(but) if but else 0.0)
        return {"self": own, **{str(pid): cpu_seconds(pid) for pid in pids}}
    before = now()
    seconds = timed(fn)
    after = now()
    return nbytes / seconds, {who: (after[who] - before[who]) * GIB / nbytes for who in before}


def thread_cpu_seconds(tid: int) -> float:
    """User + system CPU time of one thread of this process so far."""
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def zarrs_pipeline():
    """zarr-python with zarrs-python's codec pipeline (Rust) for the arrays opened and read within:
    the peer "zarrs-python". Strict: an array or store it does not take raises
    zarrs.pipeline.UnsupportedMetadataError instead of silently measuring zarr-python's own."""
    import zarr
    with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True}):
        yield


def open_tensorstore(path: Path):
    import tensorstore as ts
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)},
            "context": {"cache_pool": {"total_bytes_limit": 0}}}
    return ts.open(spec).result()


def random_offsets(nbytes: int, count: int, seed: int) -> list[int]:
    return [int(x) * 4096 for x in np.random.default_rng(seed).integers(0, nbytes // 4096, count)]


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


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


def adjacent_pages(path: Path) -> float:
    """The fraction of a cached file's pages whose physical successor holds its next page: warm
    re-reads of two files with the same pages cached run at different speeds with it (the kernel
    places them as it finds free memory, at the moment of the fill). Needs root (/proc/self/pagemap)."""
    import mmap
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 2 * PAGE:
            return float("nan")
        with mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) as m:
            pages = np.frombuffer(m, np.uint8)
            int(pages[::PAGE].sum())  # map every page: already cached, no read reaches the file system
            first = pages.ctypes.data // PAGE
            with open("/proc/self/pagemap", "rb") as pagemap:
                pagemap.seek(first * 8)
                entries = np.frombuffer(pagemap.read(size // PAGE * 8), "<u8")
            del pages
    frames = entries & ((1 << 55) - 1)
    if not frames.any():  # not root: the kernel hides frame numbers
        return float("nan")
    return float(np.mean(frames[1:] == frames[:-1] + 1))


PEERS = ("tensorstore", "zarr-python", "zarrs-python")  # the in-process readers each round times


def best_peer(r: dict) -> float:
    """The fastest in-process reader of this round; one that could not read this store (NaN) is
    left out."""
    return max(r[f"{peer} read"] for peer in PEERS if r[f"{peer} read"] == r[f"{peer} read"])
