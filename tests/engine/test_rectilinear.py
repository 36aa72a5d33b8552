"""The rectilinear chunk grid (zarr-extensions, chunk-grids/rectilinear): chunks of irregular
edge lengths, with and without sharding, read, written and seeked as regular ones are. No
writer here has it (zarr-python 3.1 and tensorstore refuse it), so stores are built by hand
from the README; their chunks are checked against numpy slices of the whole array."""

import gzip
import itertools
import json
import os

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import zarrfs
from helpers import CountingStore, array_doc, open_raw_file, sharding, write_doc
from zarrfs.engine.holes import SEEK_DATA, SEEK_HOLE, Presence, SeekError, seek
from zarrfs.errors import MetadataError, UnsupportedError
from zarrfs.format.v3 import parse_document
from zarrfs.fs.hierarchy import Hierarchy
from zarrfs.geometry import Edges, chunk_parts, grid_shape
from zarrfs.stores.local import LocalStore


def rectilinear(shape, chunk_shapes, data_type="int16", codecs=None, fill=-1) -> dict:
    doc = array_doc(shape, data_type, [1] * len(shape), codecs=codecs, fill_value=fill)
    doc["chunk_grid"] = {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": chunk_shapes}}
    return doc


def expanded(entry, n):
    """A README chunk_shapes entry as edge lengths (independently of zarrfs's parser)."""
    if isinstance(entry, int):
        return [entry] * -(-n // entry)
    out = []
    for item in entry:
        out += [item[0]] * item[1] if isinstance(item, list) else [item]
    return out


def blocks(values, chunk_shapes, fill):
    """{chunk coords: the chunk's declared block}, overhanging parts holding the fill value."""
    edges = [expanded(e, n) for e, n in zip(chunk_shapes, values.shape, strict=False)]
    starts = [np.cumsum([0, *e]) for e in edges]
    out = {}
    for coords in itertools.product(*(range(len(e)) for e in edges)):
        if any(s[c] >= n for s, c, n in zip(starts, coords, values.shape, strict=False)):
            continue  # wholly past the end: no such chunk
        block = np.full([e[c] for e, c in zip(edges, coords, strict=False)], fill, values.dtype)
        inside = tuple(slice(s[c], min(s[c] + e[c], n)) for s, e, c, n in zip(starts, edges, coords, values.shape, strict=False))
        block[tuple(slice(0, x.stop - x.start) for x in inside)] = values[inside]
        out[coords] = block
    return out


def chunk_file(root, coords):
    return root / "a" / "c" / "/".join(map(str, coords))


def test_the_readme_example_expands_every_form():
    doc = rectilinear([6, 6, 6, 6, 6], [4, [1, 2, 3], [[4, 2]], [[1, 3], 3], [4, 4, 4]])
    meta = parse_document(json.dumps(doc).encode(), "zarr.json")
    assert meta.chunk_shape == (4, (1, 2, 3), (4, 4), (1, 1, 1, 3), (4, 4, 4))
    assert grid_shape(meta.shape, meta.chunk_shape) == (2, 3, 2, 4, 2)  # the overflowing third chunk holds nothing


def test_the_readme_indexing_example():
    grid = (Edges([16, 10]), Edges([24, 14]))
    (part,) = chunk_parts((slice(20, 21), slice(15, 16)), grid, (26, 38))
    assert part.coords == (1, 0) and part.chunk_box == (slice(4, 5), slice(15, 16))


@pytest.mark.parametrize("chunk_shapes, error", [
    ([[1, 2], [3]], MetadataError),  # sums to 3 < 6 along dimension 0
    ([[0, 6], [3]], MetadataError), ([[[2, 0]], [3]], MetadataError), ([[6], []], MetadataError),
    ([[6]], MetadataError), ([[[1, 2**40]], [3]], UnsupportedError)])
def test_bad_grids_are_refused(chunk_shapes, error):
    with pytest.raises(error):
        parse_document(json.dumps(rectilinear([6, 3], chunk_shapes)).encode(), "zarr.json")
    doc = rectilinear([6, 3], [6, 3])
    doc["chunk_grid"]["configuration"]["kind"] = "external"
    with pytest.raises(UnsupportedError, match="kind"):
        parse_document(json.dumps(doc).encode(), "zarr.json")


CHUNKS = [[1, 2, 3], [[3, 2], 4]]  # 6 x 7: rows 1, 2, 3; columns 3, 3 and 4 (overhanging by 3)
GZIP = [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "gzip", "configuration": {"level": 1}}]


ZSTD = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]


@pytest.mark.parametrize("codecs", [GZIP, ZSTD], ids=["gzip", "zstd"])  # zstd: reads decode part of a chunk
def test_reads_hand_built_irregular_chunks(tmp_path, codecs):
    values = np.arange(42, dtype="<i2").reshape(6, 7) * 3 - 50
    write_doc(tmp_path, "a", rectilinear([6, 7], CHUNKS, codecs=codecs))
    for coords, block in blocks(values, CHUNKS, -1).items():
        if coords != (1, 1):  # one chunk not stored: the fill value
            chunk_file(tmp_path, coords).parent.mkdir(parents=True, exist_ok=True)
            raw = block.astype(">i2").tobytes()
            chunk_file(tmp_path, coords).write_bytes(gzip.compress(raw) if codecs is GZIP else
                                                     zstandard.ZstdCompressor().compress(block.tobytes()))
    expected = values.copy()
    expected[1:3, 3:6] = -1
    flat = expected.tobytes()
    with zarrfs.open_raw(str(tmp_path / "a")) as view:  # small reads first: decoded in part, kept in scratch
        for offset, size in [(0, 1), (5, 9), (13, 30), (41, 43), (83, 1), (20, 64), (30, 2), (31, 2)]:
            assert view.read(offset, size) == flat[offset:offset + size]
        assert view.read(0, view.size) == flat


def test_writes_store_each_irregular_chunk_at_its_declared_size(tmp_path):
    write_doc(tmp_path, "a", rectilinear([6, 7], CHUNKS))
    values = np.full((6, 7), -1, "<i2")
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        view.write(2 * 14 + 2 * 2 + 1, bytes(range(1, 40)))  # across chunks, unaligned at both ends
    raw = np.frombuffer(values.tobytes(), "u1").copy()
    raw[2 * 14 + 2 * 2 + 1:2 * 14 + 2 * 2 + 40] = np.arange(1, 40, dtype="u1")
    values = raw.view("<i2").reshape(6, 7)
    for coords, block in blocks(values, CHUNKS, -1).items():
        path = chunk_file(tmp_path, coords)
        if (block == -1).all():
            assert not path.exists(), coords
        else:
            assert np.array_equal(np.frombuffer(path.read_bytes(), "<i2").reshape(block.shape), block), coords
    with zarrfs.open_raw(str(tmp_path / "a")) as view:
        assert view.read(0, view.size) == values.tobytes()


SHARDED = [[2, 4], [[4, 1], 2]]  # shards of 2 or 4 rows, 4 or 2 columns; inner chunks 2 x 2


def test_sharded_rectilinear_writes_and_reads_one_inner_chunk(tmp_path):
    codecs = [sharding([2, 2], codecs=[{"name": "bytes", "configuration": {"endian": "little"}}])]
    write_doc(tmp_path, "a", rectilinear([5, 6], SHARDED, codecs=codecs, fill=0))
    values = (np.arange(30, dtype="<i2").reshape(5, 6) + 1)
    with zarrfs.open_raw(str(tmp_path / "a"), mode="r+") as view:
        view.write(0, values.tobytes())
    small = chunk_file(tmp_path, (0, 1)).read_bytes()  # a 2 x 2 shard: one inner chunk
    wide = chunk_file(tmp_path, (1, 0)).read_bytes()  # a 4 x 4 shard overhanging by a row: four
    assert len(small) == 8 + 16 + 4 and len(wide) == 4 * 8 + 4 * 16 + 4
    store = CountingStore(str(tmp_path / "a"))
    raw = open_raw_file(store, writable=False)
    store.reset()
    assert raw.read(2 * 12 + 2 * 5, 2) == values[2, 5].tobytes()  # row 2, column 5: shard (1, 1)
    assert [key for key, _, _ in store.gets] == ["c/1/1", "c/1/1"]  # its index, then one inner chunk
    assert raw.read(0, raw.size) == values.tobytes()


def test_a_shard_length_the_inner_chunks_do_not_divide_is_refused(tmp_path):
    write_doc(tmp_path, "a", rectilinear([7, 6], [[4, 3], 2], codecs=[sharding([2, 2])], fill=0))
    with pytest.raises(MetadataError, match="length 3 along dimension 0"):
        zarrfs.open_raw(str(tmp_path / "a"))


def test_the_sidecar_describes_the_grid(tmp_path):
    write_doc(tmp_path, "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    write_doc(tmp_path, "a", rectilinear([6, 7], CHUNKS))
    h = Hierarchy(LocalStore(str(tmp_path)))
    side = json.loads(h.content(h.lookup("/a.json")))
    assert side["chunk_grid"] == "rectilinear" and side["chunk_shape"] is None
    assert side["chunk_shapes"] == [[1, 2, 3], [3, 3, 4]]


@st.composite
def irregular(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 7)) for _ in range(ndim))
    edges = tuple(Edges(draw(st.lists(st.integers(1, 4), min_size=max(1, n), max_size=max(1, n))))
                  for n in shape)  # at least n edges of at least 1: they cover the dimension
    cells = list(itertools.product(*(range(g) for g in grid_shape(shape, edges))))
    return shape, edges, [c for c in cells if draw(st.booleans())]


@settings(max_examples=200, deadline=None)
@given(irregular())
def test_holes_on_irregular_chunks_match_a_brute_force_model(grid):
    shape, edges, present = grid
    mask = np.zeros(shape, bool)
    for coords in present:
        mask[tuple(slice(e.starts[c], e.starts[c + 1]) for e, c in zip(edges, coords, strict=False))] = True
    mask = mask.reshape(-1)
    presence = Presence(shape, edges, present)
    for element in range(mask.size):
        data = [i for i in range(element, mask.size) if mask[i]]
        holes = [i for i in range(element, mask.size) if not mask[i]]
        if data:
            assert seek(presence, 1, mask.size, element, SEEK_DATA) == data[0]
        else:
            with pytest.raises(SeekError):
                seek(presence, 1, mask.size, element, SEEK_DATA)
        assert seek(presence, 1, mask.size, element, SEEK_HOLE) == (holes[0] if holes else mask.size)


def test_through_the_mount_holes_and_a_round_trip(tmp_path):
    from mounting import mounted

    root = tmp_path / "s"
    write_doc(root, "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    write_doc(root, "a", rectilinear([6, 7], CHUNKS, fill=0))
    values = np.zeros((6, 7), "<i2")
    values[3:6, 6] = [7, 8, 9]  # only chunk (2, 2), whose columns 6..9 overhang the array
    with mounted(root, tmp_path) as m:
        with open(m / "a.bin", "r+b") as f:
            f.write(values.tobytes())
        fd = os.open(m / "a.bin", os.O_RDONLY)
        try:
            assert os.lseek(fd, 0, os.SEEK_DATA) == (3 * 7 + 6) * 2
            assert os.lseek(fd, (3 * 7 + 6) * 2, os.SEEK_HOLE) == (4 * 7) * 2
        finally:
            os.close(fd)
    assert [p.name for p in (root / "a" / "c").rglob("*") if p.is_file()] == ["2"]
    assert np.frombuffer(chunk_file(root, (2, 2)).read_bytes(), "<i2").reshape(3, 4)[:, 0].tolist() == [7, 8, 9]
    with zarrfs.open_raw(str(root / "a")) as view:
        assert view.read(0, view.size) == values.tobytes()


def test_a_bad_dimension_is_named_in_the_error():
    with pytest.raises(MetadataError, match=r"chunk_shapes\[1\]"):
        parse_document(json.dumps(rectilinear([6, 3], [[6], "3"])).encode(), "zarr.json")
