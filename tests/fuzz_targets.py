"""Fuzz targets: metadata documents, shard indices and chunk streams that only zarrfs errors may
refuse. The decoder target runs in a child process (see test_fuzz.py), so a decoder that hangs
fails the test instead of the test run."""

import json
import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import array_doc, sharding
from zarrfs.codecs.chain import ChunkSpec, CodecChain
from zarrfs.engine.array import open_array
from zarrfs.engine.chunk_cache import ChunkCache
from zarrfs.engine.chunk_sources import ShardChunks
from zarrfs.errors import ZarrfsError
from zarrfs.format.data_types import parse_data_type
from zarrfs.format.v3 import ArrayMetadata, parse_document
from zarrfs.fs.hierarchy import sidecar
from zarrfs.stores.local import LocalStore

EXAMPLES = int(os.environ.get("ZARRFS_EXAMPLES", 600))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=12)
           | st.sampled_from(["NaN", "r²", "r8888888888888888888", "0x7fc0", "bytes", "zstd", "sharding_indexed",
                              "regular", "default", "v2", "little", "big", "end", "start", "lz4", "shuffle",
                              "numpy.datetime64", "fixed_length_utf32", "structured", "null_terminated_bytes",
                              "string", "vlen-utf8", "numcodecs.delta", "numcodecs.zlib", "<i4", ">f8", "|O", "<U3",
                              "|S2", "<M8[s]", "F", "C", "AAAA", "delta", "zlib", "id"]))
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "configuration", "chunk_shape", "codecs", "index_codecs", "endian", "level",
                         "order", "separator", "cname", "shuffle", "typesize", "must_understand", "x", "id",
                         "dtype", "astype", "unit", "scale_factor", "length_bytes", "fields", "filters"]),
        inner, max_size=4),
    max_leaves=12)

MEMBERS = ["shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs", "attributes",
           "dimension_names", "storage_transformers", "zarr_format", "node_type", "extra"]

CHAINS = {
    "plain": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "big": [{"name": "bytes", "configuration": {"endian": "big"}}],
    "zstd": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}],
    "zstd-checksum": [{"name": "bytes", "configuration": {"endian": "little"}},
                      {"name": "zstd", "configuration": {"level": 1, "checksum": True}}],
    "gzip": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}],
    "blosc": [{"name": "bytes", "configuration": {"endian": "little"}},
              {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}],
    "crc32c-zstd": [{"name": "transpose", "configuration": {"order": [1, 0]}},
                    {"name": "bytes", "configuration": {"endian": "big"}},
                    {"name": "zstd", "configuration": {"level": 1}}, {"name": "crc32c"}],
    "sharded": [sharding([2, 4], codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                                         {"name": "zstd", "configuration": {"level": 1}}])],
    "sharded-gzip": [sharding([4, 2]), {"name": "gzip", "configuration": {"level": 1}}],
    "numcodecs": [{"name": "numcodecs.delta", "configuration": {"dtype": "<i4", "astype": "<i8"}},
                  {"name": "bytes", "configuration": {"endian": "little"}}, {"name": "numcodecs.zlib"},
                  {"name": "numcodecs.adler32"}],
    "numcodecs-bz2": [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "numcodecs.bz2"}],
    "numcodecs-lzma-lz4": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "numcodecs.lzma"},
                           {"name": "numcodecs.lz4"}],
    "v2-filters": [{"name": "transpose", "configuration": {"order": [1, 0]}},
                   {"name": "zarrfs.v2_filters", "configuration": {"dtype": ">i4", "filters": [
                       {"id": "delta", "dtype": ">i4"}, {"id": "zlib", "level": 1}, {"id": "fletcher32"}]}},
                   {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 1, "shuffle": "bitshuffle",
                                                       "typesize": 4}}],
}
SPEC = ChunkSpec((4, 8), parse_data_type("int32"), np.array(0, "<i4"))


def _mutated_documents():
    base = array_doc([10, 12], "int32", [4, 8])
    one = st.tuples(st.sampled_from(MEMBERS), scalars | json_values).map(lambda kv: {**base, kv[0]: kv[1]})
    several = st.dictionaries(st.sampled_from(MEMBERS), json_values, min_size=2, max_size=3).map(
        lambda changes: {**base, **changes})
    drop = st.sampled_from(MEMBERS).map(lambda k: {m: v for m, v in base.items() if m != k})
    codecs = st.lists(st.fixed_dictionaries({"name": st.sampled_from(
        ["bytes", "zstd", "gzip", "blosc", "crc32c", "transpose", "sharding_indexed", "nope"])},
        optional={"configuration": json_values, "must_understand": st.booleans()}), max_size=4)
    with_codecs = codecs.map(lambda c: {**base, "codecs": c})
    return st.one_of(one, one, one, one, several, drop, with_codecs, with_codecs).map(lambda d: json.dumps(d).encode())


V2_MEMBERS = ["shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters", "dimension_separator",
              "zarr_format"]


def _mutated_v2_documents():
    base = {"zarr_format": 2, "shape": [10, 12], "chunks": [4, 8], "dtype": "<i4", "fill_value": 0, "order": "C",
            "compressor": {"id": "zlib", "level": 1}, "filters": [{"id": "delta", "dtype": "<i4"}]}
    one = st.tuples(st.sampled_from(V2_MEMBERS), scalars | json_values).map(lambda kv: {**base, kv[0]: kv[1]})
    drop = st.sampled_from(V2_MEMBERS).map(lambda k: {m: v for m, v in base.items() if m != k})
    filters = st.lists(st.fixed_dictionaries({"id": st.sampled_from(
        ["delta", "zlib", "vlen-utf8", "pickle", "json2", "categorize", "packbits", "astype", "nope"])},
        optional={"dtype": scalars, "astype": scalars, "level": scalars}), max_size=3)
    return st.one_of(one, one, one, drop, filters.map(lambda f: {**base, "filters": f})).map(
        lambda d: json.dumps(d).encode())


v2_documents = st.one_of(_mutated_v2_documents(), st.binary(max_size=64), json_values.map(lambda v: json.dumps(v).encode()))


@SETTINGS
@given(raw=v2_documents, attributes=st.sampled_from([None, b"{}", b"[]", b"{bad"]))
def fuzz_metadata_v2(raw, attributes):
    """.zarray documents: the v2 reader, the sidecar and the codec chain raise zarrfs errors only."""
    from zarrfs.nodes.documents import Documents, parse

    docs = {".zarray": raw, **({".zattrs": attributes} if attributes is not None else {})}
    try:
        meta = parse("fuzz", Documents(2, "array", docs, (), os.stat(".")))
        sidecar(meta, "fuzz.bin")
        open_array(LocalStore(os.getcwd(), read_only=True), "", meta, ChunkCache(1 << 20))
    except ZarrfsError:
        pass


documents = st.one_of(*[_mutated_documents()] * 8, st.binary(max_size=64), json_values.map(lambda v: json.dumps(v).encode()))


@SETTINGS
@given(raw=documents)
def fuzz_metadata(raw):
    """parse_document, the sidecar and the codec chain of an opened array raise zarrfs errors only."""
    try:
        meta = parse_document(raw, "fuzz/zarr.json")
        if isinstance(meta, ArrayMetadata):
            sidecar(meta, "fuzz.bin")
            open_array(LocalStore(os.getcwd(), read_only=True), "", meta, ChunkCache(1 << 20))
    except ZarrfsError:
        pass


def _encoded(chain: CodecChain) -> bytes:
    values = np.arange(32, dtype="<i4").reshape(4, 8) % 5
    return bytes(chain.encode(values))


streams = st.one_of(
    st.binary(max_size=300),
    st.tuples(st.sampled_from(sorted(CHAINS)), st.integers(0, 400), st.integers(0, 255), st.binary(max_size=8)),
    st.just(bytes.fromhex("28b52ffd10198100004445464754557651646566677475767728b5")),  # numcodecs spins on it
)


def _stream(chain: CodecChain, choice) -> bytes:
    if isinstance(choice, bytes):
        return choice
    _, cut, flip, tail = choice
    data = bytearray(_encoded(chain))
    if data:
        data[cut % len(data)] ^= flip
    return bytes(data[:cut]) + tail if cut < len(data) else bytes(data) + tail


@SETTINGS
@given(name=st.sampled_from(sorted(CHAINS)), choice=streams, needed=st.integers(1, 128))
def fuzz_decoders(name, choice, needed):
    """Garbage and damaged chunks: decode, decode into a buffer and a shard's partial reads."""
    chain = CodecChain(CHAINS[name], SPEC, name)
    data = _stream(chain, choice)
    for attempt in (lambda: chain.decode(data),
                    lambda: chain.decode_into(data, np.empty(SPEC.shape, "<i4"), [needed // 2, needed]),
                    lambda: _read_shard(chain, data)):
        try:
            attempt()
        except ZarrfsError:
            pass


def _read_shard(chain: CodecChain, data: bytes):
    codec = chain.sharding
    if codec is None:
        return
    def read_value(byte_range, expect=None):  # (bytes, version) as Store.get_versioned: one version here
        if byte_range is None:
            return data, 1
        if hasattr(byte_range, "start"):
            return data[byte_range.start:byte_range.start + byte_range.length], 1
        return data[max(0, len(data) - byte_range.length):], 1
    shard = ShardChunks(read_value, codec, "fuzz/c/0/0")
    for coords in np.ndindex(*codec.chunks_per_shard):
        raw = shard.read(coords)
        if raw is not None:
            codec.inner_chain.decode(raw)


if __name__ == "__main__":
    {"metadata": fuzz_metadata, "metadata_v2": fuzz_metadata_v2, "decoders": fuzz_decoders}[sys.argv[1]]()
    print("ok")
