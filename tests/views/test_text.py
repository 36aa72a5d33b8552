"""Variable-length strings and bytes shown as NAME.txt: one escaped element per line, C order."""

import errno
import json
import os
import subprocess
import warnings

import numcodecs
import numpy as np
import pytest
import zarr

from core import core_of
from mounting import mounted
from zarrfs.views.text import escape, render, unescape


@pytest.mark.parametrize("element, line", [
    ("plain", "plain"), ("two\nlines", "two\\nlines"), ("back\\slash", "back\\\\slash"), ("çé€", "çé€"),
    (b"ok", "ok"), (b"\xff\xfeA\n", "\\xff\\xfeA\\n"), (b"caf\xc3\xa9", "café"), (b"a\\xff", "a\\\\xff"), ("", ""),
])
def test_escapes(element, line):
    assert escape(element) == line
    assert unescape(line) == (element if isinstance(element, bytes) else element.encode())


def test_render_is_one_line_per_element_in_c_order():
    elements = np.array([["a", "b\nc"], ["", "d"]], dtype=object)
    assert render(elements, "x") == b"a\nb\\nc\n\nd\n"
    assert render(np.empty((0, 3), dtype=object), "x") == b""


def cities(n):
    """City-like names: non-ASCII, a few with a newline or a backslash, as real lists have."""
    names = [f"Ciudad {i} São Paulo-{i % 97}" for i in range(n)]
    names[5], names[17], names[40000] = "Line\nbreak", "Back\\slash", "Zürich"
    return np.array(names, dtype=object)


def test_a_48k_entry_string_array_through_a_mount(tmp_path):
    values = cities(47_868)
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.create_array("cities", shape=values.shape, chunks=(5000,), dtype=str)[...] = values
        root.create_array("raw", shape=(2, 2), chunks=(1, 2), dtype="bytes")[...] = np.array(
            [[b"\xff", b"ok"], [b"a\nb", b""]], dtype=object)
        v2 = zarr.create_array(str(tmp_path / "t.zarr" / "old"), shape=(3,), chunks=(2,), dtype=str, zarr_format=2)
        v2[...] = np.array(["x", "y\\z", "é"], dtype=object)
    with mounted(tmp_path / "t.zarr", tmp_path, "ro") as m:
        assert {"cities.txt", "cities.json", "raw.txt", "old.txt"} <= set(os.listdir(m.path))
        assert "cities.bin" not in os.listdir(m.path)
        wc = subprocess.run(["wc", "-l", str(m / "cities.txt")], capture_output=True, text=True, check=True)
        assert int(wc.stdout.split()[0]) == 47_868
        grep = subprocess.run(["grep", "-n", "Zürich", str(m / "cities.txt")], capture_output=True, text=True)
        assert grep.stdout.strip() == "40001:Zürich"
        lines = (m / "cities.txt").read_text(encoding="utf-8").split("\n")
        assert lines[-1] == "" and [unescape(line).decode() for line in lines[:-1]] == list(values)
        assert os.stat(m / "cities.txt").st_size == len("\n".join(lines).encode())  # the true size
        wc = subprocess.run(["wc", "-c", str(m / "cities.txt")], capture_output=True, text=True, check=True)
        assert int(wc.stdout.split()[0]) == len("\n".join(lines).encode())
        side = json.loads((m / "cities.json").read_text())
        assert side["text_file"] == "cities.txt" and side["data_file"] is None and side["dtype"] is None
        assert side["shape"] == [47_868] and "one element per line" in side["text_format"]
        assert (m / "raw.txt").read_bytes() == b"\\xff\nok\na\\nb\n\n"
        assert (m / "old.txt").read_text() == "x\ny\\\\z\né\n"
        assert json.loads((m / "old.json").read_text())["zarr_format"] == 2
        with pytest.raises(OSError) as info:
            open(m / "cities.txt", "r+b")
        assert info.value.errno in (errno.EACCES, errno.EROFS)


def splice_all(path) -> bytes:
    """The file's bytes as GIO copies them: splice(2) into a pipe until it returns 0."""
    out, (r, w) = bytearray(), os.pipe()
    with open(path, "rb") as f:
        while n := os.splice(f.fileno(), w, 1 << 16):
            out += os.read(r, n)
    os.close(r), os.close(w)
    return bytes(out)


def test_splice_gio_copy_and_tar_copy_a_text_file_whole(tmp_path):
    """GIO copies with splice(), which stops at the size the file shows: a size of 0 made an
    empty copy (Thunar's copy and paste, `gio copy`); tar archives st_size bytes."""
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.create_array("labels", shape=(4,), chunks=(2,), dtype=str)[...] = np.array(
            ["land", "sea ice", "open water", "café"], dtype=object)
    expected = "land\nsea ice\nopen water\ncafé\n".encode()
    with mounted(tmp_path / "t.zarr", tmp_path, "ro") as m:
        assert os.stat(m / "labels.txt").st_size == len(expected)
        assert splice_all(m / "labels.txt") == expected
        (tmp_path / "copy").mkdir()
        subprocess.run(["gio", "copy", str(m / "labels.txt"), str(tmp_path / "copy")], check=True)
        assert (tmp_path / "copy" / "labels.txt").read_bytes() == expected
        subprocess.run(["tar", "-cf", str(tmp_path / "t.tar"), "-C", str(m.path), "labels.txt"], check=True)
        subprocess.run(["tar", "-xf", str(tmp_path / "t.tar"), "-C", str(tmp_path / "copy"), "--overwrite"],
                       check=True)
        assert (tmp_path / "copy" / "labels.txt").read_bytes() == expected


def test_a_text_file_of_any_size_lists_the_size_it_reads_before_it_is_opened(tmp_path):
    """An array of more than SIZED_ELEMENTS (262,144) elements showed size 0 until opened: GIO
    then typed it as empty and backups copied it again. Its size is now added up at the first
    stat, a slab of chunks at a time."""
    from zarrfs.views import text as textview
    rows = textview.SIZED_ELEMENTS // 64 + 3  # more elements than SIZED_ELEMENTS, in a ragged last chunk
    values = labels(rows * 64, 12, 3).reshape(rows, 64)
    values[0, 0], values[1, 5], values[-1, -1] = "two\nlines", "back\\slash", ""
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.create_array("names", shape=values.shape, chunks=(1000, 16), dtype=str)[...] = values
        root.create_array("raw", shape=(rows * 64,), chunks=(70_000,), dtype="bytes")[...] = np.array(
            [b"\xff" * (i % 3) + b"x" for i in range(rows * 64)], dtype=object)
    with core_of(tmp_path / "t.zarr", tmp_path, "ro") as c:
        listed = {name: c.stat(f"/{name}")["st_size"] for name in ("names.txt", "raw.txt")}
        assert listed["names.txt"] == len(render(values, "names")) > 0
        for name, size in listed.items():
            data = c.read_bytes(f"/{name}")
            assert len(data) == size and data.count(b"\n") == rows * 64, name
        assert b"\\xff\\xffx\n" in c.read_bytes("/raw.txt")


def test_a_listing_decodes_no_string_array_beyond_its_bound_and_a_stat_by_name_counts_it(tmp_path, monkeypatch,
                                                                                         caplog):
    """readdir gives every entry's size, so `ls` of a folder of large string arrays would decode
    each whole: beyond LISTED_ELEMENTS a listing reads no chunk (one that cannot be decoded is
    never noticed) and leaves the file out, where it showed size 0 until opened; a stat by name
    counts it, a listing then shows it with that size, and one that cannot be made is refused
    by name as its open is."""
    from zarrfs.engine.chunk_cache import ChunkCache
    from zarrfs.errors import CorruptChunkError
    from zarrfs.fs.hierarchy import Hierarchy
    from zarrfs.stores.local import LocalStore
    from zarrfs.views import text as textview

    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)
    monkeypatch.setattr(textview, "LISTED_ELEMENTS", 8)
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, n in (("small", 6), ("large", 20)):
            root.create_array(name, shape=(n,), chunks=(4,), dtype=str)[...] = np.array(list("abcdefghijklmnopqrst"[:n]),
                                                                                         dtype=object)
    store, cache = LocalStore(str(tmp_path / "t.zarr")), ChunkCache(1 << 20)
    hierarchy, texts = Hierarchy(store, ()), textview.Texts()
    assert texts.listed(store, hierarchy.lookup("/small.txt").node, cache) == 12  # a slab pass: 6 lines of 2 bytes
    large = hierarchy.lookup("/large.txt").node
    assert texts.listed(store, large, cache) is None  # left out of a listing
    assert texts.size(store, large, cache) == 40  # counted by name, past the listing's bound
    assert texts.text(store, large, cache) == "".join(f"{c}\n" for c in "abcdefghijklmnopqrst").encode()
    assert texts.listed(store, large, cache) == 40  # known: listed with it
    for chunk in (tmp_path / "t.zarr" / "large" / "c").iterdir():
        chunk.write_bytes(b"not a chunk")
    large = Hierarchy(store, ()).lookup("/large.txt").node  # another mount's first listing
    texts = textview.Texts()
    assert texts.listed(store, large, ChunkCache(1 << 20)) is None
    assert "large" not in caplog.text  # no chunk was read
    with pytest.raises(CorruptChunkError, match="chunk large/c/0"):
        texts.size(store, large, ChunkCache(1 << 20))


def test_the_text_limit_is_of_bytes_at_a_stat_and_at_an_open(tmp_path, monkeypatch):
    """The limit counted characters when rendering and bytes when adding a size up at a stat, so
    a text of more bytes than the limit in fewer characters (non-ASCII) listed 0 and opened
    whole. Both count bytes: within it, the size listed is the bytes read; past it, a listing
    leaves the file out and a stat by name refuses it as the open does."""
    from zarrfs.engine.chunk_cache import ChunkCache
    from zarrfs.errors import UnsupportedError
    from zarrfs.fs.hierarchy import Hierarchy
    from zarrfs.stores.local import LocalStore
    from zarrfs.views import text as textview

    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)  # a stat adds up the size a slab at a time
    monkeypatch.setattr(textview, "TEXT_LIMIT", 100)
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, width in (("within", 4), ("beyond", 5)):  # 10 lines of 9 bytes; of 11 bytes, 6 characters
            root.create_array(name, shape=(10,), chunks=(4,), dtype=str)[...] = np.array(["é" * width] * 10, dtype=object)
    store = LocalStore(str(tmp_path / "t.zarr"))
    hierarchy = Hierarchy(store, ())
    within, beyond = hierarchy.lookup("/within.txt").node, hierarchy.lookup("/beyond.txt").node
    assert textview.Texts().size(store, within, ChunkCache(1 << 20)) == 90
    assert textview.Texts().listed(store, within, ChunkCache(1 << 20)) == 90
    assert len(textview.Texts().text(store, within, ChunkCache(1 << 20))) == 90
    assert textview.Texts().listed(store, beyond, ChunkCache(1 << 20)) is None
    with pytest.raises(UnsupportedError, match="limit of 100 bytes"):
        textview.Texts().size(store, beyond, ChunkCache(1 << 20))
    with pytest.raises(UnsupportedError, match="limit of 100 bytes"):
        textview.Texts().text(store, beyond, ChunkCache(1 << 20))
    with pytest.raises(UnsupportedError, match="limit of 100 bytes"):
        render(np.array(["é" * 5] * 10, dtype=object), "beyond")


def labels(n, width, seed):
    """Labels as real tables hold them: `width` characters, some non-ASCII, all different."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzéü_ 0123456789"))
    body = rng.choice(letters, (n, width - 8)).view(f"<U{width - 8}").reshape(-1)
    return np.array([f"{i:08d}"[-8:] + s for i, s in enumerate(body)], dtype=object)


def test_zarr_pythons_default_string_and_bytes_arrays_read_whole_in_one_chunk(tmp_path):
    """zarr-python's dtype=str (vlen-utf8 and zstd) and bytes (vlen-bytes and zstd) arrays, each
    one chunk: a chunk of variable-length elements holds 4 bytes and the value per element, far
    more than the 8 bytes per element the decoded-size bound once assumed (EIO)."""
    arrays = {"short": labels(10**6, 12, 1), "labels": labels(10**5, 30, 2), "long": labels(10**5, 300, 3)}
    raw = np.array([bytes(range(i % 200, i % 200 + 40)) for i in range(10**5)], dtype=object)
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, values in arrays.items():
            root.create_array(name, shape=values.shape, chunks=values.shape, dtype=str)[...] = values
        root.create_array("raw", shape=raw.shape, chunks=raw.shape, dtype="bytes")[...] = raw
        v2 = zarr.create_array(str(tmp_path / "t.zarr" / "old"), shape=(10**5,), chunks=(10**5,), dtype=str,
                               zarr_format=2)
        v2[...] = arrays["labels"]
        v2 = zarr.create_array(str(tmp_path / "t.zarr" / "filtered"), shape=(10**5,), chunks=(10**5,), dtype=str,
                               zarr_format=2, filters=[numcodecs.VLenUTF8(), numcodecs.Zstd(1)], compressors=None)
        v2[...] = arrays["labels"]  # v2 filters: the compressor as a filter after the vlen one
    with mounted(tmp_path / "t.zarr", tmp_path, "ro") as m:
        for name, values in [*arrays.items(), ("old", arrays["labels"]), ("filtered", arrays["labels"])]:
            expected = zarr.open_array(str(tmp_path / "t.zarr" / name))[...]
            assert list(expected) == list(values)
            text = (m / f"{name}.txt").read_bytes()
            assert os.stat(m / f"{name}.txt").st_size == len(text)  # what a file manager's copy takes
            lines = text.decode().split("\n")
            assert lines[-1] == "" and [unescape(line).decode() for line in lines[:-1]] == list(values), name
        (tmp_path / "copy").mkdir()  # a file manager's paste
        subprocess.run(["gio", "copy", str(m / "labels.txt"), str(tmp_path / "copy")], check=True)
        assert (tmp_path / "copy" / "labels.txt").read_bytes() == (m / "labels.txt").read_bytes()
        lines = (m / "raw.txt").read_bytes().decode().split("\n")
        assert [unescape(line) for line in lines[:-1]] == list(zarr.open_array(str(tmp_path / "t.zarr" / "raw"))[...])
        assert "ERROR" not in m.settled_log()
