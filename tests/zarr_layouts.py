"""Arrays written by zarr-python in every configuration the engine supports."""

import warnings

import numpy as np
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec, TransposeCodec, ZstdCodec

warnings.filterwarnings("ignore", module="zarr")

NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]

# name -> keyword arguments for zarr.create_array (shape (13, 11) float32 unless given)
LAYOUTS = {
    "bytes-little": dict(compressors=None),
    "bytes-big": dict(serializer=BytesCodec(endian="big"), compressors=None),
    "gzip": dict(compressors=[GzipCodec(level=5)]),
    "zstd": dict(compressors=[ZstdCodec(level=3)]),
    "zstd-checksum": dict(compressors=[ZstdCodec(level=1, checksum=True)]),
    "blosc-lz4-shuffle": dict(compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]),
    "blosc-zstd-bitshuffle": dict(compressors=[BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")]),
    "blosc-blosclz-noshuffle": dict(compressors=[BloscCodec(cname="blosclz", shuffle="noshuffle")]),
    "blosc-lz4hc": dict(compressors=[BloscCodec(cname="lz4hc", shuffle="shuffle")]),
    "blosc-zlib": dict(compressors=[BloscCodec(cname="zlib", shuffle="shuffle")]),
    "crc32c": dict(compressors=[Crc32cCodec()]),
    "transpose": dict(filters=[TransposeCodec(order=(1, 0))], compressors=[ZstdCodec(level=1)]),
    "transpose-big-gzip-crc": dict(filters=[TransposeCodec(order=(1, 0))], serializer=BytesCodec(endian="big"),
                                   compressors=[GzipCodec(level=1), Crc32cCodec()]),
    "sharded-end": dict(chunks=(6, 4), compressors=None,
                        serializer=ShardingCodec(chunk_shape=(3, 2), codecs=[BytesCodec(), ZstdCodec(level=1)])),
    "sharded-start": dict(chunks=(6, 4), compressors=None,
                          serializer=ShardingCodec(chunk_shape=(2, 4), index_location="start",
                                                   codecs=[BytesCodec(endian="big"), GzipCodec()])),
    "sharded-zarr-default": dict(chunks=(2, 3), shards=(4, 6)),
    "nested-sharding": dict(chunks=(8, 8), compressors=None, serializer=ShardingCodec(
        chunk_shape=(4, 4), codecs=[ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec(), ZstdCodec(level=1)])])),
    "key-v2-dot": dict(chunk_key_encoding={"name": "v2", "separator": "."}),
    "key-v2-slash": dict(chunk_key_encoding={"name": "v2", "separator": "/"}),
    "key-default-dot": dict(chunk_key_encoding={"name": "default", "separator": "."}),
}


def random_values(dtype: str, shape, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    raw = rng.integers(0, 256, (*shape, dtype.itemsize), dtype=np.uint8)
    values = raw.view(dtype.newbyteorder("<")).reshape(shape)
    return values


def create(path, dtype="float32", shape=(13, 11), layout="zstd", fill_value=None, **overrides):
    kwargs = {"chunks": (4, 3), **LAYOUTS[layout]}
    kwargs.update(overrides)
    if fill_value is not None:
        kwargs["fill_value"] = fill_value
    return zarr.create_array(str(path), shape=shape, dtype=dtype, **kwargs)
