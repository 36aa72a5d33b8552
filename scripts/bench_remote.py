"""The benchmark against an object store: `scripts/bench.py --store s3` (or `--store http`).

The same float32 layouts as the local bench go to SeaweedFS (`weed mini`), or nginx for http,
on loopback. Every reader reaches the server through one delaying proxy
(tests/servers/delay_proxy.py: `--delay-ms` each way, 5 by default, so a 10 ms round trip;
this kernel has no netem), so all pay the same round trip; the report prints the measured round
trip of a small GET. In each interleaved round, zarrfs through a real mount, tensorstore
in-process (its s3 or http kvstore), zarr-python in-process (obstore) and zarrs-python (the
same store, the zarrs codec pipeline) in a process of its own (it holds the GIL while it waits,
which would stall this process's proxy) read the same arrays;
every ratio is taken within a round, and the proxy counts each reader's requests. Also: the
daemon's peak RSS, and a 1,000-array hierarchy with consolidated metadata (GETs to open it,
first and second ls -lR).
"""

import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test servers (tests/servers)

from benchlib import (
    GB,
    GIB,
    ZARRFS,
    _mounted,
    best_peer,
    build,
    costed,
    p50_ms,
    random_offsets,
    read_through,
    table,
    timed,
)
from servers.delay_proxy import DelayProxy
from servers.nginx import Nginx
from servers.seaweed import BUCKET, Seaweed
from zarrfs.stores.source_url import RemoteOptions

PINGS = 20  # small GETs timed for the round trip the report prints
ZARRS_READER = Path(__file__).resolve().parent / "zarrs_reader.py"  # zarrs-python reads in a process of its own


class S3Target:
    """The arrays in SeaweedFS; zarrfs, tensorstore and zarr-python all read them through the proxy."""

    def __init__(self, work: Path):
        self.server = Seaweed(work / "seaweed")
        self.endpoint = None  # the proxy's, once it runs (via)

    def start(self):
        self.server.start()
        os.environ.update({k: v for k, v in self.server.env().items() if k.startswith("AWS_")})
        empty = self.server.directory / "aws-empty"  # tensorstore's AWS SDK complains of absent files
        empty.write_text("")
        os.environ.update(AWS_CONFIG_FILE=str(empty), AWS_SHARED_CREDENTIALS_FILE=str(empty))

    def stop(self):
        self.server.stop()

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.server.ports["s3"]

    def via(self, proxy: DelayProxy) -> None:
        self.endpoint = proxy.endpoint

    def upload(self, layout: str, path: Path) -> str:
        import obstore
        store = self.server.store(layout)
        for file in path.rglob("*"):
            if file.is_file():
                obstore.put(store, str(file.relative_to(path)), file.read_bytes())
        return layout

    def ping(self) -> None:
        import obstore
        obstore.put(self.server.store("ping"), "p", b"x")
        store = self.server.store("ping", endpoint=self.endpoint)
        return lambda: obstore.get(store, "p").bytes()

    def source(self, prefix: str) -> str:
        return self.server.url(prefix)

    def mount_options(self) -> tuple:
        return (f"endpoint={self.endpoint}",)

    def tensorstore(self, prefix: str):
        import tensorstore as ts
        return ts.open({"driver": "zarr3", "kvstore": {"driver": "s3", "bucket": BUCKET, "path": f"{prefix}/",
                                                       "endpoint": self.endpoint, "aws_region": "us-east-1"},
                        "context": {"cache_pool": {"total_bytes_limit": 0}}}).result()

    def zarr_python(self, prefix: str):
        import zarr
        return zarr.open_array(self.server.zarr_store(prefix, endpoint=self.endpoint), mode="r")

    def zarrs_spec(self, prefix: str) -> dict:
        """zarrs_reader.py's store (its credentials: the AWS_ variables start() set)."""
        return {"s3": {"bucket": BUCKET, "prefix": prefix, "endpoint": self.endpoint}}


class HttpTarget:
    """The arrays' directory served by nginx, read through the proxy."""

    def __init__(self, work: Path):
        self.root = work / "www"
        self.root.mkdir(exist_ok=True)
        self.server = Nginx(work / "nginx", self.root)
        self.endpoint = None

    def start(self):
        self.server.start()

    def stop(self):
        self.server.stop()

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.server.port

    def via(self, proxy: DelayProxy) -> None:
        self.endpoint = proxy.endpoint

    def upload(self, layout: str, path: Path) -> str:
        shutil.copytree(path, self.root / layout, dirs_exist_ok=True)
        return layout

    def ping(self):
        (self.root / "ping").write_bytes(b"x")
        return lambda: urllib.request.urlopen(f"{self.endpoint}/ping").read()

    def source(self, prefix: str) -> str:
        return f"{self.endpoint}/{prefix}"

    def mount_options(self) -> tuple:
        return ("ro",)

    def tensorstore(self, prefix: str):
        import tensorstore as ts
        return ts.open({"driver": "zarr3", "kvstore": {"driver": "http", "base_url": self.source(prefix)},
                        "context": {"cache_pool": {"total_bytes_limit": 0}}}).result()

    def zarr_python(self, prefix: str):
        import zarr
        from obstore.store import HTTPStore
        from zarr.storage import ObjectStore
        return zarr.open_array(ObjectStore(HTTPStore.from_url(self.source(prefix), client_options={"allow_http": True}),
                                           read_only=True), mode="r")

    def zarrs_spec(self, prefix: str) -> dict:
        return {"http": {"url": self.source(prefix)}}


def round_trip_ms(target) -> float:
    """The median time of a small GET through the proxy, after one that opens the connection."""
    get = target.ping()
    get()
    return statistics.median(timed(get) for _ in range(PINGS)) * 1000


@contextlib.contextmanager
def mount_remote(target, prefix: str, *options: str, log: Path | None = None):
    args = [ZARRFS, target.source(prefix), "{mnt}", "-f", "-o", ",".join((*target.mount_options(), *options))]
    with _mounted(args + (["-d"] if log else []), f"{prefix}.bin", log) as mounted:
        yield mounted


def bench_round(target, proxy: DelayProxy, prefix: str, data: np.ndarray, seed: int, samples: int) -> dict:
    nbytes, r = data.nbytes, {}

    def streamed(name: str, read, daemon: int | None = None) -> dict[str, float]:
        """`read` timed, its requests through the proxy counted, and its CPU per GiB: this
        process's but the proxy's thread, and the daemon's."""
        proxy.reset()
        r[f"{name} read"], cpu = costed(read, nbytes, (daemon,) if daemon else (), but=proxy.thread_id)
        r[f"{name} requests per GiB"] = proxy.reset().requests * GIB / nbytes
        return cpu

    r["tensorstore cpu s per GiB"] = streamed("tensorstore", lambda: target.tensorstore(prefix).read().result())["self"]
    r["zarr-python cpu s per GiB"] = streamed("zarr-python", lambda: target.zarr_python(prefix)[...])["self"]
    # zarrs-python waits for the network holding the GIL (a Python thread made 1 tick of 50 ms in
    # the 5 s its read waited): here it would stall the proxy, a thread of this process, until its
    # GETs time out. It reads in a process of its own (zarrs_reader.py), which reports its CPU.
    proxy.reset()
    zarrs = json.loads(subprocess.run([sys.executable, str(ZARRS_READER), json.dumps(target.zarrs_spec(prefix))],
                                      check=True, capture_output=True, text=True, timeout=600).stdout)
    r["zarrs-python read"] = nbytes / zarrs["seconds"]
    r["zarrs-python requests per GiB"] = proxy.reset().requests * GIB / nbytes
    r["zarrs-python cpu s per GiB"] = zarrs["cpu"] * GIB / nbytes
    with mount_remote(target, prefix) as (bin_path, process):
        cpu = streamed("zarrfs cold", lambda: read_through(bin_path), process.pid)
        r["zarrfs daemon cpu s per GiB"], r["zarrfs reader cpu s per GiB"] = cpu[str(process.pid)], cpu["self"]
        r["daemon cpu ms in cold read"] = cpu[str(process.pid)] * nbytes / GIB * 1000
    offsets = random_offsets(nbytes, samples, seed)
    with mount_remote(target, prefix) as (bin_path, _):
        fd = os.open(bin_path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        r["zarrfs 4k p50 ms"] = p50_ms([timed(lambda o=o: os.pread(fd, 4096, o)) for o in offsets])
        os.close(fd)
    store = target.tensorstore(prefix)
    r["tensorstore 4k p50 ms"] = p50_ms([timed(lambda o=o: store[o // 4:o // 4 + 1024].read().result())
                                         for o in offsets])
    z = target.zarr_python(prefix)
    r["zarr-python 4k p50 ms"] = p50_ms([timed(lambda o=o: z[o // 4:o // 4 + 1024]) for o in offsets])
    return r


def bench_memory(target, prefix: str, cache_mib: int) -> int:
    with mount_remote(target, prefix, f"cache_size={cache_mib}M") as (bin_path, process):
        read_through(bin_path)
        status = Path(f"/proc/{process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) * 1024


def build_consolidated(root: Path, count: int) -> Path:
    """`count` small arrays in groups of 100, with consolidated metadata, as zarr-python writes it."""
    import zarr
    path = root / "many.zarr"
    group = zarr.open_group(str(path), mode="w")
    for i in range(count):
        sub = group.require_group(f"g{i // 100:03d}")
        sub.create_array(f"a{i % 100:02d}", shape=(10, 10), chunks=(5, 5), dtype="f8")
    zarr.consolidate_metadata(str(path))
    return path


def bench_listing(target, prefix: str, work: Path) -> dict:
    log = work / "listing.log"
    with mount_remote(target, prefix, "ro", log=log) as (bin_path, _):
        root = bin_path.parent
        opened = _requests(log)
        first = timed(lambda: subprocess.run(["ls", "-lR", str(root)], stdout=subprocess.DEVNULL, check=True))
        second = timed(lambda: subprocess.run(["ls", "-lR", str(root)], stdout=subprocess.DEVNULL, check=True))
    return {"requests to open": opened, "first ls -lR s": first, "second ls -lR s": second}


def _requests(log: Path) -> dict:
    text = log.read_text(errors="replace") if log.exists() else ""
    found = re.findall(r"zarrfs\.stores\.object_store: (GET|LIST|PUT|DELETE) ", text)
    return {kind: found.count(kind) for kind in sorted(set(found))}


ROWS = [
    ("tensorstore read GB/s", lambda r: r["tensorstore read"] / GB, "{:.3f}"),
    ("zarr-python read GB/s", lambda r: r["zarr-python read"] / GB, "{:.3f}"),
    ("zarrs-python read GB/s (a process of its own)", lambda r: r["zarrs-python read"] / GB, "{:.3f}"),
    ("zarrfs cold read GB/s", lambda r: r["zarrfs cold read"] / GB, "{:.3f}"),
    ("  / best peer (the fastest of the three)", lambda r: r["zarrfs cold read"] / best_peer(r), "{:.2f}x"),
    ("  / tensorstore (target >= 1.0)", lambda r: r["zarrfs cold read"] / r["tensorstore read"], "{:.2f}x"),
    ("  / zarr-python (target >= 1.5)", lambda r: r["zarrfs cold read"] / r["zarr-python read"], "{:.2f}x"),
    ("  daemon CPU during the cold read, ms", lambda r: r["daemon cpu ms in cold read"], "{:.0f}"),
    ("CPU s per GiB streamed: tensorstore (its process, the proxy apart)", lambda r: r["tensorstore cpu s per GiB"],
     "{:.2f}"),
    ("  zarr-python (its process, the proxy apart)", lambda r: r["zarr-python cpu s per GiB"], "{:.2f}"),
    ("  zarrs-python (its own process)", lambda r: r["zarrs-python cpu s per GiB"], "{:.2f}"),
    ("  zarrfs's daemon", lambda r: r["zarrfs daemon cpu s per GiB"], "{:.2f}"),
    ("  the reader of zarrfs's file (copies out of the kernel)", lambda r: r["zarrfs reader cpu s per GiB"], "{:.2f}"),
    ("  zarrfs's daemon / tensorstore (target <= 1.0)",
     lambda r: r["zarrfs daemon cpu s per GiB"] / (r["tensorstore cpu s per GiB"] or float("nan")), "{:.2f}x"),
    ("requests per GiB streamed: tensorstore", lambda r: r["tensorstore requests per GiB"], "{:.0f}"),
    ("  zarr-python", lambda r: r["zarr-python requests per GiB"], "{:.0f}"),
    ("  zarrs-python", lambda r: r["zarrs-python requests per GiB"], "{:.0f}"),
    ("  zarrfs", lambda r: r["zarrfs cold requests per GiB"], "{:.0f}"),
    ("zarrfs 4 KiB pread p50 ms", lambda r: r["zarrfs 4k p50 ms"], "{:.2f}"),
    ("tensorstore 4 KiB window p50 ms", lambda r: r["tensorstore 4k p50 ms"], "{:.2f}"),
    ("zarr-python 4 KiB window p50 ms", lambda r: r["zarr-python 4k p50 ms"], "{:.2f}"),
    ("  zarrfs / tensorstore (target <= 1.0)", lambda r: r["zarrfs 4k p50 ms"] / r["tensorstore 4k p50 ms"], "{:.2f}x"),
]


def report(runs: dict, memory: dict, listing: dict, args, rtt_ms: float) -> str:
    rounds = len(next(iter(runs.values())))
    cache_mib = max(1, args.size_mib // 4)
    prefetch_mib = min(RemoteOptions().prefetch_size >> 20, cache_mib // 4)  # taken out of the cache (chunk_cache.py)
    lines = [f"zarrfs remote benchmark ({args.store}): {args.size_mib} MiB float32 per layout, {rounds} interleaved "
             f"rounds; every reader through a delaying proxy, {args.delay_ms:g} ms each way (a small GET's round "
             f"trip: {rtt_ms:.1f} ms p50); median (min-max) over the rounds; {os.cpu_count()} cores, load "
             f"{os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    # the decodes ahead are in the cache; a shard's runs fetched ahead hold up to prefetch each,
    # and a stream crossing into the next shard holds two shards' (shard_spans.py)
    lines += table(runs, ROWS, memory, cache_mib + 2 * prefetch_mib + 150)
    if listing:
        lines += ["", f"{args.listing} arrays with consolidated metadata: requests to open {listing['requests to open']} "
                      f"(target: 1 GET), first ls -lR {listing['first ls -lR s']:.2f} s (target < 2), "
                      f"second {listing['second ls -lR s']:.2f} s"]
    return "\n".join(lines)


def run(args) -> None:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="zarrfs-bench-remote-"))
    work.mkdir(parents=True, exist_ok=True)
    target = (S3Target if args.store == "s3" else HttpTarget)(work)
    target.start()
    try:
        arrays = {}
        for layout in args.layouts.split(","):
            path, data = build(work, layout, args.size_mib)
            arrays[layout] = (target.upload(layout, path), data)
        with DelayProxy(target.address, args.delay_ms / 1000) as proxy:
            target.via(proxy)
            rtt = round_trip_ms(target)
            runs = {layout: [] for layout in arrays}
            for round_ in range(args.runs):
                for layout, (prefix, data) in arrays.items():
                    runs[layout].append(bench_round(target, proxy, prefix, data, round_, args.samples))
            if args.json:
                Path(args.json).write_text(json.dumps(runs, indent=1))
            memory = {layout: bench_memory(target, prefix, max(1, args.size_mib // 4))
                      for layout, (prefix, _) in arrays.items()}
            listing = {}
            if args.listing:
                listing = bench_listing(target, target.upload("many", build_consolidated(work, args.listing)), work)
        print(report(runs, memory, listing, args, rtt))
    finally:
        target.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def run_icechunk(work: Path, args) -> str:
    """The Icechunk rows (bench_icechunk.py) for a repository on SeaweedFS, every reader through the proxy."""
    import bench_icechunk
    target = S3Target(work)
    target.start()
    try:
        with DelayProxy(target.address, args.delay_ms / 1000) as proxy:
            target.via(proxy)
            return bench_icechunk.run(bench_icechunk.S3Repository(target, args.delay_ms), work, args)
    finally:
        target.stop()
