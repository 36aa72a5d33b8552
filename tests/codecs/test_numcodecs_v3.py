"""numcodecs codecs in v3 (`numcodecs.<id>`, as zarr-python writes them) through the one adapter:
read and written both ways, lossy ones storing what the codec keeps, optional packages named."""

import json
import os
import pickle
import warnings

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec
from zarr.codecs import numcodecs as nc

import zarrfs
from zarrfs.errors import CorruptChunkError, UnsupportedError
from zarrfs.nodes.documents import read_metadata
from zarrfs.stores.local import LocalStore

CHAINS = {  # name -> (dtype, filters, serializer, compressors)
    "delta+bz2": ("<i4", [nc.Delta(dtype="<i4")], None, [nc.BZ2(level=1)]),
    "delta-astype+zlib": ("<i2", [nc.Delta(dtype="<i2", astype="<i8")], None, [nc.Zlib(level=2)]),
    "fixedscaleoffset+lzma": ("<f8", [nc.FixedScaleOffset(offset=100, scale=10, dtype="<f8", astype="<i4")], None,
                              [nc.LZMA()]),
    "astype+lz4": ("<f4", [nc.AsType(encode_dtype="<f8", decode_dtype="<f4")], None, [nc.LZ4()]),
    "adler32": ("<u2", None, None, [nc.Adler32()]),
    "fletcher32+crc32": ("<i8", None, None, [nc.Fletcher32(), nc.CRC32()]),
    "shuffle+jenkins": (">f8", None, BytesCodec(endian="big"), [nc.Shuffle(elementsize=8), nc.JenkinsLookup3()]),
    "pcodec": ("<f8", None, nc.PCodec(), None),
}


LOSSY = {"fixedscaleoffset+lzma"}


def create(path, chain, shape=(7, 9), chunks=(3, 4)):
    dtype, filters, serializer, compressors = CHAINS[chain]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=dtype, filters=filters,
                                 serializer=serializer or "auto", compressors=compressors, fill_value=0)


def sample(dtype, shape, rng):
    if np.dtype(dtype).kind == "f":
        return np.round(rng.standard_normal(shape) * 50, 1).astype(dtype)  # exact for fixedscaleoffset scale 10
    return rng.integers(-500, 500, shape).astype(dtype) if np.dtype(dtype).kind == "i" else rng.integers(
        0, 60000, shape).astype(dtype)


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_both_ways(tmp_path, chain):
    rng = np.random.default_rng(11)
    z = create(tmp_path / "a", chain)
    assert any(c["name"].startswith("numcodecs.") for c in json.loads((tmp_path / "a" / "zarr.json").read_text())["codecs"])
    z[1:, :] = sample(z.dtype, z.shape, rng)[1:, :]
    expected = np.asarray(z[...])
    little = expected.astype(expected.dtype.newbyteorder("<"))
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        assert view.read(0, view.size) == little.tobytes()
        new = sample(z.dtype, z.shape, rng).astype(little.dtype)
        view.write(0, new.tobytes()[:view.size // 2 // little.itemsize * little.itemsize])
    n = little.size // 2
    little.reshape(-1)[:n] = new.reshape(-1)[:n]
    got = np.asarray(zarr.open_array(str(tmp_path / "a"))[...]).astype(little.dtype)
    assert open_bytes(tmp_path / "a") == got.tobytes()  # both read the same stored values
    if chain in LOSSY:  # scale and round: what the codec keeps, within its precision
        assert np.allclose(got, little, atol=0.051) and not np.array_equal(got, little)
    else:
        assert got.tobytes() == little.tobytes()


def test_lossy_codecs_read_and_store_what_they_keep(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, filters in [("q", [nc.Quantize(digits=2, dtype="<f8")]), ("r", [nc.BitRound(keepbits=3)])]:
            z = zarr.create_array(str(tmp_path / name), shape=(50,), chunks=(20,), dtype="<f8", filters=filters)
            z[...] = np.linspace(0, 1, 50)
            assert open_bytes(tmp_path / name) == np.asarray(z[...]).tobytes()  # reads as zarr-python does
            exact = np.linspace(1, 2, 50)
            with zarrfs.open_raw(str(tmp_path / name), mode="r+") as view:
                view.write(0, exact.tobytes())
            stored = np.frombuffer(open_bytes(tmp_path / name), "<f8")
            assert np.allclose(stored, exact, atol=0.07) and not np.array_equal(stored, exact)
            assert np.array_equal(np.asarray(zarr.open_array(str(tmp_path / name))[...]), stored)


def open_bytes(path) -> bytes:
    with zarrfs.open_raw(str(path)) as view:
        return view.read(0, view.size)


def test_optional_package_is_named_when_missing(tmp_path):
    create(tmp_path / "a", "pcodec")
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    doc["codecs"] = [{"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": 0.01}}]
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    from zarrfs.fs.hierarchy import check_codecs

    meta = read_metadata(LocalStore(str(tmp_path)), "a")
    with pytest.raises(UnsupportedError, match=r"codecs\[0\] \(numcodecs.zfpy\): codec 'zfpy' needs the Python "
                                               r"package 'zfpy'"):
        check_codecs(meta, "a/zarr.json")
    with pytest.raises(UnsupportedError, match=r"codec 'zfpy' needs the Python package 'zfpy'"):
        zarrfs.open_raw(str(tmp_path / "a"))  # the array opened on its own says the same


@pytest.mark.parametrize("codec", ["zlib", "bz2", "lzma", "lz4"])
def test_a_stream_that_decodes_to_more_than_its_chunk_is_corrupt(tmp_path, codec):
    import numcodecs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compressor = {"zlib": nc.Zlib(), "bz2": nc.BZ2(), "lzma": nc.LZMA(), "lz4": nc.LZ4()}[codec]
        # a chunk whose stored limit (CodecChain.stored_limit) the bombs fit, so the decoder meets them
        z = zarr.create_array(str(tmp_path / "a"), shape=(1 << 18,), chunks=(1 << 18,), dtype="|u1",
                              compressors=[compressor])
    z[...] = 1
    bomb = numcodecs.get_codec({"id": codec}).encode(bytes(64 << 20))  # 64 MiB of zeros for a 256 KiB chunk
    (tmp_path / "a" / "c" / "0").write_bytes(bomb)
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        with pytest.raises(CorruptChunkError, match="more than the"):
            view.read(0, 1 << 18)  # whole: a small read of a zlib chunk decodes only its start


def test_a_v3_document_cannot_smuggle_pickle_through_the_v2_filter_codec(tmp_path):
    from zarrfs.fs.hierarchy import check_codecs

    create(tmp_path / "a", "adler32")
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    doc["codecs"] = [{"name": "zarrfs.v2_filters", "configuration": {"dtype": "<u2", "filters": [{"id": "pickle"}]}}]
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    ran = tmp_path / "ran"
    bait = pickle.dumps(Runs(os.mkdir, str(ran)))  # a chunk that runs code when unpickled
    (tmp_path / "a" / "c" / "0").mkdir(parents=True, exist_ok=True)
    (tmp_path / "a" / "c" / "0" / "0").write_bytes(bait)
    with pytest.raises(UnsupportedError, match="pickle.*refused"):
        check_codecs(read_metadata(LocalStore(str(tmp_path)), "a"), "a/zarr.json")
    with pytest.raises(UnsupportedError, match="pickle.*refused"):
        zarrfs.open_raw(str(tmp_path / "a")).read(0, 8)
    assert not ran.exists()  # nothing was unpickled
    pickle.loads(bait)
    assert ran.is_dir()  # and the bait was live: unpickled, it runs


class Runs:
    """Unpickled, calls `function(argument)`: what a hostile store would put in a chunk."""

    def __init__(self, function, argument):
        self.function, self.argument = function, argument

    def __reduce__(self):
        return self.function, (self.argument,)
