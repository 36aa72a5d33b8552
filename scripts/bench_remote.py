"""The benchmark against an object store: `scripts/bench.py --store s3` (or `--store http`).

The same float32 layouts as the local bench go to SeaweedFS (`weed mini`), or nginx for http,
running in a network namespace that this script makes: a veth pair, with `tc netem delay` on
both ends where the kernel has netem (`--delay-ms`, 5 by default: a 10 ms round trip), all
removed afterwards. In each interleaved round, zarrfs through a real mount, tensorstore
in-process (its s3 or http kvstore) and zarr-python in-process (obstore) read the same arrays;
every ratio is taken within a round. Also: the daemon's peak RSS, and a 1,000-array hierarchy
with consolidated metadata (GETs to open it, first and second ls -lR).
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchlib import GB, ZARRFS, _mounted, build, cpu_seconds, p50_ms, random_offsets, read_through, table, \
    timed
from zarrfs.testing.nginx import Nginx
from zarrfs.testing.seaweed import BUCKET, Seaweed


@contextlib.contextmanager
def namespace(delay_ms: float):
    """(name, address of the far end, delay applied or None): a network namespace joined to this
    one by a veth pair; always removed."""
    name, index = f"zarrfs-bench-{os.getpid()}", os.getpid() % 250 + 1
    near, far = f"zb{index}h", f"zb{index}n"
    here, there = f"10.231.{index}.1", f"10.231.{index}.2"
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    inside = ("ip", "netns", "exec", name)
    run("ip", "netns", "add", name)
    try:
        run("ip", "link", "add", near, "type", "veth", "peer", "name", far)
        run("ip", "link", "set", far, "netns", name)
        run("ip", "addr", "add", f"{here}/24", "dev", near)
        run("ip", "link", "set", near, "up")
        run(*inside, "ip", "addr", "add", f"{there}/24", "dev", far)
        run(*inside, "ip", "link", "set", far, "up")
        run(*inside, "ip", "link", "set", "lo", "up")
        applied = None
        if delay_ms:
            try:
                run("tc", "qdisc", "add", "dev", near, "root", "netem", "delay", f"{delay_ms}ms")
                run(*inside, "tc", "qdisc", "add", "dev", far, "root", "netem", "delay", f"{delay_ms}ms")
                applied = delay_ms
            except subprocess.CalledProcessError as e:
                print(f"tc netem is not available ({e.stderr.decode().strip()}): no added delay", file=sys.stderr)
        yield name, there, applied
    finally:
        subprocess.run(["ip", "link", "del", near], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


class S3Target:
    """The arrays in SeaweedFS; zarrfs, tensorstore and zarr-python all read them over the veth."""

    def __init__(self, work: Path, ns: str, address: str):
        self.server = Seaweed(work / "seaweed", ip=address, wrapper=("ip", "netns", "exec", ns))

    def start(self):
        self.server.start()
        os.environ.update({k: v for k, v in self.server.env().items() if k.startswith("AWS_")})
        empty = self.server.directory / "aws-empty"  # tensorstore's AWS SDK complains of absent files
        empty.write_text("")
        os.environ.update(AWS_CONFIG_FILE=str(empty), AWS_SHARED_CREDENTIALS_FILE=str(empty))

    def stop(self):
        self.server.stop()

    def upload(self, layout: str, path: Path) -> str:
        import obstore
        store = self.server.store(layout)
        for file in path.rglob("*"):
            if file.is_file():
                obstore.put(store, str(file.relative_to(path)), file.read_bytes())
        return layout

    def source(self, prefix: str) -> str:
        return self.server.url(prefix)

    def mount_options(self) -> tuple:
        return (f"endpoint={self.server.endpoint}",)

    def tensorstore(self, prefix: str):
        import tensorstore as ts
        return ts.open({"driver": "zarr3", "kvstore": {"driver": "s3", "bucket": BUCKET, "path": f"{prefix}/",
                                                       "endpoint": self.server.endpoint, "aws_region": "us-east-1"},
                        "context": {"cache_pool": {"total_bytes_limit": 0}}}).result()

    def zarr_python(self, prefix: str):
        import zarr
        return zarr.open_array(self.server.zarr_store(prefix), mode="r")


class HttpTarget:
    """The arrays' directory served by nginx in the namespace."""

    def __init__(self, work: Path, ns: str, address: str):
        self.root = work / "www"
        self.root.mkdir(exist_ok=True)
        self.server = Nginx(work / "nginx", self.root, ip=address, wrapper=("ip", "netns", "exec", ns))

    def start(self):
        self.server.start()

    def stop(self):
        self.server.stop()

    def upload(self, layout: str, path: Path) -> str:
        shutil.copytree(path, self.root / layout, dirs_exist_ok=True)
        return layout

    def source(self, prefix: str) -> str:
        return f"{self.server.url}/{prefix}"

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


@contextlib.contextmanager
def mount_remote(target, prefix: str, *options: str, log: Path | None = None):
    args = [ZARRFS, target.source(prefix), "{mnt}", "-f", "-o", ",".join((*target.mount_options(), *options))]
    with _mounted(args + (["-d"] if log else []), f"{prefix}.bin", log) as mounted:
        yield mounted


def bench_round(target, layout: str, prefix: str, data: np.ndarray, seed: int, samples: int) -> dict:
    nbytes, r = data.nbytes, {}
    r["tensorstore read"] = nbytes / timed(lambda: target.tensorstore(prefix).read().result())
    r["zarr-python read"] = nbytes / timed(lambda: target.zarr_python(prefix)[...])
    with mount_remote(target, prefix) as (bin_path, process):
        cpu = cpu_seconds(process.pid)
        r["zarrfs cold read"] = nbytes / read_through(bin_path)
        r["daemon cpu ms in cold read"] = (cpu_seconds(process.pid) - cpu) * 1000
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
    ("zarrfs cold read GB/s", lambda r: r["zarrfs cold read"] / GB, "{:.3f}"),
    ("  / tensorstore (target >= 1.0)", lambda r: r["zarrfs cold read"] / r["tensorstore read"], "{:.2f}x"),
    ("  / zarr-python (target >= 2.0)", lambda r: r["zarrfs cold read"] / r["zarr-python read"], "{:.2f}x"),
    ("  daemon CPU during the cold read, ms", lambda r: r["daemon cpu ms in cold read"], "{:.0f}"),
    ("zarrfs 4 KiB pread p50 ms", lambda r: r["zarrfs 4k p50 ms"], "{:.2f}"),
    ("tensorstore 4 KiB window p50 ms", lambda r: r["tensorstore 4k p50 ms"], "{:.2f}"),
    ("zarr-python 4 KiB window p50 ms", lambda r: r["zarr-python 4k p50 ms"], "{:.2f}"),
    ("  zarrfs / tensorstore (target <= 1.3)", lambda r: r["zarrfs 4k p50 ms"] / r["tensorstore 4k p50 ms"], "{:.2f}x"),
]


def report(runs: dict, memory: dict, listing: dict, args, delay) -> str:
    rounds = len(next(iter(runs.values())))
    where = f"tc netem delay {delay} ms each way" if delay else "no added delay (tc netem unavailable or --delay-ms 0)"
    lines = [f"zarrfs remote benchmark ({args.store}): {args.size_mib} MiB float32 per layout, {rounds} interleaved "
             f"rounds, server in a network namespace behind a veth pair, {where}; median (min-max) over the rounds; "
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    lines += table(runs, ROWS, memory, args.size_mib // 4 + 150)
    if listing:
        lines += ["", f"{args.listing} arrays with consolidated metadata: requests to open {listing['requests to open']} "
                      f"(target: 1 GET), first ls -lR {listing['first ls -lR s']:.2f} s (target < 2), "
                      f"second {listing['second ls -lR s']:.2f} s"]
    return "\n".join(lines)


def run(args) -> None:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="zarrfs-bench-remote-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with namespace(args.delay_ms) as (ns, address, delay):
            target = (S3Target if args.store == "s3" else HttpTarget)(work, ns, address)
            target.start()
            try:
                arrays = {}
                for layout in args.layouts.split(","):
                    path, data = build(work, layout, args.size_mib)
                    arrays[layout] = (target.upload(layout, path), data)
                runs = {layout: [] for layout in arrays}
                for round_ in range(args.runs):
                    for layout, (prefix, data) in arrays.items():
                        runs[layout].append(bench_round(target, layout, prefix, data, round_, args.samples))
                if args.json:
                    Path(args.json).write_text(json.dumps(runs, indent=1))
                memory = {layout: bench_memory(target, prefix, max(1, args.size_mib // 4))
                          for layout, (prefix, _) in arrays.items()}
                listing = {}
                if args.listing:
                    listing = bench_listing(target, target.upload("many", build_consolidated(work, args.listing)), work)
                print(report(runs, memory, listing, args, delay))
            finally:
                target.stop()
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
