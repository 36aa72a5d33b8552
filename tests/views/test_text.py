"""Variable-length strings and bytes shown as NAME.txt: one escaped element per line, C order."""

import errno
import json
import os
import subprocess
import warnings

import numpy as np
import pytest
import zarr

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
        assert os.stat(m / "cities.txt").st_size == 0  # as /proc files: listing decodes nothing
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
