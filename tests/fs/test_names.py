"""Names are bytes: node names with a newline or bytes that are not UTF-8 are listed, read,
written, copied, created and moved like any other, and never hide their siblings (docs/names.md).

The store is made with bytes paths (os, json): zarr-python cannot name such nodes itself. It
reads them once given the path Python makes of the bytes (os.fsdecode, as a Path).

Listing, reading and copying with real tools goes through a mount (the binding decodes the
kernel's bytes as os does); writes, new nodes, moves and attribute edits are asked of the core
without a mount (core.py), with the paths the binding would give it."""

import contextlib
import errno
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import obstore.store
import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st

from core import core_of
from helpers import array_doc, fill_disk, group_doc
from mounting import RECOVER, ZARRFS, mounted, unmount
from servers.seaweed import unique_prefix
from zarrfs import names
from zarrfs.errors import StoreError
from zarrfs.stores.object_store import ObjectStore

# store path (bytes) -> a multiplier of the oracle's values
ARRAYS = {b"good": 1, b"new\nline": 2, b"bad\xff\xfename": 3, b"grp\xc3/in\xe9ner": 4}
SHAPE, CHUNKS = (4, 6), (2, 3)


def oracle(path: bytes) -> np.ndarray:
    return (np.arange(24, dtype="<i4") * ARRAYS[path]).reshape(SHAPE)


def write_json(path: bytes, doc: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(json.dumps(doc).encode())


def make_tree(root: bytes) -> None:
    """The root group, group `grp\\xc3`, ARRAYS (each chunk written with the bytes codec), a node
    `broken\\n\\xff` whose zarr.json is no JSON, and an array `dims` with a dimension name that is
    no Unicode text (json writes it as a \\uDCFF escape)."""
    write_json(root + b"/zarr.json", group_doc())
    write_json(root + b"/dims/zarr.json", array_doc((2, 2), "int8", (2, 2), dimension_names=["t\udcff", "x"]))
    os.makedirs(root + b"/broken\n\xff")
    with open(root + b"/broken\n\xff/zarr.json", "wb") as f:
        f.write(b"{not json")
    write_json(root + b"/grp\xc3/zarr.json", group_doc())
    for path in ARRAYS:
        write_json(root + b"/" + path + b"/zarr.json", array_doc(SHAPE, "int32", CHUNKS))
        values = oracle(path)
        for i in range(SHAPE[0] // CHUNKS[0]):
            for j in range(SHAPE[1] // CHUNKS[1]):
                chunk = values[i * 2:i * 2 + 2, j * 3:j * 3 + 3]
                os.makedirs(root + b"/%s/c/%d" % (path, i), exist_ok=True)
                with open(root + b"/%s/c/%d/%d" % (path, i, j), "wb") as f:
                    f.write(chunk.tobytes())


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> bytes:
    root = os.fsencode(tmp_path_factory.mktemp("names")) + b"/odd.zarr"
    make_tree(root)
    return root


@pytest.fixture(scope="module")
def mnt(tree, tmp_path_factory):
    with mounted(os.fsdecode(tree), tmp_path_factory.mktemp("m"), "ro") as m:
        yield m


@pytest.fixture
def writable(tmp_path):
    root = os.fsencode(tmp_path) + b"/odd.zarr"
    make_tree(root)
    with core_of(os.fsdecode(root), tmp_path) as c:
        yield root, c


def zarr_array(path: bytes):
    """zarr-python's own reading of the array at `path`, given as a Path: zarr-python 3.4 reads a
    string as a URL, and URL parsing drops a newline from a name (3.1 did not parse it)."""
    return zarr.open_array(Path(os.fsdecode(path)), mode="r")


def read(path: bytes) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def at(m, path: bytes) -> bytes:
    return os.fsencode(m.path) + b"/" + path


def in_core(path: bytes) -> str:
    """The path the binding gives the core for the kernel's `path`."""
    return "/" + os.fsdecode(path)


def test_ls_lists_every_name_and_the_log_stays_clean(mnt):
    out = subprocess.run(["ls", "-A", "--quoting-style=escape", at(mnt, b"")], capture_output=True, check=False)
    assert out.returncode == 0, out.stderr
    listed = set(out.stdout.split(b"\n"))
    assert {b"good.bin", b"good.json", b"new\\nline.bin", b"new\\nline.json", b"bad\\377\\376name.bin",
            b"bad\\377\\376name.json", b"grp\\303", b"zarr.json"} <= listed
    assert subprocess.run(["ls", "-l", at(mnt, b"grp\xc3")], capture_output=True, check=False).returncode == 0
    assert "Traceback" not in mnt.log() and "UnicodeEncodeError" not in mnt.log()


def test_a_broken_odd_node_is_one_log_line_and_hides_nothing(mnt):
    listed = os.listdir(at(mnt, b""))
    assert {b"broken\n\xff.bin", b"good.bin", b"bad\xff\xfename.bin"} <= set(listed)
    with pytest.raises(OSError) as refused:
        read(at(mnt, b"broken\n\xff.bin"))
    assert refused.value.errno == errno.EIO
    lines = [line for line in mnt.settled_log().splitlines() if "broken" in line]
    assert len(lines) == 1 and "broken\\n\\xff/zarr.json" in lines[0], lines  # the bytes, on one line


def test_a_refused_source_with_an_odd_name_is_said_in_one_line(tmp_path):
    source = os.fsencode(tmp_path) + b"/not\xff zarr"
    os.mkdir(source)
    (tmp_path / "m").mkdir()
    try:  # daemonized: the parent says the child's refusal
        result = subprocess.run([ZARRFS, source, tmp_path / "m"], capture_output=True, timeout=60, check=False)
    finally:
        unmount(tmp_path / "m")  # had it mounted after all
    assert result.returncode == 1
    assert result.stderr.endswith(b"/not\\xff zarr: not a Zarr hierarchy: neither zarr.json (v3) nor .zgroup or "
                                  b".zarray (v2)\n"), result.stderr


def test_find_print0_finds_every_node_as_its_bytes(mnt):
    out = subprocess.run(["find", at(mnt, b""), "-print0"], capture_output=True, check=True).stdout
    found = {os.path.relpath(p, at(mnt, b"")) for p in out.split(b"\0") if p}
    for path in ARRAYS:
        assert {path + b".bin", path + b".json", path + b".npy"} <= found
    assert {b"grp\xc3", b"grp\xc3/zarr.json"} <= found


def test_bytes_paths_list_and_read_every_array(mnt):
    assert {b"good.bin", b"new\nline.bin", b"bad\xff\xfename.bin", b"grp\xc3"} <= set(os.listdir(at(mnt, b"")))
    assert set(os.listdir(at(mnt, b"grp\xc3"))) >= {b"zarr.json", b"in\xe9ner.bin", b"in\xe9ner.json"}
    for path in ARRAYS:
        with open(at(mnt, path + b".bin"), "rb") as f:
            assert f.read() == oracle(path).tobytes(), path
        assert np.array_equal(np.load(at(mnt, path + b".npy")), oracle(path)), path


def test_cp_copies_odd_names(mnt, tmp_path):
    out = os.fsencode(tmp_path)
    subprocess.run(["cp", at(mnt, b"bad\xff\xfename.bin"), at(mnt, b"new\nline.bin"), out], check=True)
    subprocess.run(["cp", "-r", at(mnt, b"grp\xc3"), out], check=True)
    assert read(out + b"/bad\xff\xfename.bin") == oracle(b"bad\xff\xfename").tobytes()
    assert read(out + b"/new\nline.bin") == oracle(b"new\nline").tobytes()
    assert read(out + b"/grp\xc3/in\xe9ner.bin") == oracle(b"grp\xc3/in\xe9ner").tobytes()


def strict_json(raw: bytes):
    """JSON a strict reader takes: UTF-8, and no string holding a lone surrogate (the \\uDCxx
    that Python's json writes for a surrogateescape'd byte)."""
    doc = json.loads(raw.decode("utf-8"))
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # UnicodeEncodeError on a lone surrogate
    return doc


def sidecar_of(m, path: bytes) -> dict:
    return strict_json(read(at(m, path + b".json")))


def test_sidecars_carry_names_as_text_or_as_bytes(mnt):
    assert sidecar_of(mnt, b"new\nline")["data_file"] == "new\nline.bin"
    odd = sidecar_of(mnt, b"bad\xff\xfename")
    assert odd["data_file"] == list(b"bad\xff\xfename.bin")  # not UTF-8: the byte values
    assert odd["views"]["npy"] == list(b"bad\xff\xfename.npy")
    assert bytes(odd["data_file"]) in os.listdir(at(mnt, b""))
    assert names.from_json(odd["data_file"]) == os.fsdecode(b"bad\xff\xfename.bin")
    assert sidecar_of(mnt, b"grp\xc3/in\xe9ner")["data_file"] == list(b"in\xe9ner.bin")


def test_extended_attributes_of_odd_nodes(mnt):
    for path in ARRAYS:
        assert os.getxattr(at(mnt, path + b".bin"), b"user.zarr.shape") == b"[4, 6]"
        assert os.getxattr(at(mnt, path + b".json"), b"user.mime_type") == b"application/json"
    assert os.getxattr(at(mnt, b"grp\xc3"), b"user.zarr.attributes") == b"{}"


def test_views_name_only_what_their_format_can_hold(mnt):
    listed = set(os.listdir(at(mnt, b"")))
    assert {b"dims.bin", b"dims.npy", b"dims.mhd", b"dims.vrt"} <= listed and b"dims.bin.nhdr" not in listed  # NRRD labels
    assert "dims: no nrrd view" in mnt.log()
    assert b"good.vrt" in listed and b"good.mhd" in listed
    assert b"bad\xff\xfename.vrt" not in listed  # XML is Unicode text: a name that is none stays out
    assert b"bad\xff\xfename.bin.hdr" in listed  # ENVI names no file: GDAL finds it beside the .bin
    header = read(at(mnt, b"bad\xff\xfename.bin.hdr"))
    assert header.decode("utf-8").startswith("ENVI")


def test_a_write_to_an_odd_array_keeps_its_bytes(writable):
    root, c = writable
    path = b"bad\xff\xfename"
    fh = c.open(in_core(path + b".bin"), os.O_RDWR)
    c.pwrite(fh, np.array([-5, -6], "<i4").tobytes(), 4 * 7)
    c.close(fh)
    expected = oracle(path)
    expected.flat[7:9] = [-5, -6]
    assert np.array_equal(zarr_array(root + b"/" + path)[...], expected)
    with open(root + b"/" + path + b"/c/0/0", "rb") as f:  # the chunk holding elements 7 and 8
        assert f.read() == expected[0:2, 0:3].tobytes()
    assert c.read_bytes(in_core(path + b".bin")) == expected.tobytes()


def test_new_nodes_and_moves_keep_their_bytes(writable, tmp_path):
    root, c = writable
    c.mkdir(in_core(b"made\xfe"))
    assert os.path.isfile(root + b"/made\xfe/zarr.json")
    values = np.arange(10, dtype="<u2")
    np.save(tmp_path / "v.npy", values)
    c.write(in_core(b"made\xfe/arr\n\xff.npy"), (tmp_path / "v.npy").read_bytes())
    made = zarr_array(root + b"/made\xfe/arr\n\xff")
    assert np.array_equal(made[...], values)
    assert strict_json(c.read_bytes(in_core(b"made\xfe/arr\n\xff.json")))["data_file"] == list(b"arr\n\xff.bin")
    c.rename(in_core(b"bad\xff\xfename.bin"), in_core(b"made\xfe/moved\xfd.bin"))
    assert os.path.isfile(root + b"/made\xfe/moved\xfd/zarr.json")
    assert c.read_bytes(in_core(b"made\xfe/moved\xfd.bin")) == oracle(b"bad\xff\xfename").tobytes()
    for name in c.listdir(in_core(b"")):
        if name.startswith(in_core(b"new\nline.")[1:]):
            c.unlink("/" + name)  # the array goes with the last of its files
    assert not os.path.exists(root + b"/new\nline")
    assert c.read_bytes(in_core(b"good.bin")) == oracle(b"good").tobytes()


def test_an_attribute_key_that_is_no_text_is_refused(writable):
    root, c = writable
    with pytest.raises(OSError) as refused:
        c.setxattr(in_core(b"good.json"), os.fsdecode(b"user.zarr.attr.k\xff"), b"1")
    assert refused.value.errno == errno.EILSEQ
    c.setxattr(in_core(b"bad\xff\xfename.json"), "user.zarr.attr.unit", b'"m"')
    doc = strict_json(read(root + b"/good/zarr.json"))
    assert doc["attributes"] == {}
    doc = strict_json(read(root + b"/bad\xff\xfename/zarr.json"))
    assert doc["attributes"] == {"unit": "m"}


@pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part")
@pytest.mark.parametrize("zarr_format", [3, 2])
def test_consolidated_copy_leaves_out_what_json_cannot_name(tmp_path, zarr_format):
    root = tmp_path / "c.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
    group.create_array("a", shape=(3,), dtype="<i4", fill_value=0)
    zarr.consolidate_metadata(str(root), zarr_format=zarr_format)
    with core_of(root, tmp_path) as c:
        c.mkdir(in_core(b"g\xff"))
        c.mkdir(in_core(b"tab\tname"))
        if zarr_format == 3:
            entries = strict_json((root / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
        else:
            entries = {key.rpartition("/")[0] for key in strict_json((root / ".zmetadata").read_bytes())["metadata"]}
        assert "tab\tname" in entries and not any(key.startswith("g") for key in entries)
        assert "left out of the consolidated metadata" in c.log()
        assert os.fsdecode(b"g\xff") in c.listdir()
    with core_of(root, tmp_path, name="again") as c:  # listed from the store, not the copy
        assert {os.fsdecode(b"g\xff"), "tab\tname", "a.bin"} <= set(c.listdir())
    assert zarr.open_group(str(root), mode="r")["a"].shape == (3,)


def test_data_an_odd_array_could_not_store_is_saved_and_replayed(tmp_path, tiny_tmpfs):
    """The recovery manifest names the array as the sidecar does, and zarrfs-recover finds it."""
    root = os.fsencode(tiny_tmpfs) + b"/odd.zarr"
    make_tree(root)
    fill_disk(tiny_tmpfs / "filler")
    recovery = tmp_path / "recovery"
    with core_of(os.fsdecode(root), tmp_path, f"recovery_dir={recovery}") as c:
        fh = c.open(in_core(b"bad\xff\xfename.bin"), os.O_WRONLY)
        c.pwrite(fh, np.full(24, -1, "<i4").tobytes(), 0)
        with contextlib.suppress(OSError):
            c.close(fh)  # the write-back fails: the disk is full
    (saved,) = recovery.iterdir()
    manifest = strict_json((saved / "recovery.json").read_bytes())
    assert manifest["array"] == list(b"bad\xff\xfename")
    os.unlink(tiny_tmpfs / "filler")
    subprocess.run([*RECOVER, saved], check=True, capture_output=True, timeout=60)
    stored = zarr_array(root + b"/bad\xff\xfename")[...]
    assert np.array_equal(stored, np.full(SHAPE, -1, "<i4"))


def test_object_store_keys_are_text():
    store = ObjectStore(obstore.store.MemoryStore(), "memory://")
    with pytest.raises(StoreError) as refused:
        store.set(os.fsdecode(b"bad\xff/zarr.json"), b"{}")
    assert refused.value.errno == errno.EILSEQ and "not UTF-8" in str(refused.value)
    with pytest.raises(StoreError) as refused:  # obstore's paths hold no control character
        store.set("new\nline/zarr.json", b"{}")
    assert refused.value.errno == errno.EINVAL and "new\\nline" in str(refused.value)
    store.set("caf\xe9 50% a\\b/zarr.json", b"{}")  # any other text
    assert store.get("caf\xe9 50% a\\b/zarr.json") == b"{}"
    assert store.list_dir("") == ["caf\xe9 50% a\\b"]


def test_an_object_store_mount_refuses_only_the_name_it_cannot_hold(seaweed, tmp_path):
    prefix = unique_prefix("names")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array("a", shape=(3,), dtype="<i4", fill_value=7)
    with mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options(), env=seaweed.env("admin")) as m:
        for name, code in ((b"g\xff", errno.EILSEQ), (b"tab\tname", errno.EINVAL)):
            with pytest.raises(OSError) as refused:
                os.mkdir(at(m, name))
            assert refused.value.errno == code
        os.mkdir(at(m, b"caf\xc3\xa9 50%"))
        assert set(os.listdir(at(m, b""))) >= {b"a.bin", b"caf\xc3\xa9 50%"}
        assert read(at(m, b"a.bin")) == np.full(3, 7, "<i4").tobytes()
        assert "g\\xff: the name is not UTF-8" in m.log()
    assert sorted(zarr.open_group(seaweed.zarr_store(prefix), mode="r").keys()) == ["a", "caf\xe9 50%"]


@given(st.binary(min_size=1, max_size=12))
def test_json_names_round_trip_as_utf8_json(raw):
    name = os.fsdecode(raw)
    value = strict_json(json.dumps(names.to_json(name)).encode())
    assert os.fsencode(names.from_json(value)) == raw
