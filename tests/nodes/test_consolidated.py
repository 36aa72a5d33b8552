"""Consolidated metadata (v2 .zmetadata, v3 consolidated_metadata): listing and opening without a
read per node, a stale copy losing to a node's own documents, and a store that cannot list."""

import json
import logging
import os
import warnings

import numpy as np
import pytest
import zarr

from core import core_of
from helpers import CountingStore
from mounting import mounted, wait_for
from zarrfs.fs.hierarchy import DATA, DIR, SIDECAR, Hierarchy
from zarrfs.stores.local import LocalStore


def consolidated_tree(root, zarr_format):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
        group.create_array("a", shape=(4,), chunks=(2,), dtype="<i4", fill_value=0)[...] = np.arange(4)
        sub = group.create_group("sub")
        sub.attrs["title"] = "inner"
        sub.create_array("b", shape=(3,), chunks=(3,), dtype="<f8", fill_value=0.0)[...] = [1.5, 2.5, 3.5]
        deeper = sub.create_group("deeper")
        deeper.create_array("c", shape=(2, 2), chunks=(1, 2), dtype="|u1", fill_value=0)[...] = 9
        zarr.consolidate_metadata(str(root), zarr_format=zarr_format)
    return root


def walk(hierarchy, path=""):
    """Every entry below `path`, with every sidecar made: what `ls -lR` and `cat *.json` ask."""
    names = []
    for name, entry in hierarchy.listing(path).items():
        names.append(f"{path}/{name}" if path else name)
        if entry.kind == DIR:
            names += walk(hierarchy, entry.node.path)
        elif entry.kind == SIDECAR:
            assert json.loads(hierarchy.content(entry))["shape"]
    return names


def root_documents(zarr_format):
    return {"zarr.json"} if zarr_format == 3 else {".zgroup", ".zattrs", ".zmetadata"}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_listing_reads_no_node_documents(tmp_path, zarr_format):
    consolidated_tree(tmp_path / "t", zarr_format)
    store = CountingStore(tmp_path / "t")
    hierarchy = Hierarchy(store)
    assert hierarchy.consolidated is not None
    names = walk(hierarchy)
    assert {"a.bin", "sub", "sub/b.json", "sub/deeper/c.bin"} <= set(names)
    node_keys = [k for k in store.stats + [g[0] for g in store.gets] if "/" in k or k in ("a", "sub")]
    document_reads = [k for k in node_keys if os.path.basename(k) in ("zarr.json", ".zarray", ".zgroup", ".zattrs")]
    assert document_reads == []  # only the root's documents were read, and directories stat'ed
    assert sorted(g[0] for g in store.gets) == sorted(root_documents(zarr_format))  # each read once


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_store_that_cannot_list_shows_the_tree(tmp_path, zarr_format):
    class Unlistable(LocalStore):  # plain HTTP: keys can be read, not listed
        def list_dir(self, prefix):
            return []

    consolidated_tree(tmp_path / "t", zarr_format)
    hierarchy = Hierarchy(Unlistable(str(tmp_path / "t")))
    names = walk(hierarchy)
    assert {"a.bin", "a.json", "sub", "sub/b.bin", "sub/deeper", "sub/deeper/c.bin"} <= set(names)
    sub = hierarchy.lookup("/sub")
    assert sub.node.meta.attributes == {"title": "inner"}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_nodes_own_documents_win_when_opened(tmp_path, zarr_format):
    root = consolidated_tree(tmp_path / "t", zarr_format)
    key = root / "a" / ("zarr.json" if zarr_format == 3 else ".zarray")
    doc = json.loads(key.read_text())
    doc["fill_value"] = 7
    key.write_text(json.dumps(doc))
    for chunk in (root / "a").rglob("*"):
        if chunk.is_file() and not chunk.name.startswith((".z", "zarr")):
            chunk.unlink()  # every element is the fill value now
    hierarchy = Hierarchy(LocalStore(str(root)))
    listed = hierarchy.lookup("/a.bin")
    assert listed.kind == DATA and int(listed.node.meta.fill_value) == 0  # the consolidated copy
    opened = hierarchy.verify(listed)
    assert int(opened.node.meta.fill_value) == 7
    assert int(hierarchy.lookup("/a.bin").node.meta.fill_value) == 7  # and from now on
    assert hierarchy.verify(hierarchy.lookup("/sub/b.bin")).node is hierarchy.lookup("/sub/b.bin").node


def test_stale_copy_through_the_file_system(tmp_path):
    root = consolidated_tree(tmp_path / "t", 2)
    doc = json.loads((root / "a" / ".zarray").read_text())
    doc["fill_value"] = 7
    (root / "a" / ".zarray").write_text(json.dumps(doc))
    for chunk in (root / "a").glob("[0-9]*"):
        chunk.unlink()
    with core_of(root, tmp_path, "ro") as c:
        assert sorted(c.listdir()) == [".zattrs", ".zgroup", ".zmetadata", "a.bin", "a.bin.hdr", "a.bin.nhdr", "a.json",
                                       "a.mhd", "a.npy", "a.vrt", "sub", "zarr.h5", "zarr.nc"]
        assert c.read_bytes("/a.bin") == np.full(4, 7, "<i4").tobytes()
        assert json.loads(c.read_text("/a.json"))["fill_value"] == 7
        assert c.read_bytes("/sub/deeper/c.bin") == b"\x09" * 4
        assert "consolidated metadata (.zmetadata) is stale" in c.log()


def test_broken_consolidated_metadata_is_not_used(tmp_path):
    root = consolidated_tree(tmp_path / "t", 2)
    (root / ".zmetadata").write_text('{"metadata": [1, 2]}')
    hierarchy = Hierarchy(LocalStore(str(root)))
    assert hierarchy.consolidated is None
    assert {"a.bin", "sub/deeper/c.bin"} <= set(walk(hierarchy))


def test_a_stale_size_is_corrected_when_the_array_is_opened(tmp_path):
    root = consolidated_tree(tmp_path / "t", 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(str(root / "a"), shape=(10,), chunks=(4,), dtype="<i4", overwrite=True)  # not consolidated
    z[...] = np.arange(10)
    with mounted(root, tmp_path, "ro") as m:
        assert os.stat(m / "a.bin").st_size == 16  # as the consolidated copy says
        with open(m / "a.bin", "rb") as f:
            wait_for(lambda: os.fstat(f.fileno()).st_size == 40, what="the size from a's own zarr.json")
            assert f.read() == np.arange(10, dtype="<i4").tobytes()
        assert os.stat(m / "a.bin").st_size == 40


def test_a_missing_zattrs_agrees_with_empty_attributes(tmp_path):
    root = consolidated_tree(tmp_path / "t", 2)
    (root / "a" / ".zattrs").unlink()  # the consolidated copy has "a/.zattrs": {}
    hierarchy = Hierarchy(LocalStore(str(root)))
    listed = hierarchy.lookup("/a.bin")
    assert hierarchy.verify(listed).node is listed.node  # not stale: same metadata


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_entries_naming_no_node_below_the_root_are_left_out_and_hide_no_sibling(tmp_path, zarr_format, caplog):
    """Keys that are empty, '.' or '..' (or hold them) name no node: each is left out with a
    warning naming it, and the other entries still serve, on a store that cannot list too."""
    class Unlistable(LocalStore):
        def list_dir(self, prefix):
            return []

    root = consolidated_tree(tmp_path / "t", zarr_format)
    if zarr_format == 3:
        doc = json.loads((root / "zarr.json").read_text())
        entries = doc["consolidated_metadata"]["metadata"]
        bad = ["", ".", "..", "sub/../a", "../outside", "sub/./b"]
        for key in bad:
            entries[key] = entries["a"]
        entries["sub/not_an_object"] = 5  # no node either, and no reason to drop the others
        (root / "zarr.json").write_text(json.dumps(doc))
    else:
        doc = json.loads((root / ".zmetadata").read_text())
        entries = doc["metadata"]
        bad = ["./.zarray", "../.zarray", "sub/../x/.zarray", "//.zgroup", "sub/./b/.zarray"]
        for key in bad:
            entries[key] = entries["a/.zarray"] if key.endswith(".zarray") else entries["sub/.zgroup"]
        (root / ".zmetadata").write_text(json.dumps(doc))
    with caplog.at_level(logging.WARNING, logger="zarrfs"):
        hierarchy = Hierarchy(Unlistable(str(root)))
        names = walk(hierarchy)
    assert hierarchy.consolidated is not None
    assert {"a.bin", "a.json", "sub", "sub/b.bin", "sub/deeper", "sub/deeper/c.bin"} <= set(names)
    assert not [n for n in names if n.split("/")[0] in ("", ".", "..", "outside", "x")]
    for key in bad:
        assert f"{key!r} is not a node path below the root: the entry is left out" in caplog.text
    if zarr_format == 3:
        assert "['sub/not_an_object'] must be an object: the entry is left out" in caplog.text
        assert "not_an_object" not in hierarchy.listing("sub")
