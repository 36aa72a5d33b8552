"""Editing the hierarchy (mkdir, rmdir, a copied .npy, a written sidecar, attribute edits, rm, mv),
each read back with zarr-python; consolidated metadata kept true; -o ro refusing all of it.

What the file system does with each request is asked of the core without a mount (core.py);
real mounts remain where the kernel or a real tool is the subject (editors, GIO, descriptors
duplicated, the kernel's cached reads) and for the deletes."""

import errno
import json
import os
import shutil
import stat
import subprocess
import warnings

import numpy as np
import pytest
import zarr

from core import core_of
from helpers import array_files, delete_array, make_store
from mounting import mounted
from zarrfs.errors import ZarrfsError

RENAME_NOREPLACE = 1  # renameat2's flag, which mv -n sends


def open_group(root, consolidated=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if consolidated:
            return zarr.open_consolidated(str(root))
        return zarr.open_group(str(root), mode="r")


def members(root, consolidated=False):
    return sorted(name for name, _ in open_group(root, consolidated).members(max_depth=None))


def raises(code, action, *args):
    with pytest.raises(OSError) as raised:
        action(*args)
    assert raised.value.errno == code, raised.value
    return raised.value


def write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("consolidated", [False, True])
def test_groups_are_made_and_removed(tmp_path, zarr_format, consolidated):
    root = make_store(tmp_path / "s.zarr", zarr_format, consolidated)
    with mounted(root, tmp_path) as m:
        os.mkdir(m / "new")
        os.mkdir(m / "sub" / "deeper")
        assert os.path.isdir(m / "new") and "zarr.json" in os.listdir(m / "new") or ".zgroup" in os.listdir(m / "new")
        for reader_sees in (members(root), members(root, consolidated)):
            assert {"new", "sub/deeper"} <= set(reader_sees)
        assert open_group(root)["new"].metadata.zarr_format == zarr_format
        raises(errno.EEXIST, os.mkdir, m / "sub")
        raises(errno.EEXIST, os.mkdir, m / "a.bin")  # the collision rule: an array's file names are taken
        raises(errno.EINVAL, os.mkdir, m / "__reserved")
        raises(errno.ENOTEMPTY, os.rmdir, m / "sub")
        os.rmdir(m / "sub" / "deeper")
        os.rmdir(m / "new")
        raises(errno.ENOTDIR, os.rmdir, m / "a.bin")
        assert not os.path.exists(m / "new")
    assert "new" not in members(root, consolidated) and "sub/deeper" not in members(root, consolidated)
    assert not (root / "new").exists()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_cp_of_an_npy_makes_an_array(tmp_path, zarr_format):
    root = make_store(tmp_path / "s.zarr", zarr_format)
    frames = (np.arange(40 * 300 * 500, dtype="<u2") % 6007).reshape(40, 300, 500)
    np.save(tmp_path / "frames.npy", frames)
    with core_of(root, tmp_path) as c:
        c.write("/sub/frames.npy", (tmp_path / "frames.npy").read_bytes())
        assert {"frames.bin", "frames.json", "frames.npy"} <= set(c.listdir("/sub"))
        assert np.array_equal(np.frombuffer(c.read_bytes("/sub/frames.bin"), "<u2").reshape(frames.shape), frames)
        sidecar = json.loads(c.read_text("/sub/frames.json"))
        assert sidecar["shape"] == [40, 300, 500] and sidecar["dtype"] == "<u2"
        assert c.read_bytes("/sub/frames.npy") == (tmp_path / "frames.npy").read_bytes()
    z = open_group(root)["sub/frames"]
    assert np.array_equal(z[...], frames)
    assert z.chunks == (3, 300, 500)  # about 1 MiB, along the last axes
    assert z.metadata.zarr_format == zarr_format
    compressor = z.compressors[0] if zarr_format == 3 else z.metadata.compressor
    assert "zstd" in type(compressor).__name__.lower()


def test_an_npy_that_is_not_one_or_is_cut_short_makes_nothing(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    np.save(tmp_path / "x.npy", np.arange(1000, dtype="<f8"))
    data = (tmp_path / "x.npy").read_bytes()
    with core_of(root, tmp_path) as c:
        c.write("/half.npy", data[:5000])
        assert not c.exists("/half.bin")
        raises(errno.EINVAL, c.write, "/text.npy", b"not numpy at all")
        np.save(tmp_path / "big.npy", np.arange(4, dtype=">f8"))
        raises(errno.EINVAL, c.write, "/big.npy", (tmp_path / "big.npy").read_bytes())
        raises(errno.EPERM, c.write, "/notes.txt", b"hello")
        assert sorted(n for n in c.listdir() if not n.startswith("a.")) == ["sub", "zarr.h5", "zarr.json", "zarr.nc"]
        assert "copy incomplete" in c.log()
    assert members(root) == ["a", "sub"]
    assert not [n for n in os.listdir(root) if n.startswith(".zarrfs")]


@pytest.mark.parametrize("consolidated", [False, True])
def test_a_written_sidecar_makes_an_empty_array(tmp_path, consolidated):
    root = make_store(tmp_path / "s.zarr", 3, consolidated)
    spec = {"shape": [6, 8], "dtype": "<f4", "chunk_shape": [4, 4], "inner_chunk_shape": [2, 2], "fill_value": 1.5,
            "dimension_names": ["y", "x"], "attributes": {"units": "K"}}
    with core_of(root, tmp_path) as c:
        c.write("/sub/t.json", json.dumps(spec).encode())
        assert np.all(np.frombuffer(c.read_bytes("/sub/t.bin"), "<f4") == 1.5)
        raises(errno.EINVAL, c.write, "/u.json", json.dumps({"shape": [3], "dtype": "<q9"}).encode())
        raises(errno.EINVAL, c.write, "/v.json", json.dumps({"shape": [3]}).encode())
        raises(errno.EINVAL, c.write, "/w.json", json.dumps({"shape": [3], "dtype": "<i2",
                                                             "codecs": [{"name": "nonesuch"}]}).encode())
        raises(errno.EINVAL, c.write, "/x.json", b"{not json")
        assert "dtype '<q9'" in c.log() and "nonesuch" in c.log()
        for name in ("u", "v", "w", "x"):
            assert not c.exists(f"/{name}.bin")
        c.copy("/sub/t.json", "/like_t.json")
    t = open_group(root, consolidated)["sub/t"]
    assert t.shape == (6, 8) and t.dtype == np.float32 and np.all(t[...] == 1.5)
    assert t.attrs["units"] == "K" and t.metadata.dimension_names == ("y", "x")
    assert t.chunks == (2, 2) and t.shards == (4, 4)
    like = open_group(root)["like_t"]
    assert like.shape == (6, 8) and like.shards == (4, 4) and like.attrs["units"] == "K"
    assert members(root) == members(root, consolidated) == ["a", "like_t", "sub", "sub/t"]


def test_bytes_refused_at_close_are_not_shown_while_a_duplicate_descriptor_is_open(tmp_path):
    """The kernel sends RELEASE only when the last duplicate of a descriptor closes (and later than
    close() returns): a refused sidecar must show the stored one again at once."""
    root = make_store(tmp_path / "s.zarr", 3, False)
    with mounted(root, tmp_path) as m:
        stored = (m / "a.json").read_bytes()
        fd = os.open(m / "a.json", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, stored.replace(b'"shape"', b'"shape_"'))
        duplicate = os.dup(fd)
        with pytest.raises(OSError) as info:
            os.close(fd)
        assert info.value.errno == errno.EINVAL
        try:
            assert (m / "a.json").read_bytes() == stored
        finally:
            os.close(duplicate)
        assert (m / "a.json").read_bytes() == stored


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("consolidated", [False, True])
def test_attributes_are_edited_in_every_way(tmp_path, zarr_format, consolidated):
    root = make_store(tmp_path / "s.zarr", zarr_format, consolidated)
    with core_of(root, tmp_path) as c:
        sidecar = json.loads(c.read_text("/a.json"))
        sidecar["attributes"] = {"units": "m", "scale": [1, 2]}
        c.write("/a.json", json.dumps(sidecar, indent=1).encode())
        c.setxattr("/a.bin", "user.zarr.attr.offset", b"0.5")
        c.setxattr("/a.npy", "user.zarr.attr.name", b"plain text")
        c.removexattr("/a.bin", "user.zarr.attr.scale")
        assert json.loads(c.read_text("/a.json"))["attributes"] == {"units": "m", "offset": 0.5, "name": "plain text"}
        c.setxattr("/sub", "user.zarr.attr.kind", b'"raw"')
        changed = dict(sidecar, shape=[5])
        raises(errno.EINVAL, c.write, "/a.json", json.dumps(changed).encode())
        assert "shape: only attributes can be changed" in c.log()
        if zarr_format == 3:
            doc = json.loads(c.read_text("/sub/zarr.json"))
            doc["attributes"]["title"] = "renamed"
            c.write("/sub/zarr.json", json.dumps(doc).encode())
        else:
            attrs = json.loads(c.read_text("/sub/.zattrs"))
            c.write("/sub/.zattrs", json.dumps(dict(attrs, title="renamed")).encode())
        assert json.loads(c.getxattr("/sub", "user.zarr.attributes"))["title"] == "renamed"
    for group in (open_group(root), open_group(root, consolidated)):
        assert dict(group["a"].attrs) == {"units": "m", "offset": 0.5, "name": "plain text"}
        assert dict(group["sub"].attrs) == {"title": "renamed", "kind": "raw"}
        assert np.array_equal(group["a"][...], np.arange(4))


def test_editors_save_through_a_temporary_and_a_rename(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    with mounted(root, tmp_path) as m:
        text = (m / "a.json").read_text()
        subprocess.run(["sed", "-i", 's/"attributes": {}/"attributes": {"by": "sed"}/', str(m / "a.json")], check=True)
        temporary = m / ".goutputstream-ABC123"  # gedit's way
        write(temporary, text.replace('"attributes": {}', '"attributes": {"by": "gedit"}').encode())
        os.rename(temporary, m / "a.json")
        assert json.loads((m / "a.json").read_text())["attributes"] == {"by": "gedit"}
        write(m / "new.json~", b'{"shape": [2], "dtype": "|u1"}')  # a temporary renamed onto a new sidecar
        os.rename(m / "new.json~", m / "new.json")
        assert np.fromfile(m / "new.bin", "u1").tolist() == [0, 0]
        vim = shutil.which("vim") or shutil.which("vim.tiny")
        for backupcopy in ("auto", "yes"):  # vim as it comes (a probe file, then a rename or a copy)
            subprocess.run([vim, "-u", "NONE", "-N", "-n", "-es", "-c", f"set backupcopy={backupcopy}", "-c",
                            f'%s/"by": "[a-z-]*"/"by": "vim-{backupcopy}"/', "-c", "wq", str(m / "a.json")],
                           check=True, timeout=60)
            assert json.loads((m / "a.json").read_text())["attributes"] == {"by": f"vim-{backupcopy}"}
        subprocess.run(["ed", "-s", str(m / "a.json")], input=b',s/"vim-yes"/"ed"/\nw\nq\n', check=True)
        assert json.loads((m / "a.json").read_text())["attributes"] == {"by": "ed"}
        write(m / "4913", b"")  # vim's probe
        os.unlink(m / "4913")
        assert not (m / "4913").exists()
    assert dict(open_group(root)["a"].attrs) == {"by": "ed"} and open_group(root)["new"].shape == (2,)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("consolidated", [False, True])
def test_rm_of_all_its_files_deletes_an_array_and_of_some_hides_them(tmp_path, zarr_format, consolidated):
    root = make_store(tmp_path / "s.zarr", zarr_format, consolidated)
    with mounted(root, tmp_path) as m:
        for name in ("a.bin", "a.npy", "a.bin.hdr", "zarr.json" if zarr_format == 3 else ".zgroup"):
            os.unlink(m / name)  # made from the node: hidden, and nothing is deleted
            assert name not in os.listdir(m.path)
        raises(errno.ENOENT, os.stat, m / "a.bin.hdr")  # (not a.bin: a miss is kept a second, and it is made again)
        assert json.loads((m / "a.json").read_text())["shape"] == [4]  # the files not deleted are shown
        assert open_group(root, consolidated)["a"][...].tolist() == [0, 1, 2, 3]
        delete_array(m.path, "a")  # rm a.*: the files left, the last deleting the array
        assert not [n for n in os.listdir(m.path) if n.startswith("a.")]
        raises(errno.ENOENT, os.stat, m / "a.json")
        np.save(tmp_path / "a.npy", np.arange(3, dtype="<i8"))
        subprocess.run(["cp", str(tmp_path / "a.npy"), str(m.path)], check=True)  # the name is free again
        assert np.fromfile(m / "a.bin", "<i8").tolist() == [0, 1, 2]  # and every file of the new array is shown
    assert members(root, consolidated) == ["a", "sub"]
    assert open_group(root, consolidated)["a"].dtype == np.int64
    assert sorted(os.listdir(root / "a")) == (["c", "zarr.json"] if zarr_format == 3 else [".zarray", ".zattrs", "0"])


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("consolidated", [False, True])
def test_mv_renames_and_moves_arrays_and_groups(tmp_path, zarr_format, consolidated):
    root = make_store(tmp_path / "s.zarr", zarr_format, consolidated)
    with core_of(root, tmp_path) as c:
        c.rename("/a.bin", "/b.bin")
        assert np.frombuffer(c.read_bytes("/b.bin"), "<i4").tolist() == [0, 1, 2, 3]
        raises(errno.ENOENT, c.stat, "/a.json")
        c.rename("/b.json", "/sub/c.json")  # through any of its files, into another group
        raises(errno.EINVAL, c.rename, "/sub/c.bin", "/sub/d.json")  # the suffix stays
        c.mkdir("/other")
        raises(errno.EEXIST, c.rename, "/other", "/sub")
        raises(errno.EEXIST, c.rename, "/other", "/sub", RENAME_NOREPLACE)  # mv -n -T
        assert stat.S_ISDIR(c.stat("/other")["st_mode"])
        c.rename("/sub", "/other/moved")
        assert np.frombuffer(c.read_bytes("/other/moved/c.bin"), "<i4").tolist() == [0, 1, 2, 3]
        raises(errno.EINVAL, c.rename, "/other", "/other/moved/inside")
        raises(errno.EPERM, c.rename, "/zarr.json" if zarr_format == 3 else "/.zgroup", "/x.json")
    for group in (open_group(root), open_group(root, consolidated)):
        assert sorted(n for n, _ in group.members(max_depth=None)) == ["other", "other/moved", "other/moved/c"]
        assert dict(group["other/moved"].attrs) == {"title": "inner"}
        assert np.array_equal(group["other/moved/c"][...], np.arange(4))


def test_the_no_trash_marker_is_no_node_to_edit(tmp_path):
    """.Trash-UID is looked up with the root's node, which must stay out of its reach: setting
    an attribute on it wrote into the root's zarr.json, and listxattr showed the root's."""
    store = make_store(tmp_path / "s.zarr")
    zarr.open_group(str(store), mode="r+").attrs["title"] = "root"
    before = (store / "zarr.json").read_bytes()
    with core_of(store, tmp_path) as c:
        marker = f"/.Trash-{os.getuid()}"
        assert c.exists(marker) and c.getxattr("/", "user.zarr.attributes")
        raises(errno.EPERM, c.setxattr, marker, "user.zarr.attr.x", b"1")
        raises(errno.EPERM, c.removexattr, marker, "user.zarr.attr.title")
        assert c.listxattr(marker) == []
        raises(errno.ENODATA, c.getxattr, marker, "user.zarr.attributes")
        raises(errno.EPERM, c.unlink, marker)
        raises(errno.EPERM, c.rename, marker, "/elsewhere")
        assert c.exists(marker) and not c.exists("/elsewhere")
    assert (store / "zarr.json").read_bytes() == before and open_group(store).attrs["title"] == "root"


def test_a_read_only_mount_refuses_every_change(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    np.save(tmp_path / "x.npy", np.arange(3))
    with core_of(root, tmp_path, "ro") as c:
        raises(errno.EROFS, c.mkdir, "/new")
        raises(errno.EROFS, c.rmdir, "/sub")
        raises(errno.EROFS, c.unlink, "/a.bin")
        raises(errno.EROFS, c.rename, "/a.bin", "/b.bin")
        raises(errno.EROFS, c.rename, "/sub", "/sub2")
        raises(errno.EROFS, c.write, "/x.npy", (tmp_path / "x.npy").read_bytes())
        raises(errno.EROFS, c.write, "/y.json", b'{"shape": [1], "dtype": "|u1"}')
        raises(errno.EROFS, c.write, "/a.json", c.read_bytes("/a.json"))
        raises(errno.EROFS, c.setxattr, "/a.bin", "user.zarr.attr.k", b"1")
        raises(errno.EROFS, c.removexattr, "/a.bin", "user.zarr.attr.k")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before


def test_a_file_manager_flow_end_to_end(tmp_path):
    """New folder, copy an .npy in, rename it, edit its sidecar's attributes as gedit saves
    (temporary + rename), delete it, remove the folder: with GIO, as a file manager does it."""
    root = make_store(tmp_path / "s.zarr")
    data = np.arange(30 * 100, dtype="<f4").reshape(30, 100)
    np.save(tmp_path / "f.npy", data)

    def gio(*args):
        subprocess.run(["gio", *map(str, args)], check=True, capture_output=True)

    with mounted(root, tmp_path) as m:
        gio("mkdir", m / "New Folder")
        gio("copy", tmp_path / "f.npy", m / "New Folder")
        gio("rename", m / "New Folder" / "f.bin", "g.bin")
        gio("rename", m / "New Folder", "exp")
        sidecar = json.loads((m / "exp" / "g.json").read_text())
        write(m / "exp" / ".goutputstream-X1Y2Z3", json.dumps(dict(sidecar, attributes={"note": "hi"})).encode())
        os.rename(m / "exp" / ".goutputstream-X1Y2Z3", m / "exp" / "g.json")
        assert dict(open_group(root)["exp/g"].attrs) == {"note": "hi"}
        assert np.array_equal(open_group(root)["exp/g"][...], data)
        result = subprocess.run(["gio", "trash", str(m / "exp" / "g.bin")], capture_output=True, text=True)
        assert result.returncode != 0 and (m / "exp" / "g.bin").exists()  # no trash: it offers delete instead
        gio("remove", *array_files(m / "exp", "g"))
        gio("remove", m / "exp")
        assert "exp" not in os.listdir(m.path)
    assert members(root) == ["a", "sub"]
    assert not [p for p in root.rglob("*") if p.name.startswith(".") and p.name not in (".zgroup", ".zattrs")]


def test_an_array_open_when_moved_or_deleted_keeps_what_was_written_and_then_goes_stale(tmp_path):
    root = make_store(tmp_path / "s.zarr")
    with mounted(root, tmp_path) as m:
        fd = os.open(m / "a.bin", os.O_RDWR)
        try:
            os.pwrite(fd, np.array([7, 8], "<i4").tobytes(), 0)  # dirty, not yet stored
            os.rename(m / "a.bin", m / "b.bin")
            raises(errno.ESTALE, os.pwrite, fd, b"\0\0\0\0", 8)
        finally:
            os.close(fd)
        assert np.fromfile(m / "b.bin", "<i4").tolist() == [7, 8, 2, 3]
        fd = os.open(m / "b.bin", os.O_RDWR)
        try:
            os.pwrite(fd, b"\1\0\0\0", 0)
            delete_array(m.path, "b")
            raises(errno.ESTALE, os.pwrite, fd, b"\0\0\0\0", 8)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # a read must reach the daemon
            raises(errno.ESTALE, os.pread, fd, 4, 12)  # the kernel passes the daemon's ESTALE on: with
            # AUTO_INVAL_DATA (no longer asked where only the mount writes) it reported EIO
        finally:
            os.close(fd)
        assert "b.bin" not in os.listdir(m.path)
    assert members(root) == ["sub"] and not (root / "b").exists()


def test_xarray_sees_attributes_edited_through_the_file_system(tmp_path):
    import xarray as xr

    root = make_store(tmp_path / "s.zarr")
    with core_of(root, tmp_path) as c:
        c.write("/sub/t.json", json.dumps({"shape": [3, 2], "dtype": "<f8", "dimension_names": ["y", "x"],
                                           "fill_value": 2.0}).encode())
        c.setxattr("/sub/t.bin", "user.zarr.attr.units", b"kelvin")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dataset = xr.open_zarr(str(root), group="sub", consolidated=False)
        assert dataset["t"].attrs["units"] == "kelvin" and dataset["t"].dims == ("y", "x")
        assert float(dataset["t"].sum()) == 12.0


def test_a_file_being_written_reads_back_what_was_written(tmp_path):
    """A sidecar opened read-write and written, then read before close (an editor checking its
    save): the bytes written, through the binding's read path."""
    root = make_store(tmp_path / "s.zarr")
    text = json.dumps({"shape": [3], "dtype": "<u2"}).encode()
    with mounted(root, tmp_path) as m:
        fd = os.open(m / "new.json", os.O_RDWR | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, text)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            assert os.pread(fd, 4096, 0) == text
        finally:
            os.close(fd)
        assert np.fromfile(m / "new.bin", "<u2").tolist() == [0, 0, 0]


@pytest.mark.parametrize("order", ["data first", "data last", "data in the middle"])
def test_deleting_every_file_of_an_array_in_any_order_deletes_it_without_an_error(tmp_path, order):
    """A file manager deletes a selection one file at a time, in its own order, and pcmanfm
    stats each file just before deleting it: every stat and unlink succeeds, and the array is
    gone with the last (stats failed with ENOENT once NAME.bin had deleted the array)."""
    root = make_store(tmp_path / "s.zarr")
    with mounted(root, tmp_path) as m:
        names = [p.name for p in array_files(m.path, "a")]
        assert len(names) > 3 and "a.bin" in names
        names.remove("a.bin")
        names.insert({"data first": 0, "data last": len(names), "data in the middle": 2}[order], "a.bin")
        for name in names:  # as pcmanfm does (GIO's query_info, then delete), one file at a time
            subprocess.run(["gio", "info", "-a", "standard::type", str(m / name)], check=True, capture_output=True)
            subprocess.run(["gio", "remove", str(m / name)], check=True)
            assert (name == names[-1]) != ("a" in open_group(root))  # the array goes with its last file
        assert not [n for n in os.listdir(m.path) if n.startswith("a.")]
        raises(errno.ENOENT, os.unlink, m / "a.json")
    assert members(root) == ["sub"]


def test_a_folder_deletes_as_a_file_manager_deletes_it(tmp_path):
    """Thunar and GIO delete a folder's files depth first, documents and group files included,
    then the folder; one view deleted alone is hidden and deletes nothing."""
    root = make_store(tmp_path / "s.zarr")
    zarr.open_group(str(root / "sub"), mode="a").create_array("b", shape=(2,), dtype="f4")[...] = 1
    zarr.open_group(str(root / "sub"), mode="a").create_group("inner")
    with mounted(root, tmp_path) as m:
        for directory, folders, files in os.walk(m / "sub", topdown=False):
            subprocess.run(["gio", "remove", *(os.path.join(directory, n) for n in files)], check=True)
            for folder in folders:
                subprocess.run(["gio", "remove", os.path.join(directory, folder)], check=True)
        subprocess.run(["gio", "remove", str(m / "sub")], check=True)
        assert not (m / "sub").exists() and not (root / "sub").exists()
        subprocess.run(["gio", "remove", str(m / "a.vrt")], check=True)  # one view alone: hidden, nothing deleted
        assert np.fromfile(m / "a.bin", "<i4").tolist() == [0, 1, 2, 3] and not (m / "a.vrt").exists()
    assert members(root) == ["a"]


@pytest.mark.parametrize("consolidated", [False, True])
def test_an_edit_refused_by_the_store_keeps_the_files_hidden_at_its_target(tmp_path, consolidated):
    """Another program may take a name between the mount's check and the edit: the store then
    refuses it (EEXIST), and the node already there keeps the files a person deleted from it."""
    root = make_store(tmp_path / "s.zarr", 3, consolidated)
    with core_of(root, tmp_path) as c:
        c.unlink("/a.json")  # hidden: array a stays
        editor = c.fs.edits.editor
        for edit, args in ((editor.make_group, ("a",)), (editor.move, ("sub", "a"))):
            with pytest.raises(ZarrfsError) as refused:
                edit(*args)
            assert refused.value.errno == errno.EEXIST
            raises(errno.ENOENT, c.stat, "/a.json")
            assert "a.json" not in c.listdir("/")
        assert c.stat("/a.bin")["st_size"] == 16
    assert members(root, consolidated) == ["a", "sub"]
