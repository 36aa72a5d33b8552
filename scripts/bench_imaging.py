"""The imaging rows (issue #37): `scripts/bench.py --groups imaging [--imaging-size 16384]`.

A SIZE x SIZE uint16 OME-Zarr 0.5 image of 3 levels (each half the last; 512 x 512 zstd chunks)
is written with zarr-python, and the same values as a pyramidal OME-TIFF written by tifffile
(SubIFDs, 512 x 512 uncompressed tiles) on the local disk. In each interleaved round, Bio-Formats
(the jar the tests use, run by Debian's OpenJDK) reads IMAGE.ome.tif through a fresh mount and the
tifffile pyramid, each side's files evicted from the page cache (the store's, the pyramid's):

- opening it: the wall time of `showinf -nopix` (loci.formats.tools.ImageInfo), a JVM start included;
- a 512 x 512 region at full resolution (the image's middle) and at the lowest level (its corner):
  the time of Bio-Formats' openBytes of the region alone (tests/views/BioFormatsInfo.java --crop).

And the first 16 KiB of the full-resolution level's NAME.tif against its NAME.bin, each read once
right after a mount (nothing cached, the store's files evicted). Every ratio is taken within a
round; cells are the median over --runs rounds (min-max).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from benchlib import ZARRFS, _mounted, evict, summary

CHECKOUT = Path(__file__).resolve().parents[1]
JAR = CHECKOUT / ".test-servers" / "bioformats_package.jar"
HELPER = CHECKOUT / "tests" / "views" / "BioFormatsInfo.java"
LEVELS, CHUNK, REGION = 3, 512, 512
FIRST_BYTES = 16 << 10


def values(size: int, rows: slice) -> np.ndarray:
    """Rows of a level of SIZE x SIZE: a gradient with noise (zstd makes chunks of ~55% their size)."""
    y = np.arange(rows.start, rows.stop)[:, None]
    noise = np.random.default_rng(rows.start).integers(0, 16, (len(y), size))
    return ((y + np.arange(size)[None, :]) % 4096 + noise).astype("uint16")


def build(work: Path, size: int) -> tuple[Path, Path]:
    """The OME-Zarr image (img/0, img/1, img/2 in data.zarr) and the tifffile pyramid of its values."""
    import tifffile
    import zarr
    root = work / "data.zarr"
    axes = [{"name": a, "type": "space", "unit": "micrometer"} for a in "yx"]
    datasets = [{"path": str(k), "coordinateTransformations": [{"type": "scale", "scale": [2.0 ** k] * 2}]}
                for k in range(LEVELS)]
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    image = group.create_group("img", attributes={"ome": {"version": "0.5", "multiscales": [
        {"name": "img", "axes": axes, "datasets": datasets}]}})
    arrays = []
    for k in range(LEVELS):
        n = size >> k
        level = image.create_array(str(k), shape=(n, n), dtype="uint16", chunks=(CHUNK, CHUNK),
                                   dimension_names=["y", "x"])
        for start in range(0, n, CHUNK):
            level[start:start + CHUNK] = values(n, slice(start, min(n, start + CHUNK)))
        arrays.append(level)
    tif = work / "tifffile.ome.tif"

    def tiles(level):
        for y in range(0, level.shape[0], CHUNK):
            rows = level[y:y + CHUNK]
            for x in range(0, level.shape[1], CHUNK):
                yield rows[:, x:x + CHUNK]

    with tifffile.TiffWriter(tif, bigtiff=size * size * 2 > 3 << 30, ome=True) as out:
        common = {"dtype": "uint16", "tile": (CHUNK, CHUNK), "photometric": "minisblack"}
        out.write(tiles(arrays[0]), shape=arrays[0].shape, subifds=LEVELS - 1, metadata={"axes": "YX"}, **common)
        for level in arrays[1:]:
            out.write(tiles(level), shape=level.shape, subfiletype=1, metadata=None, **common)
    return root, tif


def showinf(path: Path) -> float:
    """Seconds for `showinf -nopix` to open the file (a JVM start included)."""
    t0 = time.perf_counter()
    run(["java", "-XX:-UsePerfData", "-cp", str(JAR), "loci.formats.tools.ImageInfo", "-nopix", str(path)])
    return time.perf_counter() - t0


def region(path: Path, resolution: int, x: int, y: int, scratch: Path) -> float:
    """Seconds of Bio-Formats' openBytes of a REGION x REGION region at (x, y) of a resolution."""
    crop = f"{resolution},{x},{y},{REGION},{REGION}"
    out = run(["java", "-XX:-UsePerfData", "-cp", str(JAR), str(HELPER), "--pixels", str(scratch), "--resolutions", "--crop", crop,
               str(path)])
    timed = [json.loads(line) for line in out.splitlines() if '"ms"' in line]
    if len(timed) != 1:
        raise RuntimeError(f"Bio-Formats read no region of {path}: {out}")
    return timed[0]["ms"] / 1000


def first_bytes(path: Path) -> float:
    """Seconds to read the first FIRST_BYTES of a file just opened."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, FIRST_BYTES, 0)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def run(args: list[str]) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if result.returncode:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr[-2000:]}")
    return result.stdout


def evict_store(root: Path) -> None:
    """Drop every file of the Zarr store from the page cache, as the tifffile pyramid is."""
    for directory, _, names in os.walk(root):
        for name in names:
            evict(Path(directory) / name)


def one_round(root: Path, tif: Path, size: int, scratch: Path) -> dict:
    """Every figure of one round: each zarrfs figure from a fresh mount with the store's files
    evicted, each tifffile figure with its file evicted (else zarrfs read its chunks from memory,
    tifffile its tiles from disk)."""
    middle, lowest = size // 2, LEVELS - 1
    zarrfs, figures = [ZARRFS, str(root), "{mnt}", "-f", "-o", "ro"], {}
    measures = {"open": showinf, "region 0": lambda path: region(path, 0, middle, middle, scratch),
                "region low": lambda path: region(path, lowest, 0, 0, scratch)}
    for name, measure in measures.items():
        with _mounted(zarrfs, "img/img.ome.tif") as (pyramid, _):
            evict_store(root)
            figures[f"zarrfs {name}"] = measure(pyramid)
        evict(tif)
        figures[f"tifffile {name}"] = measure(tif)
    for key, name in (("tif first bytes", "img/0.tif"), ("bin first bytes", "img/0.bin")):
        with _mounted(zarrfs, name) as (path, _):
            evict_store(root)
            figures[key] = first_bytes(path)
    return figures


ROWS = [
    ("Bio-Formats showinf -nopix, s: zarrfs IMAGE.ome.tif", "zarrfs open", 1, "{:.2f}"),
    ("Bio-Formats showinf -nopix, s: tifffile pyramid", "tifffile open", 1, "{:.2f}"),
    ("512x512 region at full resolution, ms: zarrfs", "zarrfs region 0", 1000, "{:.1f}"),
    ("512x512 region at full resolution, ms: tifffile pyramid", "tifffile region 0", 1000, "{:.1f}"),
    ("512x512 region at the lowest level, ms: zarrfs", "zarrfs region low", 1000, "{:.1f}"),
    ("512x512 region at the lowest level, ms: tifffile pyramid", "tifffile region low", 1000, "{:.1f}"),
    ("first 16 KiB of NAME.tif, cold, ms", "tif first bytes", 1000, "{:.2f}"),
    ("first 16 KiB of NAME.bin, cold, ms", "bin first bytes", 1000, "{:.2f}"),
]
RATIOS = [("showinf: zarrfs / tifffile", "zarrfs open", "tifffile open"),
          ("region at full resolution: zarrfs / tifffile", "zarrfs region 0", "tifffile region 0"),
          ("region at the lowest level: zarrfs / tifffile", "zarrfs region low", "tifffile region low"),
          ("first 16 KiB: NAME.tif / NAME.bin", "tif first bytes", "bin first bytes")]


def report(rounds: list[dict], size: int) -> str:
    lines = [f"imaging: a {size} x {size} uint16 image of {LEVELS} levels ({CHUNK} x {CHUNK} zstd chunks), "
             f"{len(rounds)} interleaved rounds, median (min-max); {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "", "| row | median (min-max) |", "|---|---|"]
    for label, key, scale, fmt in ROWS:
        lines.append(f"| {label} | {summary([r[key] * scale for r in rounds], fmt)} |")
    for label, a, b in RATIOS:
        lines.append(f"| {label} | {summary([r[a] / r[b] for r in rounds], '{:.2f}x')} |")
    return "\n".join(lines)


def run_imaging(args) -> None:
    if not JAR.exists():
        raise SystemExit(f"{JAR} is missing: scripts/setup --test puts Bio-Formats' jar there")
    if args.imaging_size % (CHUNK << (LEVELS - 1)):
        raise SystemExit(f"--imaging-size must be a multiple of {CHUNK << (LEVELS - 1)}")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="zarrfs-bench-imaging-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        root, tif = build(work, args.imaging_size)
        scratch = work / "regions"
        scratch.mkdir(exist_ok=True)
        rounds = [one_round(root, tif, args.imaging_size, scratch) for _ in range(args.runs)]
        print(report(rounds, args.imaging_size))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
