"""The registered codecs of zarr-extensions (codecs/): bitround, packbits, cast_value,
scale_offset, reshape, conditional, n5_default, zfp. No writer here has them (tensorstore and
zarr-python 3.1 refuse each), so the stores are built by hand from the spec text, the
registry's documented sample values, and tensorstore's N5 driver; NAME.bin reads them and
writes back."""

import gzip
import itertools
import json
import os
import struct
import sys

import numcodecs
import numpy as np
import pytest
import zstandard

import zarrfs
from helpers import array_doc, sharding, write_doc
from zarrfs.codecs.base import ChunkSpec
from zarrfs.codecs.chain import CodecChain
from zarrfs.errors import (
    CorruptChunkError,
    EncodeError,
    MetadataError,
    UnsupportedError,
)
from zarrfs.format.data_types import parse_data_type


def chain(codecs, data_type, shape, fill=0):
    dt = parse_data_type(data_type)
    return CodecChain(codecs, ChunkSpec(tuple(shape), dt, dt.fill_value(fill)), "codecs")


def store(tmp_path, data_type, shape, chunks, codecs, fill=0, chunk_files=None):
    write_doc(tmp_path, "a", array_doc(shape, data_type, chunks, codecs=codecs, fill_value=fill))
    for key, raw in (chunk_files or {}).items():
        path = tmp_path / "a" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
    return str(tmp_path / "a")


def read_all(path) -> bytes:
    with zarrfs.open_raw(path) as view:
        return view.read(0, view.size)


def write_all(path, data: bytes) -> None:
    with zarrfs.open_raw(path, mode="r+") as view:
        view.write(0, data)


# bitround

# The registry's sample arrays (codecs/bitround/sample_data, README): keepbits 3, the original
# and rounded values of its two tables. The samples' files are not kept here, so each is made
# from its table: one chunk of the rounded values through the bytes codec, little-endian.
BITROUND_SAMPLES = {
    "bitround_uint8.zarr": (np.array([0, 1, 10, 11, 100, 123, 200, 208, 209, 255], "u1"),
                            np.array([0, 1, 10, 12, 96, 128, 192, 192, 224, 224], "u1")),
    "bitround_float32.zarr": (np.array([0, 0.1, 1.2, 12.3, 123.4, 1234.5, np.nan, np.inf, -np.inf], "<f4"),
                              np.array([0, 0.1015625, 1.25, 12, 120, 1280, np.nan, np.inf, -np.inf], "<f4")),
}


def sample(tmp_path, name):
    """The sample array `name` as the registry's table describes it: its zarr.json and its one
    stored chunk, the rounded values."""
    original, rounded = BITROUND_SAMPLES[name]
    codecs = [{"name": "bitround", "configuration": {"keepbits": 3}},
              {"name": "bytes", "configuration": {"endian": "little"}}]
    data_type = {"u1": "uint8", "f4": "float32"}[original.dtype.str[1:]]
    write_doc(tmp_path, name, array_doc(original.shape, data_type, original.shape, codecs=codecs))
    (tmp_path / name / "c").mkdir()
    (tmp_path / name / "c" / "0").write_bytes(rounded.tobytes())
    return tmp_path / name


def test_the_float_sample_is_what_numcodecs_bitround_makes():
    """The float table agrees with numcodecs' BitRound, with which the spec says the codec is
    compatible: the sample made from it is the registry's."""
    original, rounded = BITROUND_SAMPLES["bitround_float32.zarr"]
    assert numcodecs.BitRound(3).encode(original).tobytes() == rounded.tobytes()


@pytest.mark.parametrize("name", sorted(BITROUND_SAMPLES))
def test_bitround_reads_the_registry_sample_and_writes_its_bytes(tmp_path, name):
    original, rounded = BITROUND_SAMPLES[name]
    root = sample(tmp_path, name)
    stored = (root / "c" / "0").read_bytes()
    assert read_all(str(root)) == rounded.tobytes()
    (root / "c" / "0").unlink()
    write_all(str(root), original.tobytes())
    assert (root / "c" / "0").read_bytes() == stored


def test_bitround_of_floats_is_numcodecs_bitround():
    values = np.random.default_rng(1).normal(0, 1e3, 1000).astype("<f4")
    ours = chain([{"name": "bitround", "configuration": {"keepbits": 5}},
                  {"name": "bytes", "configuration": {"endian": "little"}}], "float32", [1000])
    assert bytes(ours.encode(values)) == numcodecs.BitRound(5).encode(values).tobytes()


def test_bitround_of_integers_keeps_bits_from_the_most_significant():
    c = chain([{"name": "bitround", "configuration": {"keepbits": 3}}, {"name": "bytes", "configuration": {
        "endian": "little"}}], "uint32", [7])
    values = np.array([0, 1024, 1280, 1664, 1685, 123145182, 4294967295], "<u4")  # zarrs' own test
    assert np.frombuffer(bytes(c.encode(values)), "<u4").tolist() == [0, 1024, 1280, 1536, 1792, 117440512,
                                                                      3758096384]


# packbits

@pytest.mark.parametrize("data_type, values, config, stored", [
    ("int4", [-8, 7, -1, 3, 0], {}, "783f00"),  # least significant bit first, as zarrs
    ("int4", [-8, 7, -1, 3, 0], {"padding_encoding": "first_byte"}, "04783f00"),
    ("uint2", [0, 1, 2, 3, 3], {"padding_encoding": "last_byte"}, "e40306"),
    ("bool", [1, 0, 1, 1, 0, 0, 0, 0, 1], {}, "0d01"),
    ("float4_e2m1fn", [0.5, -6, 1.5, 0], {}, "f103"),
    ("float6_e2m3fn", [1.0, 0.125, -1.0], {}, "488002"),  # 6-bit values across byte boundaries
    ("int16", [-4, 8, 100, -100], {"first_bit": 2, "last_bit": 9}, "ff0219e7"),
    ("uint8", [255, 1, 2], {"first_bit": 0, "last_bit": 2}, "8f00"),
    ("complex_float4_e2m1fn", [[1, -1], [0, 6]], {}, "a270"),
])
def test_packbits_stores_what_the_readme_says_and_reads_it_back(tmp_path, data_type, values, config, stored):
    dt = parse_data_type(data_type)
    array = np.array(values, np.float64).astype(np.float32)
    if dt.numpy.fields is not None:
        part = dt.numpy.fields["real"][0]
        expected = np.array(values, np.float32).astype(part).view(dt.numpy).reshape(-1)
    else:
        expected = array.astype(dt.numpy)
    lossy = config.get("first_bit", 0) > 0 or config.get("last_bit") == 2
    path = store(tmp_path, data_type, [len(expected)], [len(expected)],
                 [{"name": "packbits", "configuration": config}], fill=[0, 0] if dt.numpy.fields else 0)
    write_all(path, dt.clean(expected).tobytes() if dt.needs_cleaning else expected.tobytes())
    assert (tmp_path / "a" / "c" / "0").read_bytes().hex() == stored
    if not lossy:
        assert read_all(path) == (dt.clean(expected) if dt.needs_cleaning else expected).tobytes()


def test_packbits_lossy_bits_come_back_sign_extended_from_the_last_bit(tmp_path):
    path = store(tmp_path, "int16", [4], [4], [{"name": "packbits", "configuration": {"first_bit": 2,
                                                                                     "last_bit": 9}}],
                 chunk_files={"c/0": bytes.fromhex("ff0219e7")})
    assert np.frombuffer(read_all(path), "<i2").tolist() == [-4, 8, 100, -100]


def test_packbits_padding_byte_must_count_the_padding(tmp_path):
    path = store(tmp_path, "int4", [5], [5], [{"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}],
                 chunk_files={"c/0": bytes.fromhex("05783f00")})
    with pytest.raises(CorruptChunkError, match="padding"):
        read_all(path)


def test_packbits_reads_the_schema_spelling_of_its_options():
    readme = chain([{"name": "packbits", "configuration": {"padding_encoding": "last_byte", "first_bit": 1}}],
                   "uint8", [3])
    schema = chain([{"name": "packbits", "configuration": {"padding_encoding": "end_byte", "start_bit": 1}}],
                   "uint8", [3])
    values = np.array([3, 255, 8], "u1")
    assert bytes(readme.encode(values)) == bytes(schema.encode(values))


def test_packbits_inside_a_shard_reads_one_inner_chunk(tmp_path):
    path = store(tmp_path, "uint4", [8], [8], [sharding([4], codecs=[{"name": "packbits"}])], fill=1)
    values = np.arange(8, dtype="u1") % 16
    write_all(path, values.tobytes())
    with zarrfs.open_raw(path) as view:
        assert view.read(5, 2) == values[5:7].tobytes()


# cast_value and scale_offset

NAN_TO_ZERO = [{"name": "scale_offset", "configuration": {"offset": -10, "scale": 0.1}},
               {"name": "cast_value", "configuration": {"data_type": "uint8", "rounding": "nearest-even",
                                                        "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
               "bytes"]


def test_the_readme_float64_to_uint8_example_with_nan_preserved(tmp_path):
    path = store(tmp_path, "float64", [4], [4], NAN_TO_ZERO, fill="NaN",
                 chunk_files={"c/0": bytes([1, 255, 0, 11])})
    assert np.frombuffer(read_all(path), "<f8").tolist()[:2] == [0.0, 2540.0]
    got = np.frombuffer(read_all(path), "<f8")
    assert np.isnan(got[2]) and got[3] == 100.0
    write_all(path, np.array([2540, 0, 100, np.nan], "<f8").tobytes())
    assert (tmp_path / "a" / "c" / "0").read_bytes() == bytes([255, 1, 11, 0])


def test_the_readme_uint16_range_reduction_example(tmp_path):
    codecs = [{"name": "scale_offset", "configuration": {"offset": 1000}},
              {"name": "cast_value", "configuration": {"data_type": "uint8"}}, "bytes"]
    path = store(tmp_path, "uint16", [3], [3], codecs, fill=1000, chunk_files={"c/0": bytes([0, 255, 5])})
    assert np.frombuffer(read_all(path), "<u2").tolist() == [1000, 1255, 1005]


def test_cast_value_out_of_range_fails_the_write_unless_told_to_clamp_or_wrap():
    values = np.array([128.0, -129.0, 2.5, 3.5])
    with pytest.raises(EncodeError, match="outside int8"):
        chain([{"name": "cast_value", "configuration": {"data_type": "int8"}}, "bytes"], "float64", [4]).encode(values)
    clamp = chain([{"name": "cast_value", "configuration": {"data_type": "int8", "out_of_range": "clamp"}}, "bytes"],
                  "float64", [4])
    assert np.frombuffer(bytes(clamp.encode(values)), "i1").tolist() == [127, -128, 2, 4]
    wrap = chain([{"name": "cast_value", "configuration": {"data_type": "int16", "out_of_range": "wrap"}},
                  {"name": "bytes", "configuration": {"endian": "little"}}], "int64", [3])
    assert np.frombuffer(bytes(wrap.encode(np.array([32768, 32769, -32769]))), "<i2").tolist() == [-32768, -32767,
                                                                                                  32767]


@pytest.mark.parametrize("rounding, expected", [
    ("nearest-even", ["3f80", "bf80", "3f80"]), ("towards-zero", ["3f80", "bf80", "3f80"]),
    ("towards-positive", ["3f81", "bf80", "3f81"]), ("towards-negative", ["3f80", "bf81", "3f80"]),
    ("nearest-away", ["3f81", "bf81", "3f80"])])
def test_cast_value_roundings_to_bfloat16(rounding, expected):
    c = chain([{"name": "cast_value", "configuration": {"data_type": "bfloat16", "rounding": rounding}},
               {"name": "bytes", "configuration": {"endian": "big"}}], "float64", [3])
    encoded = bytes(c.encode(np.array([1.00390625, -1.00390625, 1.001])))  # a tie, a tie, and below one
    assert [encoded[i:i + 2].hex() for i in (0, 2, 4)] == expected


def test_cast_value_refuses_a_fill_value_that_does_not_come_back():
    with pytest.raises(MetadataError, match="fill value"):
        chain([{"name": "cast_value", "configuration": {"data_type": "uint8"}}, "bytes"], "float64", [2], fill=0.5)
    with pytest.raises(MetadataError, match="fill value"):
        chain([{"name": "cast_value", "configuration": {"data_type": "uint8"}}, "bytes"], "float64", [2], fill="NaN")


def test_scale_offset_overflow_fails_the_chunk():
    c = chain([{"name": "scale_offset", "configuration": {"offset": 10, "scale": 2}}, "bytes"], "uint8", [2], fill=10)
    assert bytes(c.encode(np.array([10, 137], "u1"))) == bytes([0, 254])
    with pytest.raises(EncodeError, match="outside uint8"):
        c.encode(np.array([9, 10], "u1"))


# reshape

def test_reshape_with_input_dims_then_transpose(tmp_path):
    codecs = [{"name": "reshape", "configuration": {"shape": [[0, 1], [2]]}},
              {"name": "transpose", "configuration": {"order": [1, 0]}},
              {"name": "bytes", "configuration": {"endian": "big"}}]
    values = np.arange(2 * 3 * 4, dtype="<i4").reshape(2, 3, 4)
    path = store(tmp_path, "int32", [2, 3, 4], [2, 3, 4], codecs)
    write_all(path, values.tobytes())
    assert (tmp_path / "a" / "c" / "0" / "0" / "0").read_bytes() == values.reshape(6, 4).T.astype(">i4").tobytes()
    assert read_all(path) == values.tobytes()


@pytest.mark.parametrize("shape", [[[1], [0]], [[1, 0], 4], [[2], 6], [-1, -1], [5, -1], [[1], 8]])
def test_reshape_refuses_what_the_readme_forbids(shape):
    with pytest.raises(MetadataError):
        chain([{"name": "reshape", "configuration": {"shape": shape}}, "bytes"], "uint8", [2, 3, 4])


def test_reshape_minus_one_fills_in_the_rest():
    assert chain([{"name": "reshape", "configuration": {"shape": [[0], -1]}}, "bytes"], "uint8",
                 [2, 3, 4]).array_array[0].shape == (2, 12)


# conditional

CONDITIONAL = [{"name": "bytes", "configuration": {"endian": "little"}},
               {"name": "conditional", "configuration": {"codecs": [{"name": "gzip", "configuration": {"level": 5}}]}}]


def test_conditional_compresses_a_chunk_only_when_that_makes_it_smaller(tmp_path):
    path = store(tmp_path, "uint8", [2, 256], [1, 256], CONDITIONAL)
    noise = np.random.default_rng(2).integers(0, 256, 256, dtype="u1")
    write_all(path, np.zeros(256, "u1").tobytes() + noise.tobytes())
    assert not (tmp_path / "a" / "c" / "0" / "0").exists()  # all fill: not stored
    write_all(path, np.full(256, 7, "u1").tobytes() + noise.tobytes())
    first, second = ((tmp_path / "a" / "c" / str(i) / "0").read_bytes() for i in (0, 1))
    assert first[0] == 1 and gzip.decompress(first[1:]) == bytes([7]) * 256
    assert second == b"\x00" + noise.tobytes()
    assert read_all(path) == bytes([7]) * 256 + noise.tobytes()


def test_conditional_reads_any_header_and_refuses_bits_past_its_codecs(tmp_path):
    codecs = [{"name": "bytes"}, {"name": "conditional", "configuration": {"header_bits": 16, "codecs": [
        {"name": "gzip", "configuration": {"level": 1}}, {"name": "zstd", "configuration": {"level": 1}}]}}]
    body = bytes(range(64))
    both = zstandard.ZstdCompressor().compress(gzip.compress(body))
    path = store(tmp_path, "uint8", [3, 64], [1, 64], codecs, chunk_files={
        "c/0/0": b"\x03\x00" + both, "c/1/0": b"\x00\x00" + body, "c/2/0": b"\x04\x00" + body})
    with zarrfs.open_raw(path) as view:
        assert view.read(0, 128) == body * 2
        with pytest.raises(CorruptChunkError, match="past the 2 codecs"):
            view.read(128, 64)


# n5_default

def n5_codecs(ndim, compressor=None):
    return [{"name": "n5_default", "configuration": {"codecs": [
        {"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}},
        {"name": "bytes", "configuration": {"endian": "big"}}, *([compressor] if compressor else [])]}}]


def test_n5_default_reads_what_tensorstore_n5_writes_and_writes_what_it_reads(tmp_path):
    import tensorstore as ts  # the test extra has it
    spec = {"driver": "n5", "kvstore": {"driver": "file", "path": str(tmp_path / "a")}}
    t = ts.open({**spec, "metadata": {"dimensions": [5, 7], "blockSize": [2, 3], "dataType": "int16",
                                      "compression": {"type": "zstd", "level": 1}}}, create=True).result()
    values = np.arange(35, dtype="i2").reshape(5, 7) - 17
    t[...] = values
    doc = array_doc([5, 7], "int16", [2, 3], codecs=n5_codecs(2, {"name": "zstd", "configuration": {"level": 1}}),
                    key_encoding={"name": "v2", "configuration": {"separator": "/"}})
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    assert read_all(str(tmp_path / "a")) == values.astype("<i2").tobytes()
    write_all(str(tmp_path / "a"), (values * 2).astype("<i2").tobytes())
    assert np.array_equal(ts.open(spec).result().read().result(), values * 2)


def test_n5_default_pads_a_truncated_edge_block(tmp_path):
    block = np.array([[1, 2], [3, 4], [5, 6]], ">u2")  # a 3x2 block of a 4x2 chunk, as Java N5 writes edges
    header = struct.pack(">HHII", 0, 2, 3, 2)
    path = store(tmp_path, "uint16", [3, 2], [4, 2], n5_codecs(2), fill=9,
                 chunk_files={"0/0": header + block.T.tobytes()})
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(array_doc(
        [3, 2], "uint16", [4, 2], codecs=n5_codecs(2), fill_value=9,
        key_encoding={"name": "v2", "configuration": {"separator": "/"}})))
    assert read_all(path) == block.astype("<u2").tobytes()


def test_n5_default_refuses_a_chain_that_is_not_n5s():
    with pytest.raises(MetadataError, match="transpose"):
        chain([{"name": "n5_default", "configuration": {"codecs": [
            {"name": "transpose", "configuration": {"order": [0, 1]}}, {"name": "bytes", "configuration": {
                "endian": "big"}}]}}], "int16", [2, 2])


# zfp

def test_zfp_without_zfpy_is_refused_naming_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "zfpy", None)  # not importable, whether installed or not
    with pytest.raises(UnsupportedError, match="zfpy"):
        chain([{"name": "zfp", "configuration": {"mode": "reversible"}}], "float32", [4])


def test_round_trip_through_the_file_system(tmp_path):
    from core import core_of

    root = tmp_path / "s"
    write_doc(root, "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    write_doc(root, "packed", array_doc([6], "int4", [4], codecs=[{"name": "packbits"}], fill_value=-1))
    write_doc(root, "maybe", array_doc([300], "uint8", [300], codecs=CONDITIONAL))
    with core_of(root, tmp_path) as c:
        assert c.read_bytes("/packed.bin") == b"\xff" * 6
        fh = c.open("/packed.bin", os.O_RDWR)
        c.pwrite(fh, np.array([-8, 7, 3, -2, 0, 1], "i1").tobytes(), 0)
        c.close(fh)
        c.write("/maybe.bin", bytes(300))
        fh = c.open("/maybe.bin", os.O_RDWR)
        c.pwrite(fh, b"\x05" * 300, 0)
        c.close(fh)
    assert (root / "packed" / "c" / "0").read_bytes() == bytes.fromhex("78e3")
    assert (root / "packed" / "c" / "1").read_bytes() == bytes.fromhex("10ff")  # the edge chunk whole: fill past the end
    assert (root / "maybe" / "c" / "0").read_bytes()[0] == 1
    with core_of(root, tmp_path, name="again") as c:
        assert c.read_bytes("/packed.bin") == np.array([-8, 7, 3, -2, 0, 1], "i1").tobytes()
        assert c.read_bytes("/maybe.bin") == b"\x05" * 300


def _reference_round(x: float, values: list, bits: dict, rounding: str):
    """The spec's rounding of `x` among the finite `values` (sorted, exact) by exact arithmetic,
    ties to the neighbour whose last bit is 0 for nearest-even; None past the range."""
    import bisect
    from fractions import Fraction

    exact = Fraction(x)
    i = bisect.bisect_left(values, exact)
    if i < len(values) and values[i] == exact:
        return values[i]
    if i == 0 or i == len(values):
        return None
    below, above = values[i - 1], values[i]
    toward_zero, away = (below, above) if exact > 0 else (above, below)
    if rounding == "towards-zero":
        return toward_zero
    if rounding == "towards-positive":
        return above
    if rounding == "towards-negative":
        return below
    if exact - below != above - exact:
        return below if exact - below < above - exact else above
    if rounding == "nearest-away":
        return away
    return below if bits[below] % 2 == 0 else above


@pytest.mark.parametrize("data_type", ["float16", "bfloat16", "float8_e4m3fn", "float6_e2m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("rounding", ["nearest-even", "towards-zero", "towards-positive", "towards-negative",
                                      "nearest-away"])
def test_cast_value_rounds_as_exact_arithmetic_does(data_type, rounding):
    """Random values, and every tie of the type, against exact rational arithmetic."""
    from fractions import Fraction

    dt = parse_data_type(data_type)
    width = 16 if dt.itemsize == 2 else 8
    raw = np.arange(1 << width, dtype=f"u{dt.itemsize}")
    if dt.needs_cleaning:
        raw = raw[raw == dt.clean(raw.view(dt.numpy)).view(raw.dtype)]  # values with clean upper bits
    with np.errstate(invalid="ignore"):  # the NaNs
        as_float = raw.view(dt.numpy).astype(np.float64)
    finite = np.isfinite(as_float)
    bits = {}
    for b, v in zip(raw[finite], as_float[finite], strict=False):
        bits.setdefault(Fraction(float(v)), int(b))
    values = sorted(bits)
    ties = [float((a + b) / 2) for a, b in itertools.pairwise(values)]
    samples = np.concatenate([np.random.default_rng(5).uniform(-float(values[-1]), float(values[-1]), 300),
                              ties[:: max(1, len(ties) // 300)]])
    c = chain([{"name": "cast_value", "configuration": {"data_type": data_type, "rounding": rounding}},
               {"name": "bytes", "configuration": {"endian": "little"}}], "float64", [len(samples)])
    got = np.frombuffer(bytes(c.encode(samples)), dt.numpy).astype(np.float64)
    for x, y in zip(samples, got, strict=False):
        want = _reference_round(float(x), values, bits, rounding)
        assert want is not None and Fraction(float(y)) == want, (x, y, want)
