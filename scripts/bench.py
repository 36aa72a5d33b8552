"""zarrfs benchmark: every row of the performance issue in one run, interleaved, as ratios.

    .venv/bin/python scripts/bench.py [--size-mib 512] [--runs 5] [--layouts uncompressed,zstd,sharded,blosc] [--json FILE]
    .venv/bin/python scripts/bench.py --groups imaging [--imaging-size 16384] [--runs 5]   (bench_imaging.py)
    .venv/bin/python scripts/bench.py --layouts icechunk [--store s3]     # the Icechunk rows (Python >= 3.12)

Builds float32 arrays (1 MiB uncompressed chunks, the bytes codec alone; 1 MiB zstd chunks; 64 MiB
shards of 1 MiB zstd inner chunks; 1 MiB blosc-lz4 chunks) with zarr-python, then measures side by side: the page-cache read of the same
bytes (the limit), the same bytes served from memory by a trivial FUSE file system (the limit
of any FUSE file: scripts/trivial_fuse.py), zarr-python, zarrs-python (zarr-python with the zarrs
codec pipeline) and tensorstore in-process, and zarrfs
through a real mount. NAME.tif, which needs two dimensions, is read from a 2-D copy of the same
values (1 MiB chunks of whole rows, so the same bytes in the same chunks) against that copy's NAME.bin.
Every ratio is taken within a round (the machine's speed drifts between rounds); the report gives
each one's median over --runs interleaved rounds and its spread (min-max). Needs the bench extra (pip install -e '.[bench]') and root for mounts.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchlib import (
    GB,
    GIB,
    MIB,
    PEERS,
    adjacent_pages,
    best_peer,
    build,
    costed,
    cpu_seconds,
    evict,
    layout_options,
    mount,
    mount_limit,
    open_tensorstore,
    p50_ms,
    random_offsets,
    read_through,
    table,
    timed,
    warm_read,
    zarrs_pipeline,
)

HDF5_ARRAYS = 1000  # arrays in the root zarr.h5 whose open is timed


IMAGE_WIDTH = 1024  # of the 2-D copy NAME.tif is read from


def build_image(root: Path, layout: str, data: np.ndarray) -> Path:
    """The same values as a 2-D array, for NAME.tif: chunks of whole rows, 1 MiB each as before."""
    import zarr
    rows = MIB // 4 // IMAGE_WIDTH
    path = root / f"{layout}-image.zarr"
    z = zarr.create_array(str(path), shape=(data.size // IMAGE_WIDTH, IMAGE_WIDTH), dtype="float32", fill_value=0.0,
                          overwrite=True, **layout_options(layout, (rows, IMAGE_WIDTH), (64 * rows, IMAGE_WIDTH)))
    z[...] = data.reshape(-1, IMAGE_WIDTH)
    return path


def bench_layout(layout: str, path: Path, data: np.ndarray, raw: Path, image: Path, seed: int, samples: int) -> dict:
    import zarr
    nbytes = data.nbytes
    r = {}
    evict(raw)
    read_through(raw)  # the page cache is filled by a read, as a cold read through a mount fills it
    r["page cache read"] = nbytes / warm_read(raw)
    r["zarr-python read"], cpu = costed(lambda: zarr.open_array(str(path))[...], nbytes)
    r["zarr-python cpu s per GiB"] = cpu["self"]
    r["tensorstore read"], cpu = costed(lambda: open_tensorstore(path).read().result(), nbytes)
    r["tensorstore cpu s per GiB"] = cpu["self"]
    with zarrs_pipeline():
        r["zarrs-python read"], cpu = costed(lambda: zarr.open_array(str(path))[...], nbytes)
    r["zarrs-python cpu s per GiB"] = cpu["self"]
    with mount_limit(raw) as (limit_path, limit):
        r["fuse limit cold read"], cpu = costed(lambda: read_through(limit_path), nbytes, (limit.pid,))
        r["fuse limit daemon cpu s per GiB"], r["fuse limit reader cpu s per GiB"] = cpu[str(limit.pid)], cpu["self"]
        r["fuse limit warm re-read"] = nbytes / warm_read(limit_path)
        r["fuse limit adjacent pages"] = adjacent_pages(limit_path)
    with mount(path) as (bin_path, process):
        r["zarrfs cold read"], cpu = costed(lambda: read_through(bin_path), nbytes, (process.pid,))
        r["zarrfs daemon cpu s per GiB"], r["zarrfs reader cpu s per GiB"] = cpu[str(process.pid)], cpu["self"]
        r["daemon cpu ms in cold read"] = cpu[str(process.pid)] * nbytes / GIB * 1000
        cpu = cpu_seconds(process.pid)
        r["zarrfs warm re-read"] = nbytes / warm_read(bin_path)
        r["daemon cpu ms in warm re-read"] = (cpu_seconds(process.pid) - cpu) * 1000
        r["zarrfs adjacent pages"] = adjacent_pages(bin_path)
    with mount(image) as (bin_path, _):  # NAME.tif against NAME.bin of the same 2-D array, each mounted cold
        r["image bin cold read"] = nbytes / read_through(bin_path)
    with mount(image) as (bin_path, _):
        r["image tif cold read"] = nbytes / read_through(bin_path.with_suffix(".tif"))
    with mount_limit(raw, pace=r["zarrfs cold read"]) as (limit_path, _):  # filled as slowly as zarrfs's
        read_through(limit_path)
        r["fuse limit paced warm re-read"] = nbytes / warm_read(limit_path)
        r["fuse limit paced adjacent pages"] = adjacent_pages(limit_path)
    offsets = random_offsets(nbytes, samples, seed)
    r["zarrfs 4k p50 ms"] = p50_ms(random_preads(path, offsets))
    if layout == "uncompressed":  # the same without answering READs from the stored files: the lever's worth
        with mount(path, "nozerocopy") as (bin_path, process):
            cpu = cpu_seconds(process.pid)
            r["zarrfs nozerocopy cold read"] = nbytes / read_through(bin_path)
            r["daemon cpu ms in nozerocopy cold read"] = (cpu_seconds(process.pid) - cpu) * 1000
        r["zarrfs nozerocopy 4k p50 ms"] = p50_ms(random_preads(path, offsets, "nozerocopy"))
    store = open_tensorstore(path)
    r["tensorstore 4k p50 ms"] = p50_ms([timed(lambda o=o: store[o // 4:o // 4 + 1024].read().result())
                                         for o in offsets])
    z = zarr.open_array(str(path))
    r["zarr-python 4k p50 ms"] = p50_ms([timed(lambda o=o: z[o // 4:o // 4 + 1024]) for o in offsets])
    with zarrs_pipeline():
        z = zarr.open_array(str(path))
        r["zarrs-python 4k p50 ms"] = p50_ms([timed(lambda o=o: z[o // 4:o // 4 + 1024]) for o in offsets])
    with mount(path) as (bin_path, _):
        t = timed(lambda: subprocess.run(["dd", f"if={raw}", f"of={bin_path}", "bs=1M", "conv=notrunc,fsync",
                                          "status=none"], check=True))
        r["zarrfs dd write"] = nbytes / t
    r["zarr-python write"] = nbytes / timed(lambda: zarr.open_array(str(path)).__setitem__(Ellipsis, data))
    r.update(bench_append(layout, path.parent, data))
    r.update(bench_hdf5(path, nbytes))
    return r


def empty_records(root: Path, layout: str, name: str) -> Path:
    """An array of 1 MiB float32 records with none yet (dimension 0 empty: it grows by default),
    one record a chunk, 64 a shard."""
    import zarr
    path = root / name
    row = MIB // 4
    zarr.create_array(str(path), shape=(0, row), dtype="float32", fill_value=0.0, overwrite=True,
                      **layout_options(layout, (1, row), (64, row)))
    return path


def bench_append(layout: str, root: Path, data: np.ndarray) -> dict:
    """The same bytes appended in 1 MiB records: through the mount (one write a record to
    NAME.bin opened for appending, then close, which stores them) and by zarr-python's append."""
    import zarr
    records = data.reshape(-1, MIB // 4)
    path = empty_records(root, layout, f"append-{layout}.zarr")
    with mount(path) as (bin_path, _):
        def append_through_mount():
            with open(bin_path, "ab", buffering=0) as f:
                for record in records:
                    f.write(record)
        t = timed(append_through_mount)
    z = zarr.open_array(str(empty_records(root, layout, f"append-zarr-{layout}.zarr")))
    return {"zarrfs append": data.nbytes / t,
            "zarr-python append": data.nbytes / timed(lambda: [z.append(record[None]) for record in records])}


def in_group(path: Path) -> Path:
    """A group holding a copy of the array `path` as `data`: the hdf5 view is a group's file."""
    group = path.parent / f"{path.stem}-group.zarr"
    if not group.exists():
        group.mkdir()
        (group / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
        shutil.copytree(path, group / "data")
    return group


def bench_hdf5(path: Path, nbytes: int) -> dict:
    """The same bytes read from NAME.bin and, through h5py, from the dataset of zarr.h5, each on
    a fresh mount (both cold). h5py reads a contiguous dataset in one read into the array it
    makes, so the pair compared reads in one call each into the same memory, touched before: a
    new array's page faults are the reader's, not the file's. h5py's own [...], into a new array,
    is reported beside, from a process of its own."""
    import h5py
    group, r = in_group(path), {}
    target = np.ones(nbytes, "u1")
    with mount(group) as (bin_path, _):
        r["zarrfs group bin one read"] = nbytes / timed(lambda: read_all_into(bin_path.parent / "data.bin", target))
    with mount(group) as (bin_path, _):
        def read_direct():
            with h5py.File(bin_path.parent / "zarr.h5", "r") as f:
                f["data"].read_direct(target.view(f["data"].dtype).reshape(f["data"].shape))
        r["zarrfs h5py dataset cold read"] = nbytes / timed(read_direct)
    with mount(group) as (bin_path, _):
        r["zarrfs h5py new array cold read"] = nbytes / h5py_in_a_new_process(bin_path.parent / "zarr.h5")
    return r


def h5py_in_a_new_process(path: Path) -> float:
    """Seconds for f["data"][...] in a script of its own, as a user runs one: in this long-lived
    process a new 256 MiB array sometimes cost 0.5 s of page faults (no compaction, no fallback
    from huge pages), a fresh process never."""
    script = ("import sys, time, h5py\n"
              "with h5py.File(sys.argv[1], 'r') as f:\n"
              "    t = time.perf_counter(); f['data'][...]; print(time.perf_counter() - t)\n")
    return float(subprocess.run([sys.executable, "-c", script, str(path)], check=True, capture_output=True,
                                text=True, timeout=600).stdout)


def read_all_into(path: Path, target: np.ndarray) -> None:
    """The file read into `target` with as few reads as the kernel allows (as h5py reads)."""
    memory = memoryview(target).cast("B")
    with open(path, "rb", buffering=0) as f:
        while memory:
            n = f.readinto(memory)
            if not n:
                raise EOFError(f"{path} ends {len(memory)} bytes early")
            memory = memory[n:]


def random_preads(path: Path, offsets: list[int], *options: str) -> list[float]:
    """Seconds of each 4 KiB pread at `offsets` through a fresh mount."""
    with mount(path, *options) as (bin_path, _):
        fd = os.open(bin_path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead: one 4 KiB page per pread
        lat = [timed(lambda o=o: os.pread(fd, 4096, o)) for o in offsets]
        os.close(fd)
    return lat


def bench_memory(path: Path, nbytes: int, cache_mib: int) -> int:
    """Peak RSS (bytes) of the daemon streaming the whole array with a small cache."""
    with mount(path, f"cache_size={cache_mib}M") as (bin_path, process):
        read_through(bin_path)
        status = Path(f"/proc/{process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) * 1024


def build_many(root: Path, count: int, name: str = "many.zarr", per_group: int = 100) -> Path:
    """A hierarchy of `count` small arrays in groups of `per_group` (metadata only: listing reads
    no chunk)."""
    doc = {"zarr_format": 3, "node_type": "array", "shape": [10, 10], "data_type": "float64",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 5]}},
           "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
           "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "attributes": {}}
    group = json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}})
    path = root / name
    shutil.rmtree(path, ignore_errors=True)  # a --workdir from an earlier run
    path.mkdir()
    (path / "zarr.json").write_text(group)
    for i in range(count):
        g = path / f"g{i // per_group:03d}" if per_group < count else path
        if i % per_group == 0 and g != path:
            g.mkdir()
            (g / "zarr.json").write_text(group)
        (g / f"a{i % per_group:04d}").mkdir()
        (g / f"a{i % per_group:04d}" / "zarr.json").write_text(json.dumps(doc))
    return path


def bench_hdf5_open(path: Path) -> float:
    """Seconds for h5py to open the root zarr.h5 of `path` on a fresh mount and list its datasets
    (the file is made when first opened)."""
    import h5py
    with mount(path) as (bin_path, _):
        def open_root():
            with h5py.File(bin_path.parent / "zarr.h5", "r") as f:
                f.visit(lambda name: None)
        return timed(open_root)


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
    return lambda r: r[a] / r[b] if a in r and b in r and r[b] else float("nan")  # 0: CPU below a clock tick




def best_peer_4k(r: dict) -> float:
    return min(r[f"{peer} 4k p50 ms"] for peer in PEERS)


# (label, value of one round, format): every ratio is taken within a round, then summarized
ROWS = [
    ("page cache read GB/s (the limit)", lambda r: r["page cache read"] / GB, "{:.2f}"),
    ("FUSE limit: file in memory, cold GB/s", lambda r: r["fuse limit cold read"] / GB, "{:.2f}"),
    ("FUSE limit: file in memory, warm GB/s", lambda r: r["fuse limit warm re-read"] / GB, "{:.2f}"),
    ("  the same, filled at zarrfs's cold pace, warm GB/s", lambda r: r["fuse limit paced warm re-read"] / GB,
     "{:.2f}"),
    ("tensorstore read GB/s", lambda r: r["tensorstore read"] / GB, "{:.2f}"),
    ("zarr-python read GB/s", lambda r: r["zarr-python read"] / GB, "{:.2f}"),
    ("zarrs-python read GB/s (zarr-python, zarrs codec pipeline)", lambda r: r["zarrs-python read"] / GB, "{:.2f}"),
    ("zarrfs cold read GB/s", lambda r: r["zarrfs cold read"] / GB, "{:.2f}"),
    ("zarrfs / min(FUSE limit, best peer) (target >= 0.9)",
     lambda r: r["zarrfs cold read"] / min(r["fuse limit cold read"], best_peer(r)), "{:.2f}x"),
    ("  / best peer (the fastest of tensorstore, zarr-python, zarrs-python)", lambda r: r["zarrfs cold read"] / best_peer(r),
     "{:.2f}x"),
    ("  / tensorstore", ratio("zarrfs cold read", "tensorstore read"), "{:.2f}x"),
    ("  / FUSE limit cold (target >= 0.85 uncompressed)", ratio("zarrfs cold read", "fuse limit cold read"),
     "{:.2f}x"),
    ("  / zarr-python", ratio("zarrfs cold read", "zarr-python read"), "{:.2f}x"),
    ("  / zarrs-python", ratio("zarrfs cold read", "zarrs-python read"), "{:.2f}x"),
    ("  daemon CPU during the cold read, ms", lambda r: r["daemon cpu ms in cold read"], "{:.0f}"),
    ("CPU s per GiB of the cold read: tensorstore (its process)", lambda r: r["tensorstore cpu s per GiB"], "{:.2f}"),
    ("  zarr-python (its process)", lambda r: r["zarr-python cpu s per GiB"], "{:.2f}"),
    ("  zarrs-python (its process)", lambda r: r["zarrs-python cpu s per GiB"], "{:.2f}"),
    ("  zarrfs's daemon", lambda r: r["zarrfs daemon cpu s per GiB"], "{:.2f}"),
    ("  the reader of zarrfs's file (copies out of the kernel)", lambda r: r["zarrfs reader cpu s per GiB"],
     "{:.2f}"),
    ("  FUSE limit's daemon", lambda r: r["fuse limit daemon cpu s per GiB"], "{:.2f}"),
    ("  the reader of the FUSE limit's file", lambda r: r["fuse limit reader cpu s per GiB"], "{:.2f}"),
    ("  zarrfs's daemon / tensorstore", ratio("zarrfs daemon cpu s per GiB", "tensorstore cpu s per GiB"), "{:.2f}x"),
    ("zarrfs -o nozerocopy cold read GB/s (uncompressed only)", lambda r: r.get("zarrfs nozerocopy cold read", float("nan")) / GB,
     "{:.2f}"),
    ("  / FUSE limit cold", ratio("zarrfs nozerocopy cold read", "fuse limit cold read"), "{:.2f}x"),
    ("  daemon CPU during that cold read, ms", lambda r: r.get("daemon cpu ms in nozerocopy cold read", float("nan")),
     "{:.0f}"),
    ("zarrfs NAME.tif cold read GB/s (2-D copy)", lambda r: r["image tif cold read"] / GB, "{:.2f}"),
    ("  / NAME.bin of the 2-D copy (target >= 0.95)", ratio("image tif cold read", "image bin cold read"), "{:.2f}x"),
    ("zarrfs warm re-read GB/s (median of 3)", lambda r: r["zarrfs warm re-read"] / GB, "{:.2f}"),
    ("  / FUSE limit warm (target >= 0.95)", ratio("zarrfs warm re-read", "fuse limit warm re-read"), "{:.2f}x"),
    ("  / FUSE limit filled at zarrfs's cold pace, warm", ratio("zarrfs warm re-read", "fuse limit paced warm re-read"),
     "{:.2f}x"),
    ("  / page cache", ratio("zarrfs warm re-read", "page cache read"), "{:.2f}x"),
    ("  daemon CPU during the re-reads, ms", lambda r: r["daemon cpu ms in warm re-read"], "{:.0f}"),
    ("  pages physically next to their successor, zarrfs %", lambda r: 100 * r["zarrfs adjacent pages"], "{:.0f}"),
    ("    FUSE limit %", lambda r: 100 * r["fuse limit adjacent pages"], "{:.0f}"),
    ("    FUSE limit filled at zarrfs's pace %", lambda r: 100 * r["fuse limit paced adjacent pages"], "{:.0f}"),
    ("zarrfs 4 KiB pread p50 ms", lambda r: r["zarrfs 4k p50 ms"], "{:.3f}"),
    ("tensorstore 4 KiB window p50 ms", lambda r: r["tensorstore 4k p50 ms"], "{:.3f}"),
    ("zarr-python 4 KiB window p50 ms", lambda r: r["zarr-python 4k p50 ms"], "{:.3f}"),
    ("zarrs-python 4 KiB window p50 ms", lambda r: r["zarrs-python 4k p50 ms"], "{:.3f}"),
    ("  zarrfs / best peer (target <= 1.0)", lambda r: r["zarrfs 4k p50 ms"] / best_peer_4k(r), "{:.2f}x"),
    ("  zarrfs / tensorstore", ratio("zarrfs 4k p50 ms", "tensorstore 4k p50 ms"), "{:.2f}x"),
    ("zarrfs -o nozerocopy 4 KiB pread p50 ms", lambda r: r.get("zarrfs nozerocopy 4k p50 ms", float("nan")), "{:.3f}"),
    ("  / best peer", lambda r: r.get("zarrfs nozerocopy 4k p50 ms", float("nan")) / best_peer_4k(r), "{:.2f}x"),
    ("zarrfs dd overwrite + fsync GB/s", lambda r: r["zarrfs dd write"] / GB, "{:.2f}"),
    ("zarr-python write GB/s", lambda r: r["zarr-python write"] / GB, "{:.2f}"),
    ("  / zarr-python (target >= 1.2)", ratio("zarrfs dd write", "zarr-python write"), "{:.2f}x"),
    ("zarrfs append in 1 MiB records + close GB/s", lambda r: r["zarrfs append"] / GB, "{:.2f}"),
    ("zarr-python append of the same records GB/s", lambda r: r["zarr-python append"] / GB, "{:.2f}"),
    ("  / zarr-python (target >= 1.0)", ratio("zarrfs append", "zarr-python append"), "{:.2f}x"),
    ("zarr.h5 dataset via h5py read_direct, cold GB/s", lambda r: r["zarrfs h5py dataset cold read"] / GB, "{:.2f}"),
    ("  / NAME.bin in one read into the same memory (target >= 0.95)",
     ratio("zarrfs h5py dataset cold read", "zarrfs group bin one read"), "{:.2f}x"),
    ("zarr.h5 dataset via h5py [...] in a new process, cold GB/s", lambda r: r["zarrfs h5py new array cold read"] / GB,
     "{:.2f}"),
]


def report(runs: dict[str, list[dict]], memory: dict, listing, args) -> str:
    rounds = len(next(iter(runs.values())))
    lines = [f"zarrfs benchmark: {args.size_mib} MiB float32 per layout, {rounds} interleaved rounds; each cell is "
             f"the median over the rounds (min-max), every ratio taken within a round; {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", ""]
    lines += table(runs, ROWS, memory, args.size_mib // 4 + 150) + [""]
    for label, (first, second) in listing.items():
        if label == "hdf5 open":
            lines.append(f"h5py opening the root zarr.h5 of {HDF5_ARRAYS} arrays, cold: {first:.2f} s (target < 2)")
            continue
        lines.append(f"listing {args.listing} arrays, {label}: first ls -lR {first:.2f} s (target < 5), "
                     f"second {second:.2f} s (target < 0.5)")
    if "views on" in listing and "views on but tiff" in listing:
        lines.append("  NAME.tif's cost: first ls -lR {:.2f}x, second {:.2f}x (target <= 1.2)".format(
            *(a / b for a, b in zip(listing["views on"], listing["views on but tiff"], strict=False))))
    return "\n".join(lines)


ICECHUNK = "icechunk"  # a --layouts name: the Icechunk rows (scripts/bench_icechunk.py), Python >= 3.12


def bench_icechunk_rows(args) -> None:
    """The Icechunk rows: a repository on the local disk, or (--store s3) on SeaweedFS through the proxy."""
    import bench_icechunk
    work = Path(args.workdir or tempfile.mkdtemp(prefix="zarrfs-bench-icechunk-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.store == "local":
            print(bench_icechunk.run(bench_icechunk.LocalRepository(work), work, args))
        elif args.store == "s3":
            import bench_remote
            print(bench_remote.run_icechunk(work, args))
        else:
            print("icechunk: no rows for --store http (zarrfs mounts Icechunk repositories on disks and S3)")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (every layout in each)")
    parser.add_argument("--layouts", default="uncompressed,zstd,sharded,blosc",
                        help="also 'icechunk': the same zstd values in an Icechunk repository (bench_icechunk.py)")
    parser.add_argument("--samples", type=int, default=100, help="random 4 KiB reads per run")
    parser.add_argument("--listing", type=int, help="arrays in the listing hierarchy (0: no listing; default 10000, "
                        "1000 for --store s3/http)")
    parser.add_argument("--workdir", help="where to build the arrays (default: a temporary directory)")
    parser.add_argument("--json", help="also write every round's figures to this file")
    parser.add_argument("--store", choices=("local", "s3", "http"), default="local",
                        help="s3: SeaweedFS, http: nginx, each behind a delaying proxy (bench_remote.py)")
    parser.add_argument("--delay-ms", type=float, default=5.0, help="the delay the proxy adds each way, for --store s3/http")
    parser.add_argument("--groups", default="core",
                        help="core (the rows above), imaging (Bio-Formats and the pyramid: bench_imaging.py), or both")
    parser.add_argument("--imaging-size", type=int, default=16384, help="the imaging group's image edge")
    args = parser.parse_args(argv)
    layouts = args.layouts.split(",")
    if ICECHUNK in layouts:  # its own rows (bench_icechunk.py), then the other layouts as before
        args.layouts = ",".join(layout for layout in layouts if layout != ICECHUNK)
        bench_icechunk_rows(args)
        if not args.layouts:
            return None
    groups = set(args.groups.split(","))
    if "imaging" in groups:
        import bench_imaging
        bench_imaging.run_imaging(args)
        if groups == {"imaging"}:
            return None
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
        listing["hdf5 open"] = (bench_hdf5_open(build_many(work, HDF5_ARRAYS, "h5.zarr", HDF5_ARRAYS)), 0.0)
        print(report(runs, memory, listing, args))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
