"""Arrays other tools write, each once refused: a v2 array compressed with pcodec (an array->bytes
codec), a v3 array with numcodecs.packbits, a v2 object array of JSON values (json2), and v2
text arrays whose missing chunks read as zarr-python reads them."""

import contextlib
import json
import warnings

import numcodecs
import numpy as np
import zarr
from zarr.codecs import numcodecs as zn

from mounting import mounted
from zarrfs.views.text import unescape


@contextlib.contextmanager
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python's warnings about v2 and numcodecs codecs
        yield


def test_v2_pcodec_reads_and_writes(tmp_path):
    root = tmp_path / "p.zarr"
    values = (np.arange(300, dtype="<i4") * 7) % 1001
    with quiet():
        group = zarr.open_group(str(root), mode="w", zarr_format=2)
        group.create_array("plain", shape=(300,), chunks=(128,), dtype="<i4", compressors=numcodecs.PCodec())[...] = values
        group.create_array("delta", shape=(300,), chunks=(128,), dtype="<i4", filters=[numcodecs.Delta("<i4")],
                           compressors=numcodecs.PCodec())[...] = values
        group.create_array("big", shape=(10, 30), chunks=(4, 16), dtype="<f8", order="F",
                           compressors=numcodecs.PCodec())[...] = values.reshape(10, 30) / 4
    with mounted(root, tmp_path) as m:
        assert np.array_equal(np.fromfile(m / "plain.bin", "<i4"), values)
        assert np.array_equal(np.fromfile(m / "delta.bin", "<i4"), values)
        assert np.array_equal(np.fromfile(m / "big.bin", "<f8").reshape(10, 30), values.reshape(10, 30) / 4)
        assert json.loads((m / "plain.json").read_text())["views"]  # it has its header views again
        with open(m / "plain.bin", "r+b") as f:
            f.seek(4 * 200)
            f.write(np.arange(5, dtype="<i4").tobytes())
        with open(m / "delta.bin", "r+b") as f:
            f.write(np.full(3, -9, dtype="<i4").tobytes())
        assert "ERROR" not in m.log() and "WARNING" not in m.log()
    expected = values.copy()
    expected[200:205] = np.arange(5)
    assert np.array_equal(zarr.open_array(str(root / "plain"))[...], expected)
    expected = values.copy()
    expected[:3] = -9
    assert np.array_equal(zarr.open_array(str(root / "delta"))[...], expected)


def test_v3_packbits_reads_and_writes(tmp_path):
    root = tmp_path / "k.zarr"
    values = (np.arange(6 * 21) % 3 == 0).reshape(6, 21)
    with quiet():
        array = zarr.create_array(str(root), shape=(6, 21), chunks=(4, 13), dtype=bool, filters=[zn.PackBits()])
        array[...] = values
    assert "numcodecs.packbits" in (root / "zarr.json").read_text()
    with mounted(root, tmp_path) as m:
        name = m / f"{root.name}.bin"
        assert np.array_equal(np.fromfile(name, "u1").reshape(6, 21), values)
        with open(name, "r+b") as f:
            f.write(b"\x01\x01\x00\x01")
        assert "ERROR" not in m.log()
    values.reshape(-1)[:4] = [True, True, False, True]
    with quiet():
        assert np.array_equal(zarr.open_array(str(root))[...], values)


def write_json2(root, values, chunks, fill_value=None):
    """A v2 object array of JSON values as zarr-python 2 writes it: numcodecs' JSON as its filter,
    a chunk per `chunks` elements (the last padded with None), chunks that are all None left out."""
    root.mkdir(parents=True)
    (root.parent / ".zgroup").write_text('{"zarr_format": 2}')
    (root / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [len(values)], "chunks": [chunks], "dtype": "|O", "fill_value": fill_value,
        "order": "C", "filters": [{"id": "json2", "allow_nan": True, "check_circular": True, "encoding": "utf-8",
                                   "ensure_ascii": True, "indent": None, "separators": [",", ":"],
                                   "skipkeys": False, "sort_keys": True, "strict": True}],
        "compressor": {"id": "zlib", "level": 1}}))
    codec, compressor = numcodecs.JSON(), numcodecs.Zlib(1)
    for i in range(0, len(values), chunks):
        part = np.full(chunks, None, dtype=object)
        part[:len(values[i:i + chunks])] = values[i:i + chunks]
        if any(v is not None for v in part):
            (root / str(i // chunks)).write_bytes(compressor.encode(codec.encode(part)))


def test_v2_json2_reads_as_one_json_value_per_line(tmp_path):
    values = [{"a": 1, "b": [1, 2]}, "line\nbreak", 3.5, None, None, None, [True, None, "é"], {"k": {"n": "\\"}},
              "", 0]
    write_json2(tmp_path / "j.zarr" / "things", values, chunks=3)
    with mounted(tmp_path / "j.zarr", tmp_path, "ro") as m:
        lines = (m / "things.txt").read_text(encoding="utf-8").split("\n")
        assert lines[-1] == "" and len(lines) == len(values) + 1
        assert [json.loads(line) for line in lines[:-1]] == values
        assert lines[3] == "null" and lines[2] == "3.5" and lines[6] == '[true,null,"é"]'
        side = json.loads((m / "things.json").read_text())
        assert side["text_file"] == "things.txt" and "JSON" in side["text_format"]


def test_v2_json2_refused_where_a_chunk_lies_about_its_shape(tmp_path):
    write_json2(tmp_path / "j.zarr" / "things", [1, 2, 3, 4], chunks=2)
    lying = numcodecs.JSON().encode(np.array([1, 2, 3], dtype=object))
    (tmp_path / "j.zarr" / "things" / "1").write_bytes(numcodecs.Zlib(1).encode(lying))
    with mounted(tmp_path / "j.zarr", tmp_path, "ro") as m:
        try:
            (m / "things.txt").read_bytes()
            raise AssertionError("read a chunk of the wrong shape")
        except OSError:
            pass
        assert "things/1" in m.log()


def test_v2_text_with_a_null_fill_value_reads_missing_chunks_as_zarr_python(tmp_path):
    root = tmp_path / "s.zarr"
    with quiet():
        group = zarr.open_group(str(root), mode="w", zarr_format=2)
        text = group.create_array("text", shape=(5,), chunks=(2,), dtype=str, fill_value=None)
        text[:2] = ["a", "b"]
        raw = group.create_array("raw", shape=(5,), chunks=(2,), dtype=zarr.core.dtype.VariableLengthBytes(),
                                 fill_value=None)
        raw[:2] = [b"\xff", b"z"]
        fixed = group.create_array("fixed", shape=(5,), chunks=(2,), dtype="<U3", fill_value=None)
        fixed[:2] = ["ab", "c"]
    assert json.loads((root / "text" / ".zarray").read_text())["fill_value"] is None
    read = {name: list(zarr.open_array(str(root / name))[...]) for name in ("text", "raw", "fixed")}
    assert read["text"] == ["a", "b", "", "", ""] and read["raw"] == [b"\xff", b"z", b"", b"", b""]
    with mounted(root, tmp_path, "ro") as m:
        for name in ("text", "raw"):
            lines = (m / f"{name}.txt").read_text().split("\n")[:-1]
            elements = [unescape(line) for line in lines]
            assert elements == [e if isinstance(e, bytes) else e.encode() for e in read[name]], name
        assert list(np.fromfile(m / "fixed.bin", "<U3")) == read["fixed"]
