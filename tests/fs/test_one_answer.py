"""One fact, one answer: every field the extended attributes (user.zarr.*) share with the sidecar
NAME.json is the same JSON value, serialized the same way, for every kind of array: v2 and v3,
sharded, numcodecs codecs, text arrays. The codecs are the stored document's, as in zarr.json.
Asked of the core without a mount (core.py)."""

import json
import warnings

import numcodecs
import numpy as np
import zarr
from zarr.codecs import numcodecs as zn

from core import core_of

SHARED = ("shape", "dtype", "dimension_names", "chunk_shape", "codecs", "attributes")


def build(root) -> list[str]:
    """A matrix of arrays made by zarr-python; returns the stems of their files."""
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group.create_array("flags", shape=(20,), chunks=(8,), dtype=bool)[...] = np.arange(20) % 3 == 0
        group.create_array("bytes_only", shape=(6,), chunks=(6,), dtype="uint8", compressors=None)[...] = 7
        group.create_array("named", shape=(4, 6), chunks=(2, 3), dtype="<f8", dimension_names=["y", "x"],
                           attributes={"units": "K", "scale": [1.5, float("nan")], "é": None})[...] = 1.25
        group.create_array("sharded", shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="int32")[...] = 3
        group.create_array("zlibbed", shape=(10,), chunks=(5,), dtype="int64", filters=[zn.Delta(dtype="<i8")],
                           compressors=[zn.Zlib(level=3)])[...] = np.arange(10)
        group.create_array("words", shape=(3,), chunks=(2,), dtype=str)[...] = ["a", "b", "ç"]
        group.create_array("packed", shape=(9,), chunks=(9,), dtype=bool, filters=[zn.PackBits()])[...] = True
        v2 = zarr.open_group(str(root / "old"), mode="w", zarr_format=2)
        v2.create_array("plain", shape=(5, 4), chunks=(2, 2), dtype=">i2", order="F",
                        attributes={"_ARRAY_DIMENSIONS": ["t", "x"]})[...] = 9
        v2.create_array("filtered", shape=(8,), chunks=(4,), dtype="<i4", filters=[numcodecs.Delta(dtype="<i4")],
                        compressors=numcodecs.Blosc(cname="zstd"))[...] = np.arange(8)
        v2.create_array("texts", shape=(3,), chunks=(2,), dtype=str)[...] = ["x", "y", "z"]
        v2.create_array("pco", shape=(6,), chunks=(6,), dtype="<i8", compressors=numcodecs.PCodec())[...] = 5
    return ["flags", "bytes_only", "named", "sharded", "zlibbed", "words", "packed",
            "old/plain", "old/filtered", "old/texts", "old/pco"]


def serialized(value) -> bytes:
    return json.dumps(value, separators=(", ", ": ")).encode()


def test_every_shared_field_is_the_same_json_in_the_xattrs_and_the_sidecar(tmp_path):
    stems = build(tmp_path / "s.zarr")
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        for stem in stems:
            sidecar = json.loads(c.read_text(f"/{stem}.json"))
            data = f"/{stem}.bin" if sidecar["data_file"] else f"/{stem}.txt"
            for path in (f"/{stem}.json", data):
                for field in SHARED:
                    value = c.getxattr(path, f"user.zarr.{field}")
                    assert value == serialized(sidecar[field]), (stem, path, field)
            assert json.loads(c.getxattr(data, "user.zarr.codecs")) == sidecar["codecs"]
            if sidecar["zarr_format"] == 3:  # what a user can check against the stored document
                assert sidecar["codecs"] == json.loads((tmp_path / "s.zarr" / stem / "zarr.json").read_text())["codecs"]

