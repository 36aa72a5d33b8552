"""A listed NAME.txt shows only its true size: where a listing cannot tell it (past its bounds,
a chunk that cannot be decoded, a remote store past -o timeout), the file is left out of the
listing and stays reachable by name, where a stat counts it (issue #40)."""

import errno
import json
import os
import stat
import subprocess
import threading
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

from core import core_of
from mounting import mounted, wait_for
from servers.memory_store import MemoryStore
from zarrfs.engine import read_budget
from zarrfs.errors import StoreError
from zarrfs.stores.contract import Capabilities
from zarrfs.views import text as textview
from zarrfs.views.text import escape

BIG, BIG_CHUNK = 270_000, 16  # more elements than a listing renders, in 16,875 chunks: more than it reads
STORED = {0: "first", 1: "two\nlines", 2: "back\\slash", BIG - 1: "last é"}  # the rest never written: the fill


def text_of(array) -> bytes:
    """NAME.txt of an array as docs/views.md says it: escaped elements, one line each, C order."""
    return b"".join(escape(value).encode() + b"\n" for value in np.asarray(array[...], dtype=object).reshape(-1))


def strings(group, name: str, shape: tuple, chunks: tuple, values: dict, **kwargs):
    """A string array with `values` (index -> value; `...` for every element: a slice is no
    dict key before Python 3.12, and CI runs these tests on 3.11 too)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = group.create_array(name, shape=shape, chunks=chunks, dtype=str, **kwargs)
        for index, value in values.items():
            array[index] = value
    return array


def holding(store: MemoryStore, root: Path) -> MemoryStore:
    """`store` with every file below `root` as a value."""
    for path in root.rglob("*"):
        if path.is_file():
            store.set(path.relative_to(root).as_posix(), path.read_bytes())
    return store


def every_listed_file_reads_its_size(folder: Path) -> dict[str, int]:
    """Name -> size of each file a listing shows (scandir: the attributes readdirplus gave),
    each checked to be the number of bytes its read gives."""
    sizes = {}
    for entry in os.scandir(folder):
        if stat.S_ISREG(entry.stat().st_mode):
            sizes[entry.name] = entry.stat().st_size
            assert sizes[entry.name] == len(Path(entry.path).read_bytes()), entry.name
    return sizes


def test_a_text_a_listing_cannot_count_is_left_out_and_reachable_by_name(tmp_path):
    """An array of 16,875 chunks (more than the 16,384 a listing reads; four stored, the rest the
    fill value) was listed with size 0 until opened: GIO typed it empty and copied 0 bytes. It
    is left out of listings now, `ls big.txt`, a stat and a read by name find it with its true
    size, and later listings show it with that size; a text with a chunk that cannot be decoded
    is left out too and refused by name with the chunk named. The sidecar says when the text is
    listed, its own size the same before and after."""
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    big = strings(root, "big", (BIG,), (BIG_CHUNK,), STORED, fill_value="-")
    small = strings(root, "small", (4,), (2,), {...: np.array(["a", "b é", "", "c\\d"], dtype=object)})
    strings(root, "broken", (6,), (2,), {...: np.array(list("abcdef"), dtype=object)})
    (tmp_path / "t.zarr" / "broken" / "c" / "1").write_bytes(b"not a chunk")
    with mounted(tmp_path / "t.zarr", tmp_path, "ro") as m:
        names = os.listdir(m.path)
        assert {"small.txt", "big.json", "broken.json"} <= set(names)
        assert "big.txt" not in names and "broken.txt" not in names
        sidecar = (m / "big.json").read_bytes()
        assert json.loads(sidecar)["text_file"] == "big.txt"
        assert f"{BIG // BIG_CHUNK} chunks" in json.loads(sidecar)["text_listed"]
        assert every_listed_file_reads_its_size(m.path)["small.txt"] == len(text_of(small))

        expected = text_of(big)  # zarr-python reads its 16,875 chunks: once
        ls = subprocess.run(["ls", "-l", str(m / "big.txt")], capture_output=True, text=True, timeout=120)
        assert ls.returncode == 0 and f" {len(expected)} " in ls.stdout
        assert os.stat(m / "big.txt").st_size == len(expected) == len((m / "big.txt").read_bytes())
        assert (m / "big.txt").read_bytes() == expected

        sizes = every_listed_file_reads_its_size(m.path)
        assert sizes["big.txt"] == len(expected) and "broken.txt" not in sizes
        assert (m / "big.json").read_bytes() == sidecar and sizes["big.json"] == len(sidecar)
        with pytest.raises(OSError) as refused:
            os.stat(m / "broken.txt")
        assert refused.value.errno == errno.EIO
        assert "chunk broken/c/1" in m.settled_log()
        assert "a chunk that cannot be read or decoded" in json.loads((m / "broken.json").read_text())["text_listed"]


class SlowStore(MemoryStore):
    """A remote store whose every chunk's GET takes `seconds` of the clock read_budget reads."""

    def __init__(self, clock, seconds: float, capabilities: Capabilities):
        super().__init__(capabilities)
        self.clock, self.seconds = clock, seconds

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        if "/c/" in key:
            self.clock.now += self.seconds
        return super().get_versioned(key, byte_range, expect, limit)


def test_a_listing_past_the_timeout_leaves_the_text_out_and_a_stat_by_name_counts_it(tmp_path, monkeypatch):
    """On a remote store a listing's count is one read's budget (-o timeout, 5 s here, each
    chunk taking a second): an array of 3 chunks is listed with its size, one of 20 chunks,
    which showed 0 until opened, is left out; a stat by name counts it whole (no deadline but
    each request's own), and a listing then shows it."""
    clock = types.SimpleNamespace(now=1000.0)
    monkeypatch.setattr(read_budget, "time", types.SimpleNamespace(monotonic=lambda: clock.now))
    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)  # counted a slab at a time, as larger arrays are
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    values = np.array([f"label {i} é" for i in range(40)], dtype=object)
    near = strings(root, "near", (6,), (2,), {...: values[:6]})
    far = strings(root, "far", (40,), (2,), {...: values})
    store = SlowStore(clock, 1.0, Capabilities(remote=True, read_deadline=5.0))
    holding(store, tmp_path / "t.zarr")
    with core_of(tmp_path / "t.zarr", tmp_path, "ro", store=store) as c:
        assert "near.txt" in c.listdir() and "far.txt" not in c.listdir()
        assert c.stat("/near.txt")["st_size"] == len(text_of(near))
        assert c.stat("/far.txt")["st_size"] == len(text_of(far)) == len(c.read_bytes("/far.txt"))
        assert "far.txt" in c.listdir()
        assert "WARNING" not in c.log() and "ERROR" not in c.log()


def test_a_listing_renders_no_text_of_more_chunks_than_it_reads(tmp_path, monkeypatch):
    """A text small enough to be rendered for its size was rendered whatever its chunks: an
    array of 262,144 one-element chunks cost a listing as many reads (requests, on a remote
    store). Past LISTED_CHUNKS it is left out, no chunk read; a stat by name renders it."""
    monkeypatch.setattr(textview, "LISTED_CHUNKS", 5)
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    values = np.array(["a", "b é", "", "c\\d", "e\nf", "g"], dtype=object)
    within = strings(root, "within", (6,), (2,), {...: values})
    beyond = strings(root, "beyond", (6,), (1,), {...: values})
    with core_of(tmp_path / "t.zarr", tmp_path, "ro", "debug") as c:
        assert "within.txt" in c.listdir() and "beyond.txt" not in c.listdir()
        assert "beyond/c/" not in c.log()  # no chunk read (-o debug logs each store read)
        assert c.stat("/beyond.txt")["st_size"] == len(text_of(beyond)) == len(c.read_bytes("/beyond.txt"))
        assert c.stat("/within.txt")["st_size"] == len(text_of(within))
        assert "beyond.txt" in c.listdir()


def test_a_text_of_more_elements_than_its_limit_is_refused_by_name_from_its_metadata(tmp_path, monkeypatch):
    """Each line holds at least its newline: an array of more elements than TEXT_LIMIT can never
    be opened. It is left out of listings, a stat by name refuses it as the open does, reading
    no chunk, and its sidecar says it is never listed."""
    monkeypatch.setattr(textview, "TEXT_LIMIT", 10)
    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    strings(root, "many", (12,), (4,), {...: np.array(list("abcdefghijkl"), dtype=object)})
    for chunk in (tmp_path / "t.zarr" / "many" / "c").iterdir():
        chunk.write_bytes(b"not a chunk")  # a read would say so
    with core_of(tmp_path / "t.zarr", tmp_path, "ro") as c:
        assert "many.txt" not in c.listdir()
        for ask in (c.stat, c.read_bytes):
            with pytest.raises(OSError) as refused:
                ask("/many.txt")
            assert refused.value.errno == errno.EOPNOTSUPP
        assert "12 elements: its text is more than zarrfs's limit of 10 bytes" in c.log()
        assert "chunk" not in c.log()
        assert json.loads(c.read_bytes("/many.json"))["text_listed"].startswith("never: 12 elements")


def test_a_listing_made_before_a_texts_values_changed_neither_counts_it_nor_fails(tmp_path, monkeypatch):
    """A listing is kept while its folder holds the same entries, and readdirplus gives each
    entry's attributes as the kernel reads it (again after any write through the mount): those
    of a NAME.txt were its size as a stat by name counts it, for the version of its stored values
    found then. Another program rewrote two arrays after a listing showed their texts: `big`
    (past the listing's bounds, listed once a stat by name had counted it) was counted whole
    by the next listing, every chunk read; `small`, a chunk of it no longer decodable, made
    the whole folder's listing fail. Each is given now without attributes (the kernel asks for
    them by name) and later listings leave it out; every other file stays listed."""
    monkeypatch.setattr(textview, "LISTED_CHUNKS", 5)
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    big = strings(root, "big", (12,), (1,), {...: np.array(list("abcdefghijkl"), dtype=object)})
    small = strings(root, "small", (4,), (2,), {...: np.array(["a", "b é", "", "c\\d"], dtype=object)})
    # metadata_ttl=0: a local store's stored state looked at again at once, as past its lifetime
    with core_of(tmp_path / "t.zarr", tmp_path, "ro", "debug", "metadata_ttl=0") as c:
        assert c.stat("/big.txt")["st_size"] == len(text_of(big))
        listed = c.scandir()
        assert listed["big.txt"]["st_size"] == len(text_of(big)) and listed["small.txt"]["st_size"] == len(text_of(small))
        big[0] = "another program's value"
        (tmp_path / "t.zarr" / "small" / "c" / "1").write_bytes(b"not a chunk")
        start = len(c.log())
        listed = c.scandir()
        assert listed["big.txt"] is None and listed["small.txt"] is None
        assert listed["big.json"] is not None and listed["small.json"] is not None
        assert "big/c/" not in c.log()[start:]  # no chunk of big read: a listing does not count it
        assert "chunk small/c/1" in c.log()[start:]
        assert {"big.txt", "small.txt"}.isdisjoint(c.listdir()) and {"big.json", "small.json"} <= set(c.listdir())
        assert c.stat("/big.txt")["st_size"] == len(text_of(big)) == len(c.read_bytes("/big.txt"))
        assert c.scandir()["big.txt"]["st_size"] == len(text_of(big))


class HeldStore(MemoryStore):
    """A remote store whose first chunk GET from the thread `held_thread` names waits until
    `release` is set, then fails as a dropped connection does."""

    def __init__(self, capabilities: Capabilities):
        super().__init__(capabilities)
        self.held_thread, self.waiting, self.release = "", threading.Event(), threading.Event()

    def get_versioned(self, key, byte_range=None, expect=None, limit=None):
        if "/c/" in key and threading.current_thread().name == self.held_thread and not self.waiting.is_set():
            self.waiting.set()
            assert self.release.wait(60), "the test never let the held GET go"
            raise StoreError(f"{key}: connection reset")
        return super().get_versioned(key, byte_range, expect, limit)


def test_a_listing_that_fails_does_not_undo_the_size_a_stat_by_name_found_meanwhile(tmp_path, monkeypatch):
    """Two threads: a listing counts `far.txt` while a stat by name counts it too. The stat
    finds its size; the listing's count then fails (a store error that may pass). The listing's
    outcome, "not known", replaced the size found by name, and every later listing left the
    file out though its size was known (until a stat by name counted it whole once more)."""
    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)  # counted a slab at a time, as larger arrays are
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    far = strings(root, "far", (40,), (2,), {...: np.array([f"label {i}" for i in range(40)], dtype=object)})
    store = HeldStore(Capabilities(remote=True, read_deadline=60.0))
    holding(store, tmp_path / "t.zarr")
    with core_of(tmp_path / "t.zarr", tmp_path, "ro", store=store) as c:
        listing = threading.Thread(target=c.listdir, name="listing")
        store.held_thread = listing.name
        listing.start()
        try:
            assert store.waiting.wait(60), "the listing never read a chunk"
            assert c.stat("/far.txt")["st_size"] == len(text_of(far))
        finally:
            store.release.set()
            listing.join(60)
        assert not listing.is_alive()
        assert "far.txt" in c.listdir()
        assert c.stat("/far.txt")["st_size"] == len(text_of(far))


def test_a_text_a_store_error_left_out_is_listed_again_once_the_stored_state_is_looked_at_again(tmp_path,
                                                                                                 monkeypatch):
    """A listing's count that a store error stopped (a 503, a connection reset: errors that
    pass) left the file out of every listing of that version of the array until a stat by name:
    a file manager, which only lists, never showed it again. A listing counts it again once the
    stored state is looked at again (-o metadata_ttl, 1 s here), and shows it; one warning."""
    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)  # counted a slab at a time, as larger arrays are
    root = zarr.open_group(str(tmp_path / "t.zarr"), mode="w")
    far = strings(root, "far", (40,), (2,), {...: np.array([f"label {i}" for i in range(40)], dtype=object)})
    store = holding(MemoryStore(Capabilities(remote=True, read_deadline=60.0, metadata_ttl=1.0)), tmp_path / "t.zarr")
    store.fail("get", "far/c/*", error=StoreError("far/c/3: 503 Slow Down"))
    with core_of(tmp_path / "t.zarr", tmp_path, "ro", store=store) as c:
        assert "far.txt" not in c.listdir() and "far.json" in c.listdir()
        wait_for(lambda: "far.txt" in c.listdir(), 30, what="far.txt listed once more")
        assert c.scandir()["far.txt"]["st_size"] == len(text_of(far)) == len(c.read_bytes("/far.txt"))
        assert c.log().count("503 Slow Down") == 1
