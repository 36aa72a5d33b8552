"""Golden shard bytes (as zarr-python 3.1 writes them) for the index at the end and at the start."""

import numpy as np
import pytest

from helpers import CountingStore, array_doc, open_raw_file, sharding, write_doc

GOLDEN = {
    # [1, 2, 3, 4] as uint8, inner chunks of 2: two chunks, then or after a crc32c-checked index
    ("end", "full"): "0102030400000000000000000200000000000000020000000000000002000000000000000452" "6e88",
    ("start", "full"): "24000000000000000200000000000000260000000000000002000000000000000ab5e23901020304",
    # [1, 2, 0, 0]: the second inner chunk is all fill value, so it is empty (2^64-1, 2^64-1)
    ("end", "half"): "010200000000000000000200000000000000ffffffffffffffffffffffffffffffffbd13bd56",
    ("start", "half"): "24000000000000000200000000000000ffffffffffffffffffffffffffffffff2609790d0102",
}


def make(tmp_path, location):
    inner = [{"name": "bytes"}]
    write_doc(tmp_path, "", array_doc([4], "uint8", [4], codecs=[sharding([2], inner, location)]))
    return CountingStore(tmp_path)


@pytest.mark.parametrize("location", ["end", "start"])
def test_encode_matches_golden(tmp_path, location):
    store = make(tmp_path, location)
    raw = open_raw_file(store)
    raw.write(0, bytes([1, 2, 3, 4]))
    raw.flush()
    assert (tmp_path / "c" / "0").read_bytes().hex() == GOLDEN[location, "full"]
    raw.write(2, bytes([0, 0]))
    raw.flush()
    assert (tmp_path / "c" / "0").read_bytes().hex() == GOLDEN[location, "half"]
    raw.write(0, bytes([0, 0]))
    raw.flush()
    assert not (tmp_path / "c" / "0").exists()  # all inner chunks empty: the shard is deleted


@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("which, expected", [("full", [1, 2, 3, 4]), ("half", [1, 2, 0, 0])])
def test_decode_golden(tmp_path, location, which, expected):
    store = make(tmp_path, location)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "0").write_bytes(bytes.fromhex(GOLDEN[location, which]))
    raw = open_raw_file(store)
    assert list(raw.read(0, 4)) == expected
    assert list(raw.read(3, 1)) == expected[3:]


def test_full_shard_codec_round_trip():
    """The whole-shard encode/decode used when sharding is combined with other codecs."""
    from zarrfs.codecs.chain import ChunkSpec, CodecChain
    from zarrfs.format.data_types import parse_data_type
    dt = parse_data_type("int16")
    spec = ChunkSpec((4, 6), dt, dt.fill_value(0))
    chain = CodecChain([sharding([2, 3]), {"name": "crc32c"}], spec, "test")
    assert chain.sharding is None  # not partial: crc32c wraps the whole shard
    data = np.arange(24, dtype="<i2").reshape(4, 6)
    data[:2, :3] = 0
    assert (chain.decode(chain.encode(data)) == data).all()


@pytest.mark.parametrize("inner", [None, 4, "4", {"a": 4}])
def test_a_sharding_chunk_shape_that_is_not_a_list_is_refused_naming_it(inner):
    """Found by the metadata fuzz target: chunk_shape null was a TypeError (EIO), not a refusal."""
    from zarrfs.codecs.base import ChunkSpec
    from zarrfs.codecs.chain import CodecChain
    from zarrfs.errors import MetadataError
    from zarrfs.format.data_types import parse_data_type
    spec = ChunkSpec((8,), parse_data_type("int32", "data_type"), np.array(0, "<i4"))
    with pytest.raises(MetadataError, match="chunk_shape must be a list"):
        CodecChain([{"name": "sharding_indexed", "configuration": {"chunk_shape": inner}}], spec, "zarr.json: codecs")
