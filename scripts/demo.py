"""Build a small sample hierarchy, mount it with zarrfs, show what a user sees, unmount.

The arrays' zarr.json documents are written here by hand and their data through zarrfs's own
open_raw, so the demo needs nothing beyond zarrfs itself.
"""

import json
import os
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
            "fill_value": fill_value, "codecs": codecs, "attributes": {}, **extra}


def write_node(root, path, doc):
    os.makedirs(os.path.join(root, path), exist_ok=True)
    with open(os.path.join(root, path, "zarr.json"), "w") as f:
        json.dump(doc, f, indent=2)


def build(root):
    write_node(root, "", {"zarr_format": 3, "node_type": "group", "attributes": {"title": "zarrfs demo"}})
    write_node(root, "temperature", array([180, 360], "float32", [45, 90], [BYTES, ZSTD], "NaN",
                                          dimension_names=["lat", "lon"]))
    write_node(root, "raw", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    sharded = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 64, 64], "codecs": [BYTES, ZSTD],
        "index_codecs": [BYTES, {"name": "crc32c"}], "index_location": "end"}}
    write_node(root, "raw/frames", array([8, 128, 128], "uint16", [4, 128, 128], [sharded]))
    lat, lon = np.meshgrid(np.linspace(-90, 90, 180), np.linspace(0, 360, 360), indexing="ij")
    with zarrfs.open_raw(root, "temperature", mode="r+") as view:
        view.write(0, (15 + 20 * np.cos(np.radians(lat)) * np.sin(np.radians(lon))).astype("<f4").tobytes())
    with zarrfs.open_raw(root, "raw/frames", mode="r+") as view:
        view.write(0, (np.arange(8 * 128 * 128) % 4096).astype("<u2").tobytes())


def run(*cmd):
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main():
    work = tempfile.mkdtemp(prefix="zarrfs-demo-")
    source, mnt = os.path.join(work, "sample.zarr"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    build(source)
    zarrfs_cmd = os.path.join(os.path.dirname(sys.executable), "zarrfs")
    run(zarrfs_cmd, source, mnt, "-o", "ro")
    try:
        run("ls", "-lR", mnt)
        run("cat", os.path.join(mnt, "raw", "frames.json"))
        run("od", "-A", "d", "-t", "f4", "-N", "32", os.path.join(mnt, "temperature.bin"))
        side = json.load(open(os.path.join(mnt, "temperature.json")))
        t = np.memmap(os.path.join(mnt, "temperature.bin"), dtype=side["dtype"], shape=tuple(side["shape"]), mode="r")
        print(f"np.memmap via the sidecar: shape {t.shape}, dtype {t.dtype}, mean {float(t.mean()):.3f}, "
              f"t[90, 90] = {float(t[90, 90]):.3f}")
        del t
    finally:
        run("fusermount3", "-u", mnt)
    for _ in range(100):  # the daemon flushes and exits after the unmount
        if subprocess.run(["pgrep", "-f", f"zarrfs {source} {mnt}"], capture_output=True).returncode:
            break
        time.sleep(0.05)
    print(f"unmounted; the sample hierarchy stays in {source}")


if __name__ == "__main__":
    main()
