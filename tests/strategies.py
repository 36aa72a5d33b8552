"""Hypothesis strategies: array layouts (plain, sharded, nested sharded) with codec chains."""

from hypothesis import strategies as st

from helpers import DTYPES, sharding

FILLS = {"bool": [False, True], "int8": [0, -7], "uint16": [0, 65535], "float32": [0.0, "NaN", "0x7fc00001", -0.0],
         "float64": [0.0, "-Infinity"], "complex64": [[0.0, 0.0], ["NaN", 1.0]], "r24": [[0, 0, 0], [1, 2, 3]]}


def bytes_codec(draw):
    return {"name": "bytes", "configuration": {"endian": draw(st.sampled_from(["little", "big"]))}}


@st.composite
def codec_chain(draw, ndim):
    chain = []
    if ndim > 1 and draw(st.booleans()):
        order = draw(st.permutations(list(range(ndim))))
        chain.append({"name": "transpose", "configuration": {"order": list(order)}})
    chain.append(bytes_codec(draw))
    compressor = draw(st.sampled_from(["none", "gzip", "zstd", "blosc"]))
    if compressor == "gzip":
        chain.append({"name": "gzip", "configuration": {"level": draw(st.integers(0, 9))}})
    elif compressor == "zstd":
        chain.append({"name": "zstd", "configuration": {"level": draw(st.integers(-1, 5)),
                                                         "checksum": draw(st.booleans())}})
    elif compressor == "blosc":
        chain.append({"name": "blosc", "configuration": {
            "cname": draw(st.sampled_from(["lz4", "lz4hc", "blosclz", "zstd", "zlib"])),
            "clevel": draw(st.integers(0, 9)),
            "shuffle": draw(st.sampled_from(["noshuffle", "shuffle", "bitshuffle"])),
            "typesize": draw(st.sampled_from([1, 2, 4, 8])), "blocksize": 0}})
    if draw(st.booleans()):
        chain.append({"name": "crc32c"})
    return chain


@st.composite
def layouts(draw, max_ndim=3, max_dim=7):
    """(shape, data_type, fill_value, chunk_shape, codecs)."""
    ndim = draw(st.integers(0, max_ndim))
    shape = [draw(st.integers(0, max_dim)) for _ in range(ndim)]
    data_type = draw(st.sampled_from(DTYPES))
    fill = draw(st.sampled_from(FILLS.get(data_type, [None])))
    inner = [draw(st.integers(1, 3)) for _ in range(ndim)]
    chain = draw(codec_chain(ndim))
    kind = draw(st.sampled_from(["plain", "sharded", "nested", "sharded+crc32c"]))
    location = lambda: draw(st.sampled_from(["start", "end"]))  # noqa: E731
    factor = lambda: [draw(st.integers(1, 3)) for _ in range(ndim)]  # noqa: E731
    if kind == "plain":
        return shape, data_type, fill, inner, chain
    middle = [c * k for c, k in zip(inner, factor(), strict=False)]
    codecs = [sharding(inner, chain, location())]
    if kind == "nested":
        outer = [c * k for c, k in zip(middle, factor(), strict=False)]
        return shape, data_type, fill, outer, [sharding(middle, codecs, location())]
    if kind == "sharded+crc32c":  # sharding wrapped by a bytes->bytes codec: whole-shard path
        codecs.append({"name": "crc32c"})
    return shape, data_type, fill, middle, codecs


V2_DTYPES = ["|b1", "|i1", "<i2", ">i4", "<u8", ">u2", "<f2", ">f4", "<f8", ">c8", "<c16", "|S3", "<U2", ">U1",
             "|V5", "<M8[s]", ">m8[us]", [["a", "<i2"], ["b", ">f4"]]]
V2_COMPRESSORS = [None, {"id": "zlib", "level": 1}, {"id": "gzip", "level": 5}, {"id": "bz2", "level": 1},
                  {"id": "lzma", "format": 1, "check": -1, "preset": None, "filters": None}, {"id": "lz4", "acceleration": 1},
                  {"id": "zstd", "level": 1}, {"id": "zstd", "level": 2, "checksum": True},
                  {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": -1, "blocksize": 0},
                  {"id": "blosc", "cname": "zstd", "clevel": 1, "shuffle": 2, "blocksize": 0}]


@st.composite
def v2_arrays(draw, max_ndim=3, max_dim=7):
    """A .zarray document: any shape, chunking, order, separator, compressor, lossless filter
    chain and fill value form."""
    ndim = draw(st.integers(0, max_ndim))
    shape = [draw(st.integers(0, max_dim)) for _ in range(ndim)]
    chunks = [draw(st.integers(1, 4)) for _ in range(ndim)]
    dtype = draw(st.sampled_from(V2_DTYPES))
    filters = draw(st.sampled_from([None, [{"id": "adler32"}],
                                    [{"id": "zlib", "level": 1}, {"id": "fletcher32"}]]))
    if dtype in ("<i2", ">i4", "<u8") and draw(st.booleans()):
        filters = [{"id": "delta", "dtype": dtype, "astype": dtype}] + (filters or [])
    fills = {"|b1": [None, True, 1], "<f8": [None, "NaN", "-Infinity", -0.0], ">f4": ["Infinity", 1.5],
             "|S3": [None, "YWI="], "<U2": [None, "é"], "<M8[s]": [None, -(2**63), 12], "|V5": ["AQIDBAU="]}
    default = {"U": [None, ""], "c": [None], "S": [None], "V": [None]}.get(dtype[1] if isinstance(dtype, str) else "V",
                                                                         [None, 0])
    fill = draw(st.sampled_from(fills.get(dtype, default) if isinstance(dtype, str) else [None, "AAAAAAAA"]))
    return {"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype, "order": draw(st.sampled_from("CF")),
            "compressor": draw(st.sampled_from(V2_COMPRESSORS)), "filters": filters, "fill_value": fill,
            "dimension_separator": draw(st.sampled_from([".", "/"]))}
