"""The Icechunk rows of the benchmark: `scripts/bench.py --layouts icechunk` (local disk) or
`scripts/bench.py --store s3 --layouts icechunk` (SeaweedFS behind the delaying proxy).

The same float32 values as the zstd layout (1 MiB chunks) are written by zarr-python into an
Icechunk repository, one commit on main. In each interleaved round: icechunk-python reads the
whole array into NumPy in-process (zarr over a read-only session of main), zarrfs streams
NAME.bin on a fresh mount in 1 MiB blocks (cold: nothing cached by the daemon or the kernel),
and each reads 4 KiB at the same random offsets (icechunk-python: a 1,024-element window;
zarrfs: a pread on a fresh mount, no read-ahead). Issue #38's targets: a cold stream >= 0.9x
icechunk-python, a 4 KiB read <= 1.0x. Needs Python >= 3.12 (icechunk 2).
"""

import contextlib
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from benchlib import GB, MIB, ZARRFS, _mounted, build, p50_ms, random_offsets, read_through, table, timed

ARRAY = "data"  # the array's name in the repository: NAME.bin in the mount's root


class LocalRepository:
    """The repository in a directory of the work directory."""

    def __init__(self, work: Path):
        self.path = work / "icechunk-repo"
        shutil.rmtree(self.path, ignore_errors=True)  # a repository is made in an empty place (--workdir again)

    def storage(self):
        import icechunk
        return icechunk.local_filesystem_storage(str(self.path))

    def mount_args(self) -> list[str]:
        return [ZARRFS, str(self.path), "{mnt}", "-f", "-o", "ro"]

    def describe(self) -> str:
        return "local disk"


class S3Repository:
    """The repository on SeaweedFS (bench_remote.S3Target), read by everyone through the proxy."""

    def __init__(self, target, delay_ms: float):
        self.target, self.delay_ms, self.prefix = target, delay_ms, f"icechunk-{uuid.uuid4().hex[:8]}"

    def storage(self):
        import icechunk

        from servers.seaweed import BUCKET  # bench_remote put tests/ on the path
        key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]  # S3Target.start's
        return icechunk.s3_storage(bucket=BUCKET, prefix=self.prefix, endpoint_url=self.target.endpoint, allow_http=True,
                                   force_path_style=True, region="us-east-1", access_key_id=key,
                                   secret_access_key=secret)

    def mount_args(self) -> list[str]:
        return [ZARRFS, self.target.source(self.prefix), "{mnt}", "-f", "-o",
                ",".join(("ro", "icechunk", *self.target.mount_options()))]

    def describe(self) -> str:
        return f"SeaweedFS (S3) through a delaying proxy, {self.delay_ms:g} ms each way"


def write(repository, data: np.ndarray) -> None:
    import icechunk
    import zarr
    repo = icechunk.Repository.create(repository.storage())
    session = repo.writable_session("main")
    array = zarr.group(session.store).create_array(ARRAY, shape=data.shape, chunks=(MIB // 4,), dtype="float32",
                                                   fill_value=0.0, compressors=[zarr.codecs.ZstdCodec(level=0)])
    array[...] = data
    session.commit("the benchmark's array")


def icechunk_array(repository):
    import icechunk
    import zarr
    repo = icechunk.Repository.open(repository.storage())
    return zarr.open_array(repo.readonly_session("main").store, path=ARRAY, mode="r")


@contextlib.contextmanager
def mounted(repository):
    with _mounted(repository.mount_args(), f"{ARRAY}.bin") as (bin_path, process):
        yield bin_path, process


def bench_round(repository, nbytes: int, seed: int, samples: int) -> dict:
    r = {"icechunk-python read": nbytes / timed(lambda: icechunk_array(repository)[...])}
    with mounted(repository) as (bin_path, _):
        r["zarrfs cold read"] = nbytes / read_through(bin_path)
    offsets = random_offsets(nbytes, samples, seed)
    with mounted(repository) as (bin_path, _):
        fd = os.open(bin_path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # one 4 KiB page per pread
        r["zarrfs 4k p50 ms"] = p50_ms([timed(lambda o=o: os.pread(fd, 4096, o)) for o in offsets])
        os.close(fd)
    array = icechunk_array(repository)
    r["icechunk-python 4k p50 ms"] = p50_ms([timed(lambda o=o: array[o // 4:o // 4 + 1024]) for o in offsets])
    return r


ROWS = [
    ("icechunk-python read into NumPy GB/s", lambda r: r["icechunk-python read"] / GB, "{:.3f}"),
    ("zarrfs cold read GB/s", lambda r: r["zarrfs cold read"] / GB, "{:.3f}"),
    ("  / icechunk-python (target >= 0.9)", lambda r: r["zarrfs cold read"] / r["icechunk-python read"], "{:.2f}x"),
    ("zarrfs 4 KiB pread p50 ms", lambda r: r["zarrfs 4k p50 ms"], "{:.3f}"),
    ("icechunk-python 4 KiB window p50 ms", lambda r: r["icechunk-python 4k p50 ms"], "{:.3f}"),
    ("  zarrfs / icechunk-python (target <= 1.0)",
     lambda r: r["zarrfs 4k p50 ms"] / r["icechunk-python 4k p50 ms"], "{:.2f}x"),
]


def run(repository, work: Path, args) -> str:
    """The rows for `repository` (LocalRepository or S3Repository), as a Markdown table."""
    _, data = build(work, "zstd", args.size_mib)  # the zstd layout's values
    write(repository, data)
    runs = {"icechunk": [bench_round(repository, data.nbytes, seed, args.samples) for seed in range(args.runs)]}
    lines = [f"Icechunk ({repository.describe()}): {args.size_mib} MiB float32, 1 MiB zstd chunks, {args.runs} rounds; "
             f"median (min-max)", ""]
    # table() ends with a peak-RSS row, which the memory rounds of the other layouts measure (-o cache_size): not here
    return "\n".join(lines + table(runs, ROWS, {"icechunk": float("nan")}, 0)[:-1])
