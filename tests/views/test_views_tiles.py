"""The tiles of IMAGE.ome.tif (views/tiles.py), with no mount: read from a level on a remote
store, one read of the file is one read for the read budget (engine/read_budget.py), however
many tiles it meets; a tile follows what one decode of the level makes."""

import io
import json
import os

import numpy as np
import pytest
import tifffile

from helpers import array_doc, open_raw_file, sharding, write_doc
from servers.memory_store import MemoryStore
from zarrfs.edits.hierarchy_edits import HierarchyEdits
from zarrfs.engine import read_budget
from zarrfs.engine.read_budget import ReadBudgetError
from zarrfs.fs.filesystem import FileSystem, Options
from zarrfs.stores.contract import Capabilities
from zarrfs.views.tiles import Tiles

SHAPE, TILE = (64, 256), (64, 64)  # a row of four tiles


def level(chunk: tuple[int, int], capabilities: Capabilities) -> tuple[MemoryStore, np.ndarray]:
    """A uint8 level of SHAPE in chunks of `chunk`, every chunk stored."""
    store = MemoryStore(capabilities)
    store.set("zarr.json", json.dumps(array_doc(SHAPE, "uint8", chunk)).encode())
    values = np.random.default_rng(3).integers(1, 255, SHAPE, dtype="uint8")
    writer = open_raw_file(store)
    writer.write(0, values.tobytes())
    writer.flush()
    store.reads.clear()
    return store, values


def test_a_read_of_several_tiles_meeting_too_many_chunks_is_refused_before_any_request(monkeypatch):
    """Each tile meets 64 chunks (8 x 8), under the limit of 100; a read of two tiles meets 128:
    refused as a read of NAME.bin meeting them would be, with no request made."""
    monkeypatch.setattr(read_budget, "MAX_READ_CHUNKS", 100)
    store, values = level((8, 8), Capabilities(remote=True))
    raw = open_raw_file(store, writable=False)
    tiles = Tiles(0, "", SHAPE, TILE, 1)
    one = np.empty(tiles.tile_bytes, "u1")
    tiles.read_into(raw, 0, one)  # one tile: within the budget
    assert np.array_equal(one.reshape(TILE), values[:, :64])
    raw = open_raw_file(store, writable=False)  # nothing cached
    store.reads.clear()
    with pytest.raises(ReadBudgetError, match="meets 128 chunks"):
        tiles.read_into(raw, 0, np.empty(tiles.stride + tiles.tile_bytes, "u1"))
    assert store.reads == []


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_read_of_several_tiles_has_one_deadline(monkeypatch):
    """Each chunk (one a tile) takes 20 s to fetch, the deadline is 30 s: a read of four tiles
    fetches two chunks and is refused at the third, as a read of NAME.bin would be; a deadline
    of its own for each tile let the read go on for 80 s."""
    clock = Clock()
    monkeypatch.setattr(read_budget.time, "monotonic", clock)
    store, _ = level(TILE, Capabilities(remote=True, read_deadline=30.0))
    get = store.get_versioned

    def slow_get(key, *args, **kwargs):
        if key.startswith("c/"):
            clock.now += 20
        return get(key, *args, **kwargs)

    monkeypatch.setattr(store, "get_versioned", slow_get)
    raw = open_raw_file(store, writable=False)
    store.reads.clear()
    tiles = Tiles(0, "", SHAPE, TILE, 1)
    with pytest.raises(ReadBudgetError, match="did not finish within 30 s"):
        tiles.read_into(raw, 0, np.empty(tiles.nbytes, "u1"))
    assert [key for key, _ in store.reads] == ["c/0/0", "c/0/1"]


def test_tiles_follow_what_one_decode_makes_when_sharding_is_not_the_whole_chain(tmp_path):
    """A transpose before sharding_indexed: the engine cannot read such shards in part (its
    chain is not sharding alone), so one decode makes a whole 256 x 256 chunk, and a tile is
    that chunk, not the 64 x 64 inner chunk that no read decodes alone."""
    group = {"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"version": "0.5", "multiscales": [
        {"name": "img", "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
         "datasets": [{"path": "0"}]}]}}}
    codecs = [{"name": "transpose", "configuration": {"order": [1, 0]}}, sharding([64, 64])]
    write_doc(tmp_path, "", {"zarr_format": 3, "node_type": "group", "attributes": {}})
    write_doc(tmp_path, "img", group)
    write_doc(tmp_path, "img/0", array_doc([512, 512], "uint8", [256, 256], codecs=codecs))
    fs = FileSystem(str(tmp_path), Options(read_only=True, recovery_dir=str(tmp_path / "recovery")), HierarchyEdits)
    try:
        fh = fs.open("/img/img.ome.tif", os.O_RDONLY)
        size = fs.getattr("/img/img.ome.tif")["st_size"]
        header = fs.read(fh, 0, 1 << 16)
    finally:
        fs.stop()
    with tifffile.TiffFile(io.BytesIO(header + bytes(size - len(header)))) as tif:
        assert (tif.pages[0].tilelength, tif.pages[0].tilewidth) == (256, 256)
