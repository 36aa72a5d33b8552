"""A short tour: build a small, real-looking Zarr hierarchy, mount it, look at it the way a
shell, NumPy and a C or dd reader do, unmount, and remove everything it made.

The arrays' zarr.json documents are written here by hand and their data through zarrfs's own
open_raw, so the demo needs nothing beyond zarrfs itself.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import zarrfs

BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
ZSTD = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}


def array(shape, data_type, chunk_shape, codecs, fill_value=0, **extra):
    return {"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk_shape}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill_value, "codecs": codecs, **extra}


def write_node(root, path, doc):
    os.makedirs(os.path.join(root, path), exist_ok=True)
    with open(os.path.join(root, path, "zarr.json"), "w") as f:
        json.dump(doc, f, indent=2)


def sea_surface_temperature() -> np.ndarray:
    """A plausible 1-degree global field in degrees C: warm tropics, cold poles, a few eddies."""
    lat, lon = np.meshgrid(np.linspace(89.5, -89.5, 180), np.linspace(0.5, 359.5, 360), indexing="ij")
    field = 28 * np.cos(np.radians(lat)) ** 2 - 1.5 + 1.5 * np.sin(np.radians(3 * lon)) * np.cos(np.radians(2 * lat))
    noise = np.random.default_rng(7).normal(0, 0.3, field.shape)
    return (field + noise).astype("<f4")


def build(root):
    write_node(root, "", {"zarr_format": 3, "node_type": "group", "attributes": {"title": "zarrfs demo"}})
    write_node(root, "sst", array([180, 360], "float32", [90, 90], [BYTES, ZSTD], "NaN",
                                  dimension_names=["lat", "lon"],
                                  attributes={"units": "degC", "long_name": "sea surface temperature"}))
    write_node(root, "camera", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    sharded = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 64, 64], "codecs": [BYTES, ZSTD],
        "index_codecs": [BYTES, {"name": "crc32c"}], "index_location": "end"}}
    write_node(root, "camera/frames", array([50, 256, 256], "uint16", [10, 256, 256], [sharded],
                                            dimension_names=["t", "y", "x"], attributes={}))
    with zarrfs.open_raw(root, "sst", mode="r+") as view:
        view.write(0, sea_surface_temperature().tobytes())
    with zarrfs.open_raw(root, "camera/frames", mode="r+") as view:  # only the first 5 frames recorded
        y, x = np.mgrid[:256, :256]
        frames = [(1000 + 800 * np.exp(-((x - 60 - 30 * t) ** 2 + (y - 128) ** 2) / 400)).astype("<u2")
                  for t in range(5)]
        view.write(0, np.stack(frames).tobytes())


def show(*cmd, lines=None):
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    for line in out[:lines]:
        print("  " + line)
    if lines is not None and len(out) > lines:
        print(f"  ... ({len(out) - lines} more lines)")


def tour(mnt):
    show("ls", "-l", mnt)
    show("ls", os.path.join(mnt, "camera"))
    print("\nEach array is NAME.bin (raw little-endian bytes, C order) and NAME.json, which says how to read it:")
    with open(os.path.join(mnt, "sst.json")) as f:
        side = json.load(f)
    for key in ("shape", "dtype", "dimension_names", "chunk_shape", "attributes"):
        print(f"  {key}: {json.dumps(side[key])}")

    print("\nNumPy maps the file; only the chunks a slice touches are decoded:")
    sst = np.memmap(os.path.join(mnt, "sst.bin"), dtype=side["dtype"], shape=tuple(side["shape"]), mode="r")
    print(f"  equator mean {float(sst[90].mean()):.1f} degC, pole mean {float(sst[0].mean()):.1f} degC")
    row, col = 90, 200
    print(f"  sst[{row}, {col}] = {float(sst[row, col]):.3f}")
    del sst

    offset = (row * 360 + col) * 4
    print("\nAny tool that reads bytes sees the same value at row * 360 + col (here dd, like a C fread):")
    print(f"$ dd if={os.path.join(mnt, 'sst.bin')} bs=4 skip={offset // 4} count=1 status=none | od -A n -t f4")
    data = subprocess.run(["dd", f"if={os.path.join(mnt, 'sst.bin')}", "bs=4", f"skip={offset // 4}", "count=1",
                           "status=none"], check=True, capture_output=True).stdout
    print("  " + subprocess.run(["od", "-A", "n", "-t", "f4"], input=data, capture_output=True,
                                check=True).stdout.decode().strip())

    frames = os.path.join(mnt, "camera", "frames.bin")
    print("\nOnly 5 of 50 frames were recorded: the rest is fill value, stored nowhere, and a hole to du and cp:")
    show("du", "-h", "--apparent-size", frames)
    show("du", "-h", frames)
    copy = os.path.join(os.path.dirname(mnt), "frames-copy.bin")
    show("cp", frames, copy)
    show("du", "-h", copy)


def main():
    work = tempfile.mkdtemp(prefix="zarrfs-demo-")
    source, mnt = os.path.join(work, "sample.zarr"), os.path.join(work, "mnt")
    zarrfs_cmd = os.path.join(os.path.dirname(sys.executable), "zarrfs")
    try:
        os.mkdir(mnt)
        build(source)
        print(f"Built a sample hierarchy in {source}; mounting it read-only:")
        # its log in the demo's directory too: the demo leaves nothing behind (without syslog, a
        # daemon's log is /var/log/zarrfs/zarrfs.log otherwise)
        show(zarrfs_cmd, source, mnt, "-o", f"ro,log_file={os.path.join(work, 'zarrfs.log')}")
        try:
            tour(mnt)
        finally:
            subprocess.run(["fusermount3", "-u", mnt], check=False)
            for _ in range(200):  # the daemon exits after the unmount
                if not os.path.ismount(mnt) and subprocess.run(["pgrep", "-f", f"zarrfs {source} {mnt}"],
                                                                capture_output=True).returncode:
                    break
                time.sleep(0.05)
    finally:
        if os.path.ismount(mnt):  # never remove through a live mount
            print(f"{mnt} is still mounted: unmount it with fusermount3 -u, then remove {work}")
        else:
            shutil.rmtree(work)
    print(f"\nUnmounted and removed {work}.")
    print("Next: mount your own data (a Zarr v2 or v3 directory):\n"
          "  zarrfs /path/to/data.zarr /mnt/data -o ro     # then ls, numpy.memmap, dd, cp, ...\n"
          "  fusermount3 -u /mnt/data                      # unmount\n"
          "  zarrfs --help                                 # every option, with its default")


if __name__ == "__main__":
    main()
