"""Zarr v2 arrays made by zarr-python's zarr_format=2 writer: compressors, filter chains, orders
and data types, each with values that fill every element."""

import warnings

import numcodecs
import numpy as np
import zarr

COMPRESSORS = {
    "none": None,
    "zlib": numcodecs.Zlib(3),
    "gzip": numcodecs.GZip(4),
    "bz2": numcodecs.BZ2(2),
    "lzma": numcodecs.LZMA(),
    "lz4": numcodecs.LZ4(),
    "zstd": numcodecs.Zstd(3),
    "zstd-checksum": numcodecs.Zstd(1, checksum=True),
    "blosc-lz4-auto": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.AUTOSHUFFLE),
    "blosc-zstd-bit": numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE),
    "blosc-zlib-none": numcodecs.Blosc("zlib", 1, numcodecs.Blosc.NOSHUFFLE),
}
DTYPES = ["<i4", ">i2", "|u1", "<u8", ">f8", "<f2", "<c8", ">c16", "|b1", "|S5", "<U3", ">U2", "|V3",
          "<M8[s]", ">m8[ms]", "<M8[ns]", [["a", "<i2"], ["b", ">f4"]], [["x", "|u1"], ["y", "<f8"], ["z", "|S2"]]]
FILTERS = {
    "delta": lambda dt: [numcodecs.Delta(dt)],
    "delta-astype": lambda dt: [numcodecs.Delta(dt, astype="<i8")],
    "fixedscaleoffset": lambda dt: [numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype=dt, astype="<i4")],
    "astype": lambda dt: [numcodecs.AsType(encode_dtype="<f8", decode_dtype=dt)],
    "shuffle+zlib": lambda dt: [numcodecs.Shuffle(np.dtype(dt).itemsize), numcodecs.Zlib(1)],
    "adler32": lambda dt: [numcodecs.Adler32()],
    "delta+fletcher32": lambda dt: [numcodecs.Delta(dt), numcodecs.Fletcher32()],
}
FILTER_DTYPES = {"delta": "<i4", "delta-astype": ">i2", "fixedscaleoffset": "<f8", "astype": "<f4",
                 "shuffle+zlib": ">f8", "adler32": "<u2", "delta+fletcher32": "<i8"}


def create(path, dtype, compressor="zstd", filters=None, order="C", separator=".", shape=(5, 7), chunks=(2, 3),
           fill_value=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=np.dtype(_fields(dtype)), zarr_format=2,
                                 order=order, compressors=COMPRESSORS[compressor], filters=filters,
                                 fill_value=fill_value, chunk_key_encoding={"name": "v2", "separator": separator})


def _fields(dtype):
    return [tuple(f[:1]) + (f[1],) + tuple(tuple(x) for x in f[2:]) for f in dtype] if isinstance(dtype, list) else dtype


def values(dtype: np.dtype, shape, rng) -> np.ndarray:
    """Random values of every kind; text and bytes of varied lengths, with non-ASCII text."""
    n = int(np.prod(shape))
    if dtype.kind == "b":
        return (rng.integers(0, 2, shape) == 1)
    if dtype.kind == "U":
        words = ["", "a", "çé", "xyz", "€x", "ab"]
        return np.array([words[i] for i in rng.integers(0, len(words), n)], dtype).reshape(shape)
    if dtype.kind == "S":
        words = [b"", b"a", b"b\x00c", b"xyzzy", b"\xff\xfe"]
        return np.array([words[i] for i in rng.integers(0, len(words), n)], dtype).reshape(shape)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "Mm":
        return rng.integers(-2**40, 2**40, shape).astype(dtype.newbyteorder("<")).astype(dtype)
    if dtype.fields is not None:
        out = np.zeros(shape, dtype)
        for name in dtype.names:
            out[name] = values(dtype.fields[name][0].base, out[name].shape, rng)
        return out
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return np.frombuffer(rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).tobytes(), dtype).reshape(shape)


def flat(array: np.ndarray) -> bytes:
    """The bytes zarrfs shows: little-endian fields, bool as 0/1."""
    from zarrfs.format.numpy_types import little_endian

    return np.ascontiguousarray(array, dtype=little_endian(array.dtype)).tobytes()
