"""The imaging rows of the benchmark (scripts/bench_imaging.py) compare like with like: each
zarrfs figure and each tifffile figure is taken with its files out of the page cache, so
neither side reads from memory what the other reads from disk. No Bio-Formats, no mount: the
measures are replaced by ones that record what was evicted before them."""

import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
import bench_imaging  # noqa: E402  (the project's own script: an import that fails is a failure)


def test_every_figure_is_taken_with_its_files_evicted(tmp_path, monkeypatch):
    root, tif = tmp_path / "data.zarr", tmp_path / "tifffile.ome.tif"
    files = [root / "zarr.json", root / "img" / "zarr.json", root / "img" / "0" / "c" / "0" / "0"]
    for path in [*files, tif]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    evicted, missing = set(), []

    @contextlib.contextmanager
    def mounted(command, name):
        yield Path("/mnt") / name, None

    def measure(path, *args):
        wanted = {tif} if Path(path) == tif else set(files)
        missing.append((str(path), sorted(map(str, wanted - evicted))))
        evicted.clear()
        return 1.0

    monkeypatch.setattr(bench_imaging, "_mounted", mounted)
    monkeypatch.setattr(bench_imaging, "evict", lambda path: evicted.add(Path(path)))
    for name in ("showinf", "region", "first_bytes"):
        monkeypatch.setattr(bench_imaging, name, measure)
    figures = bench_imaging.one_round(root, tif, 2048, tmp_path)
    assert len(missing) == 8 and len(figures) == 8
    assert [(path, left) for path, left in missing if left] == []
