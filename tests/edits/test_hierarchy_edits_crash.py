"""kill -9 of the daemon in the middle of an .npy copy, a delete and a rename: the store is a valid
hierarchy afterwards (zarr-python opens every node and reads it whole), no node is half made or
half deleted, and the next mount removes the leftovers."""

import json
import os
import signal
import subprocess
import warnings

import numpy as np
import zarr

from helpers import array_files
from mounting import listed, mounted, wait_for

LEFTOVER = ".zarrfs-tmp-"


def make_store(root, side=4):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(root), mode="w")
        group.create_array("keep", shape=(5,), chunks=(2,), dtype="<i4", fill_value=0)[...] = np.arange(5)
        many = group.create_group("g").create_array("many", shape=(side, side), chunks=(1, 1), dtype="|u1",
                                                    fill_value=0)
        many[...] = np.arange(side * side).reshape(side, side) % 251 + 1  # a chunk file per element
        zarr.consolidate_metadata(str(root))
    return root


def every_node(root) -> dict:
    """path -> data (None for groups): zarr-python opens each node, from its own documents and
    from the consolidated copy, and reads every array whole."""
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for consolidated in (False, True):
            group = zarr.open_consolidated(str(root)) if consolidated else zarr.open_group(str(root), mode="r")
            view = {path: None if isinstance(node, zarr.Group) else np.asarray(node[...]).tolist()
                    for path, node in group.members(max_depth=None)}
            assert not found or view == found
            found = view
    return found


def leftovers(root, group="") -> list:
    """Temporaries (staged or deleted nodes) in the group's directory, or anywhere."""
    if group or group is None:
        return sorted(n for n in os.listdir(root / (group or "")) if n.startswith(LEFTOVER))
    return sorted(str(p.relative_to(root)) for p in root.rglob(LEFTOVER + "*"))


def kill(mount):
    mount.process.send_signal(signal.SIGKILL)
    mount.process.wait()


def remount_cleans(root, tmp_path, expected):
    with mounted(root, tmp_path, name="again") as m:
        assert "removed" in m.log() or not expected
    assert leftovers(root) == []


def test_kill_during_an_npy_copy_leaves_no_array(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    before = every_node(root)
    np.save(tmp_path / "big.npy", np.arange(1 << 20, dtype="<f8"))
    data = (tmp_path / "big.npy").read_bytes()
    with mounted(root, tmp_path) as m:
        fd = os.open(m / "big.npy", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, data[:len(data) // 2])  # half the data is in the staged node's chunks
            wait_for(lambda: leftovers(root, None), what="the staged node")
            kill(m)
        finally:
            try:
                os.close(fd)
            except OSError:
                pass  # the daemon is gone
    assert not listed(m.path)  # the killed daemon's mount was taken down too
    assert every_node(root) == before
    assert leftovers(root) != []  # the staged node, invisible to zarr-python
    remount_cleans(root, tmp_path, expected=True)
    assert every_node(root) == before


def test_kill_during_a_delete_leaves_all_of_the_array_or_none(tmp_path):
    root = make_store(tmp_path / "s.zarr", side=80)  # 6,400 chunk files: removing them takes a while
    before = every_node(root)
    with mounted(root, tmp_path) as m:
        rm = subprocess.Popen(["rm", *map(str, array_files(m / "g", "many"))])  # the last file deletes it
        try:
            wait_for(lambda: leftovers(root, "g") or rm.poll() is not None, what="the delete to start")
            kill(m)
        finally:
            rm.kill()
            rm.wait()
    after = every_node(root)
    assert after in (before, {p: v for p, v in before.items() if p != "g/many"})
    remount_cleans(root, tmp_path, expected=False)
    assert every_node(root) == after


def test_kill_during_a_rename_leaves_the_node_at_one_name(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    before = every_node(root)
    moved = {p.replace("g", "h", 1) if p.startswith("g") else p: v for p, v in before.items()}
    with mounted(root, tmp_path) as m:
        mv = subprocess.Popen(["mv", str(m / "g"), str(m / "h")])
        try:
            kill(m)
        finally:
            mv.kill()
            mv.wait()
    assert every_node(root) in (before, moved)
    remount_cleans(root, tmp_path, expected=False)
    assert every_node(root) in (before, moved)


def test_an_interrupted_edit_is_finished_in_the_consolidated_metadata_at_the_next_mount(tmp_path):
    """What a kill between the two steps of a delete leaves: the consolidated entry gone, the node
    still there, and the intent record naming it. The next mount puts the entry back."""
    root = make_store(tmp_path / "s.zarr")
    before = every_node(root)
    doc = json.loads((root / "zarr.json").read_text())
    del doc["consolidated_metadata"]["metadata"]["g/many"]
    (root / "zarr.json").write_text(json.dumps(doc))
    (root / (LEFTOVER + "intent.json")).write_text(json.dumps({"paths": ["g/many"]}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "g/many" not in dict(zarr.open_consolidated(str(root)).members(max_depth=None))
    with mounted(root, tmp_path) as m:
        assert "made again from the nodes' own documents" in m.log()
    assert every_node(root) == before and leftovers(root) == []
