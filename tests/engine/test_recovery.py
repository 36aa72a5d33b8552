"""engine/recovery.py: a recovery directory replayed into its store, and the replays it refuses
with one line naming what is wrong (zarrfs-recover prints it) instead of failing midway."""

import json
import shutil

import numpy as np
import pytest
import zarr

from zarrfs.engine import recovery
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
