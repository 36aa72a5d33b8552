"""engine/recovery.py: a recovery directory replayed into its store, and the replays it refuses
with one line naming what is wrong (zarrfs-recover prints it) instead of failing midway."""

import json
import shutil

import numpy as np
import pytest
import zarr

from zarrfs.engine import growth, recovery
from zarrfs.errors import ZarrfsError
from zarrfs.stores.local import LocalStore


def saved_piece(tmp_path):
    """A store with array `a` and a recovery directory holding one piece of it."""
    root = tmp_path / "data.zarr"
    zarr.open_array(str(root / "a"), mode="w", shape=(4,), chunks=(2,), dtype="<i4", fill_value=0)
    document = json.loads((root / "a" / "zarr.json").read_text())
    saved = recovery.save([str(tmp_path / "recovery")], str(root), "a", document,
                          [((slice(0, 4),), np.arange(4, dtype="<i4"), None)])
    return root, saved


def test_a_replay_writes_the_saved_pieces(tmp_path):
    root, saved = saved_piece(tmp_path)
    assert recovery.replay(saved, recovery.load(saved), LocalStore(str(root))) == 1
    assert zarr.open_array(str(root / "a"), mode="r")[...].tolist() == [0, 1, 2, 3]


def test_a_forced_replay_into_what_is_a_group_now_is_refused(tmp_path):
    root, saved = saved_piece(tmp_path)
    shutil.rmtree(root / "a")
    zarr.open_group(str(root / "a"), mode="w")
    with pytest.raises(ZarrfsError, match="'a' is a group now, not an array"):
        recovery.replay(saved, recovery.load(saved), LocalStore(str(root)), force=True)


def test_a_manifest_whose_zarr_json_is_no_array_is_refused(tmp_path):
    root, saved = saved_piece(tmp_path)
    manifest = recovery.load(saved)
    manifest["zarr.json"] = {"zarr_format": 3, "node_type": "group"}
    with pytest.raises(ZarrfsError, match="recovery.json: its zarr.json is not an array's metadata"):
        recovery.replay(saved, manifest, LocalStore(str(root)))


def test_records_saved_past_the_stored_shape_grow_the_array(tmp_path):
    """Records appended through the mount and never stored (growth.py) are saved past the
    stored shape: the replay grows dimension 0 to hold them, the shape stored after them."""
    root, _ = saved_piece(tmp_path)
    document = json.loads((root / "a" / "zarr.json").read_text())
    saved = recovery.save([str(tmp_path / "recovery")], str(root), "a", document,
                          [((slice(3, 7),), np.arange(30, 34, dtype="<i4"), None)])
    assert recovery.replay(saved, recovery.load(saved), LocalStore(str(root))) == 1
    assert zarr.open_array(str(root / "a"), mode="r")[...].tolist() == [0, 0, 0, 30, 31, 32, 33]


def test_records_replayed_past_the_stored_shape_grow_the_consolidated_copy_too(tmp_path):
    """In a hierarchy with consolidated metadata (xarray's default) the copy's shape follows."""
    root, _ = saved_piece(tmp_path)
    zarr.open_group(str(root), mode="a")
    zarr.consolidate_metadata(str(root))
    document = json.loads((root / "a" / "zarr.json").read_text())
    saved = recovery.save([str(tmp_path / "recovery")], str(root), "a", document,
                          [((slice(3, 7),), np.arange(30, 34, dtype="<i4"), None)])
    assert recovery.replay(saved, recovery.load(saved), LocalStore(str(root))) == 1
    assert zarr.open_consolidated(str(root))["a"][...].tolist() == [0, 0, 0, 30, 31, 32, 33]


def test_a_partial_record_is_kept_for_a_person_not_replayed(tmp_path):
    root, _ = saved_piece(tmp_path)
    document = json.loads((root / "a" / "zarr.json").read_text())
    saved = recovery.save([str(tmp_path / "recovery")], str(root), "a", document, [], (16, b"\x01\x02"))
    with pytest.raises(ZarrfsError, match="partial-record.bin holds 2 bytes of a record never completed, from byte 16"):
        recovery.replay(saved, recovery.load(saved), LocalStore(str(root)))
    assert (tmp_path / "recovery").exists() and zarr.open_array(str(root / "a"), mode="r").shape == (4,)


def test_a_piece_outside_the_array_is_refused_and_nothing_written(tmp_path):
    root, _ = saved_piece(tmp_path)
    document = json.loads((root / "a" / "zarr.json").read_text())
    saved = recovery.save([str(tmp_path / "recovery")], str(root), "a", document,
                          [((slice(0, 1), slice(0, 1)), np.ones((1, 1), "<i4"), None)])  # two dimensions, of one
    with pytest.raises(ZarrfsError, match="^a: a saved piece lies outside the array$"):
        recovery.replay(saved, recovery.load(saved), LocalStore(str(root)))
    assert not list((root / "a").rglob("c/*"))


def test_records_past_dimension_0_of_an_array_that_cannot_grow_are_refused(tmp_path):
    """A piece past the stored end of an array whose records are too large to grow (as a mount
    would have refused the append): the replay names why, and writes nothing."""
    root = tmp_path / "data.zarr"
    zarr.open_array(str(root / "a"), mode="w", shape=(1, growth.MAX_RECORD + 1), chunks=(1, 1 << 20), dtype="u1")
    document = json.loads((root / "a" / "zarr.json").read_text())
    saved = recovery.save([str(tmp_path / "recovery")], str(root), "a", document,
                          [((slice(0, 2), slice(0, 1)), np.ones((2, 1), "u1"), None)])
    with pytest.raises(ZarrfsError, match=r"^a: saved records lie past dimension 0 \(2 > 1\), and the array cannot "
                                          r"grow: its records are 67108865 bytes, more than the 67108864"):
        recovery.replay(saved, recovery.load(saved), LocalStore(str(root)))
    assert zarr.open_array(str(root / "a"), mode="r").shape == (1, growth.MAX_RECORD + 1)
    assert not list((root / "a").rglob("c/*"))
