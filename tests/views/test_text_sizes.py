"""NAME.txt's size at the first stat: exactly the bytes read, for arrays of millions of elements,
whole chunks of strings counted from their stored bytes (codecs/vlen_line_sizes.py), the rest a
slab at a time (views/text_lines.py), and kept for one version of the stored values."""

import dataclasses
import errno
import gc
import os
import sys
import tracemalloc
import warnings

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st

from core import core_of
from mounting import mounted
from servers.seaweed import unique_prefix
from zarrfs.codecs import vlen_line_sizes
from zarrfs.codecs.base import ChunkSpec
from zarrfs.codecs.vlen_line_sizes import VlenLineSizesCodec
from zarrfs.errors import CorruptChunkError
from zarrfs.format.data_types import DataType
from zarrfs.stores.local import LocalStore
from zarrfs.views import text as textview
from zarrfs.views import text_lines
from zarrfs.views.text import escape, json_line

OLD_LISTED = 1 << 20  # the elements a stat decoded at most before: larger texts listed 0 until opened
BIG = OLD_LISTED + 70_001  # past it, in a ragged last chunk


def oracle(values) -> bytes:
    """NAME.txt of text elements as docs/views.md says it: escapes, one line each, C order. Made
    of the whole text at once, the elements apart by a lone surrogate (which no element holds:
    encode() would refuse it), for arrays of millions."""
    flat = np.asarray(values, dtype=object).reshape(-1).tolist()
    text = APART.join(flat).replace("\\", "\\\\").replace("\n", "\\n").replace(APART, "\n")
    return (text + "\n").encode() if flat else b""


APART = "\ud800"


def varied(n: int, seed: int) -> np.ndarray:
    """Text elements as tables hold them, with what counts differently in bytes and characters:
    two-, three- and four-byte characters, empty strings, backslashes, newlines."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 _-"))
    body = rng.choice(letters, (n, 6)).view("<U6").reshape(-1)
    values = np.array([f"{i}{s}" for i, s in enumerate(body)], dtype=object)
    values[::7] = ""
    values[3::11] = "Zürich €"
    values[5::101] = "clef 𝄞 \\ back"
    values[9::1009] = "two\nlines\n"
    return values


def written(group, name: str, values: np.ndarray, chunks, upto: int, **kwargs) -> np.ndarray:
    """The array `name` with the first `upto` rows of `values` written, the rest never (missing
    chunks, shown as the fill value): what a reader sees, as zarr-python reads it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = group.create_array(name, shape=values.shape, chunks=chunks, **kwargs)
        array[:upto] = values[:upto]
        return array[...]


def test_a_text_lists_the_size_it_reads_below_and_far_above_the_old_bound(tmp_path):
    """A NAME.txt of more than 1,048,576 elements listed 0 until opened (a file manager typed it
    as empty, a backup copied it again); now every size is true at the first stat: v2 and v3,
    text and bytes, missing chunks shown as the fill value."""
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    small = varied(300_000, 1)  # past SIZED_ELEMENTS: counted, not rendered, at a stat
    rows = BIG // 64 + 1
    shown = {
        "/grid.txt": written(group, "grid", varied(rows * 64, 2).reshape(rows, 64), (1000, 16), rows - 3000, dtype=str,
                             fill_value="fill ü"),
        "/tiny.txt": written(group, "tiny", small[:1000], (64,), 500, dtype=str, fill_value="-"),
        "/small.txt": written(group, "small", small, (40_000,), 250_000, dtype=str),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = zarr.open_group(str(tmp_path / "s.zarr" / "old"), mode="w", zarr_format=2)
    shown["/old/labels.txt"] = written(old, "labels", varied(BIG, 3), (100_000,), BIG - 150_000, dtype=str)
    raw = np.array([b"\xff\xfe" * (i % 3) + b"caf\xc3\xa9\\" + b"\n" * (i % 5 == 0) for i in range(300_000)],
                   dtype=object)
    raw[::13] = b""
    written(group, "raw", raw, (65_536,), len(raw), dtype="bytes")
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        sizes = {path: c.stat(path)["st_size"] for path in [*shown, "/raw.txt"]}  # first stats, nothing opened
        for path, values in shown.items():
            assert sizes[path] == len(oracle(values)) == len(c.read_bytes(path)), path
        assert c.read_bytes("/grid.txt") == oracle(shown["/grid.txt"])
        text = c.read_bytes("/raw.txt")
        assert sizes["/raw.txt"] == len(text) and text.count(b"\n") == len(raw)
        assert text.startswith(b"\n\\xff\\xfecaf\xc3\xa9\\\\\n")  # element 0 is empty (the 13th), then element 1
        assert "WARNING" not in c.log() and "ERROR" not in c.log()


BOUND_BEFORE = 1 << 21  # elements a stat read at most before chunks were counted from their bytes
HUGE = BOUND_BEFORE + 50_001  # past it, in a ragged last chunk


def dates(n: int) -> np.ndarray:
    """Dates as text, 10 characters each (a length whose prefix in a vlen chunk is b"\\n\\0\\0\\0"),
    a few with a backslash or a newline inside."""
    days = np.datetime64("1970-01-01") + np.arange(n) % 40_000
    values = np.array(days.astype(str).tolist(), dtype=object)
    values[7::100_003], values[11::200_003] = "2020\\01-01", "2020-01\n01"
    return values


def test_texts_of_millions_of_labels_list_the_size_they_read(tmp_path):
    """A NAME.txt of more than 2,097,152 elements listed 0 until opened. Whole chunks are now
    counted from their stored bytes (codecs/vlen_line_sizes.py): dates (one length), labels of
    lengths that differ (short, some 10 bytes long, a few non-ASCII, escapes), in v2 and v3,
    sharded, with missing chunks, an edge chunk, and a chunk that is decoded element by element
    (an empty element among elements of other lengths and an escape)."""
    labels = np.array([f"lab{i}" for i in range(HUGE)], dtype=object)
    labels[:100_000] = [f"l{i % 1000}" for i in range(100_000)]  # a chunk of no escape at all
    labels[300_000:300_000 + 10] = ["Zürich", "a\\b", "c\nd", "€", "x" * 92, "y" * 200, "z", "é", "ü\\", "12345678"]
    labels[1_500_000], labels[1_500_001] = "", "has \\"  # decoded one by one
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    shown = {
        "/dates.txt": written(group, "dates", dates(HUGE), (100_000,), HUGE - 250_000, dtype=str, fill_value="n/a"),
        "/labels.txt": written(group, "labels", labels, (100_000,), HUGE, dtype=str),
        "/sharded.txt": written(group, "sharded", labels, (100_000,), HUGE - 600_000, dtype=str, shards=(500_000,),
                                fill_value="ü"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = zarr.open_group(str(tmp_path / "s.zarr" / "old"), mode="w", zarr_format=2)
    shown["/old/labels.txt"] = written(old, "labels", labels, (100_000,), HUGE, dtype=str)
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        sizes = {path: c.stat(path)["st_size"] for path in shown}  # first stats, nothing opened
        for path, values in shown.items():
            assert sizes[path] == len(oracle(values)) == len(c.read_bytes(path)), path
        assert "WARNING" not in c.log() and "ERROR" not in c.log()


def test_strings_counted_from_their_bytes_are_utf8_in_shards_too(tmp_path):
    """A stat counts a string array from the bytes its chunks hold (no str made, see
    views/text_as_bytes.py): a sharded array's inner chunks are read so too, and a chunk whose
    bytes are not UTF-8 gives no size: a listing leaves the file out with one log line, and a
    stat by name is refused as opening the file is."""
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    sharded = written(group, "sharded", varied(300_000, 6), (10_000,), 290_000, dtype=str, shards=(50_000,),
                      fill_value="ü")
    written(group, "bad", varied(300_000, 7), (150_000,), 300_000, dtype=str, compressors=None)
    (tmp_path / "s.zarr" / "bad" / "c" / "1").write_bytes(bytes(numcodecs.VLenBytes().encode(
        np.array([b"caf\xe9"] * 150_000, dtype=object))))  # Latin-1, not UTF-8
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        assert c.stat("/sharded.txt")["st_size"] == len(oracle(sharded)) == len(c.read_bytes("/sharded.txt"))
        assert "bad.txt" not in c.listdir() and "bad.json" in c.listdir()
        assert [line for line in c.log().splitlines() if "bad" in line and "not UTF-8" in line]
        for read in (c.stat, c.read_bytes):
            with pytest.raises(OSError) as refused:
                read("/bad.txt")
            assert refused.value.errno == errno.EIO


def another_writers_store(root) -> LocalStore:
    """The local store, declared as one that other programs write: its stored state is looked
    at again at once (metadata_ttl 0), as an object store's is after its metadata_ttl."""
    store = LocalStore(str(root), read_only=True)
    store.capabilities = dataclasses.replace(store.capabilities, metadata_ttl=0.0)
    return store


@pytest.mark.parametrize("n", [1000, 300_000, BIG])  # rendered at a stat, counted, past the old bound
def test_the_size_follows_a_write_that_changes_the_texts_length(tmp_path, n):
    """A size was kept per node, and another program's write changes chunks, not the node: the
    old size stayed listed (and the old text was served) while the mtime moved. Both follow
    the stored values' version now."""
    values = varied(n, 4)
    array = zarr.open_group(str(tmp_path / "s.zarr"), mode="w").create_array("labels", shape=(n,), chunks=(50_000,),
                                                                            dtype=str)
    array[...] = values
    store = another_writers_store(tmp_path / "s.zarr")
    with core_of(tmp_path / "s.zarr", tmp_path, "ro", store=store) as c:
        before = c.stat("/labels.txt")["st_size"]
        assert before == len(oracle(values))
        values[n // 2] += " and some more ü"
        array[n // 2] = values[n // 2]
        after = c.stat("/labels.txt")["st_size"]
        assert after == len(oracle(values)) == before + len(" and some more ü".encode())
        assert c.read_bytes("/labels.txt") == oracle(values)


def test_a_stat_reads_no_array_of_more_chunks_than_one_read_may_meet(tmp_path, monkeypatch):
    """Each chunk is a request and a decode: an array of tiny chunks within the element bound
    would cost a listing seconds. Beyond LISTED_CHUNKS a listing leaves the file out (it showed
    0 until opened) and reads no chunk; a stat by name counts it, chunk by chunk."""
    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)
    monkeypatch.setattr(textview, "LISTED_CHUNKS", 5)
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    written(group, "within", varied(20, 5), (4,), 20, dtype=str)
    written(group, "beyond", varied(24, 5), (4,), 24, dtype=str)
    written(group, "broken", varied(24, 5), (4,), 24, dtype=str)
    for chunk in (tmp_path / "s.zarr" / "broken" / "c").iterdir():
        chunk.write_bytes(b"not a chunk")  # a read would log it
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        assert {"within.txt", "within.json", "beyond.json", "broken.json"} <= set(c.listdir())
        assert not {"beyond.txt", "broken.txt"} & set(c.listdir())
        assert c.stat("/within.txt")["st_size"] == len(oracle(varied(20, 5)))
        assert "broken" not in c.log()
        assert c.stat("/beyond.txt")["st_size"] == len(oracle(varied(24, 5))) == len(c.read_bytes("/beyond.txt"))
        assert "beyond.txt" in c.listdir() and "broken.txt" not in c.listdir()
        with pytest.raises(OSError) as refused:
            c.stat("/broken.txt")
        assert refused.value.errno == errno.EIO and "chunk broken/c/" in c.log()


elements = st.one_of(
    st.lists(st.text(), max_size=30),
    st.lists(st.binary(max_size=12) | st.sampled_from([b"\xc3", b"\xa9", b"\n", b"\\", b"\xed\xa0\x80"]), max_size=30),
)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=8)


def objects(items: list) -> np.ndarray:
    """A 1-D object array of `items`, lists among them kept whole."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


@given(elements)
def test_lines_made_at_once_are_the_lines_made_one_by_one(items):
    one_by_one = b"".join(escape(e).encode("utf-8", "surrogatepass") + b"\n" for e in items)
    assert text_lines.escaped_size(items) == len(one_by_one)
    assert text_lines.escaped_lines(items) == one_by_one  # an element holding a newline too
    assert textview.render(objects(items), "x") == one_by_one


@given(st.lists(json_values, max_size=20))
def test_json_lines_counted_at_once_are_the_lines_made_one_by_one(items):
    one_by_one = b"".join(json_line(e).encode("utf-8", "surrogatepass") + b"\n" for e in items)
    assert text_lines.json_size(items) in (len(one_by_one), None)  # None: a lone surrogate, counted one by one
    assert textview.render(objects(items), "x", json_line) == one_by_one


def test_the_chunk_cache_holds_no_more_strings_than_its_bound(tmp_path):
    """A chunk of strings was weighed by its pointers (8 bytes an element), not its strings: the
    chunks that stats of NAME.txt decoded stayed in the chunk cache, each holding tens of times
    the bytes counted, past any -o cache_size (about 40 MB kept for each array here)."""
    n = textview.SIZED_ELEMENTS + 7_856  # counted a slab at a time, not rendered
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    values = np.array([f"{i:08d}" + "x" * 92 for i in range(n)], dtype=object)
    for name in ("a", "b", "c"):
        written(group, name, values, (n + 30_000,), n, dtype=str)  # one edge chunk, decoded apart
    with core_of(tmp_path / "s.zarr", tmp_path, "ro", "cache_size=8M") as c:
        gc.collect()
        tracemalloc.start()
        try:
            for name in ("a", "b", "c"):
                assert c.stat(f"/{name}.txt")["st_size"] == len(oracle(values))
            gc.collect()
            kept, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert kept < (8 << 20) + (8 << 20)  # the cache's bound, and room for what else a stat keeps


def lines_of_text_py_run(action) -> int:
    """How many lines of views/text.py `action()` runs in this thread, counted by a tracer: the
    work done, whatever the machine's load."""
    count = 0

    def line(frame, event, arg):
        nonlocal count
        count += event == "line"
        return line

    sys.settrace(lambda frame, event, arg: line if frame.f_code.co_filename == textview.__file__ else None)
    try:
        action()
    finally:
        sys.settrace(None)
    return count


def test_a_listing_of_small_texts_costs_the_same_for_each(tmp_path):
    """Keeping a rendered text summed the bytes of every text kept: a listing of N small string
    arrays (each rendered at its first stat, and kept) cost N squared, about 10 s of CPU for
    20,000. The second folder, twice as many arrays, costs twice the first, not four times."""
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    few = 80
    for folder, count in (("few", few), ("many", 2 * few)):
        for i in range(count):
            written(group.require_group(folder), f"t{i}", np.array(["ab", "c"], dtype=object), (2,), 2, dtype=str)
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        def listed(folder: str):
            return lambda: [c.stat(f"/{folder}/{name}") for name in c.listdir(f"/{folder}")]  # ls -l
        first, second = lines_of_text_py_run(listed("few")), lines_of_text_py_run(listed("many"))
    assert first > 0 and second < 2.5 * first, (first, second)


def vlen_chunk(items: list) -> bytes:
    """A chunk as numcodecs and zarr v3's vlen-utf8 and vlen-bytes store it: a count, then each element's length and bytes."""
    return bytes(numcodecs.VLenBytes().encode(objects(items)))


def utf8_lines_size(items: list) -> int | None:
    """The size of NAME.txt's lines of these elements' text (None: one is not UTF-8, refused)."""
    try:
        return len(oracle([item.decode("utf-8") for item in items]))
    except UnicodeDecodeError:
        return None


def counted_from_bytes(items: list) -> int | None:
    """What the stat's codec (codecs/vlen_line_sizes.py) counts for a chunk of `items`: the size
    in the decoded chunk's first element, None where it refuses the chunk (not UTF-8)."""
    shape = (len(items),)
    spec = ChunkSpec(shape, DataType("int64", np.dtype("<i8")), np.array(0, "<i8"))
    codec = VlenLineSizesCodec({"decode_limit": len(items)}, spec, "x")
    try:
        decoded = codec.decode(vlen_chunk(items))
    except CorruptChunkError:
        return None
    assert not decoded.reshape(-1)[1:].any()  # the chunk's size is in its first element
    return int(decoded.sum())


short_ascii = st.binary(min_size=1, max_size=40).map(lambda b: bytes(c % 127 or 1 for c in b))  # no zero byte
any_bytes = st.binary(max_size=300) | st.sampled_from([b"\n", b"\\", b"\xc3\xa9", b"\xc3", b"\xa9", b"\x00", b""])
fixed = st.integers(0, 140).flatmap(lambda n: st.lists(st.binary(min_size=n, max_size=n) | st.just(b"2020-01-0\n"[:n].ljust(n, b"\\")),
                                                       min_size=1, max_size=30))


zeros_and_escapes = st.binary(max_size=6).map(lambda b: bytes((0, 10, 92)[c % 3] for c in b))  # fake prefixes


@given(st.lists(any_bytes, min_size=1, max_size=30) | fixed | st.lists(short_ascii, min_size=1, max_size=30)
       | st.lists(zeros_and_escapes, min_size=1, max_size=40))
def test_a_chunks_size_counted_from_its_bytes_is_its_lines_size(items):
    """Every way the codec counts a chunk (no escape in its bytes; one length; short lengths,
    whose prefixes zero bytes and escapes inside elements must not fake; element by element)
    gives the size of the lines the file holds, or refuses what the file refuses (not UTF-8)."""
    assert counted_from_bytes(items) == utf8_lines_size(items)


@pytest.mark.parametrize("items", [
    [b"2020-01-01", b"2021-12-31"],  # one length, 10: each length prefix holds b"\n"
    [b"a\\b", b"c\nd", b"\xc3\xa9t\xc3\xa9"],  # one length, escapes and UTF-8 inside
    [b"lab7", b"lab1234567", b"x" * 92, b"caf\xc3\xa9 \\ \n"],  # short lengths: 10 and 92 in prefixes, escapes
    [b"", b"y" * 200, b"\xc3\xa9", b"a\x00b"],  # an empty first one, a prefix past ASCII, a zero byte
    [b"plain ascii", b"labels"],  # no escape anywhere
])
def test_the_chunks_without_an_object_per_element_are_counted_so(items):
    """The exact cases are taken (none decodes the chunk element by element) and count right."""
    data = vlen_chunk(items)
    assert vlen_line_sizes.chunk_lines_size(data, len(items)) == utf8_lines_size(items)


@pytest.mark.parametrize("items", [[b"ab", b"", b"c\\"], [b"a\x00\x00\x00b", b"c\n"], [b"x" * 300, b"y\\"]])
def test_chunks_of_other_elements_are_decoded(items):
    """A backslash or newline with lengths that differ, and zero bytes that look like one more
    prefix (an empty element after another, three zeros inside one) or a length past 255: no
    exact case."""
    assert vlen_line_sizes.chunk_lines_size(vlen_chunk(items), len(items)) is None
    assert counted_from_bytes(items) == utf8_lines_size(items)


def test_a_chunk_of_zero_bytes_is_counted_in_memory_of_a_few_times_its_size():
    """Elements of zero bytes (a chunk decompressed to its bound, up to 2 GiB, from a hostile
    server or a careless writer) are no exact case: finding that takes a few bytes of memory per
    chunk byte, not an index (8 bytes) per zero byte."""
    items = [b"\n" + bytes(3000 + i % 2000) for i in range(1000)]  # lengths past 255, a newline: no exact case
    data = vlen_chunk(items)
    nbytes = len(data)
    tracemalloc.start()
    try:
        assert vlen_line_sizes.chunk_lines_size(data, len(items)) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * nbytes, (peak, nbytes)


@pytest.mark.parametrize("items", [[b"caf\xe9", b"th\xe9"], [b"caf\xe9", b"a"], [b"\xc3", b"\xa9"]])
def test_a_chunk_that_is_not_utf8_is_refused_by_every_case(items):
    """Latin-1 of one length, of short lengths; halves of one character apart (joined they would be UTF-8)."""
    with pytest.raises(CorruptChunkError, match="not UTF-8"):
        vlen_line_sizes.chunk_lines_size(vlen_chunk(items), len(items))


def test_a_stat_decodes_no_more_elements_one_by_one_than_its_bound(tmp_path, monkeypatch):
    """Chunks no exact case counts are decoded element by element, as every chunk was: a stat
    does so for at most DECODED_ELEMENTS elements (edge chunks included), past them a listing
    leaves the file out (it showed 0 until opened), with no warning, and a stat by name counts
    it; chunks counted from their bytes are not bounded so."""
    monkeypatch.setattr(textview, "SIZED_ELEMENTS", 4)
    monkeypatch.setattr(textview, "DECODED_ELEMENTS", 20)
    plain = np.array([f"label{i}" for i in range(64)], dtype=object)  # no escape: counted from the bytes
    tricky = plain.copy()
    tricky[1::8] = ""  # an empty element after another and a backslash in every chunk: decoded
    tricky[2::8] = "back\\slash"
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    written(group, "plain", plain, (8,), 64, dtype=str)
    written(group, "tricky", tricky, (8,), 64, dtype=str)
    written(group, "edge", tricky[:18], (8,), 18, dtype=str)  # two chunks and the edge decoded: 18 elements
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        assert {"plain.txt", "edge.txt"} <= set(c.listdir()) and "tricky.txt" not in c.listdir()  # 64 to decode
        assert c.stat("/plain.txt")["st_size"] == len(oracle(plain))
        assert c.stat("/edge.txt")["st_size"] == len(oracle(tricky[:18])) == len(c.read_bytes("/edge.txt"))
        assert c.stat("/tricky.txt")["st_size"] == len(oracle(tricky)) == len(c.read_bytes("/tricky.txt"))
        assert "tricky.txt" in c.listdir()
        assert "WARNING" not in c.log()


def test_a_stat_keeps_no_chunk_of_sizes_in_the_chunk_cache(tmp_path):
    """Whole chunks are read as their lines' sizes (8 bytes an element); those of a 2-D array
    are copied out of a chunk, and were kept in the mount's chunk cache, pushing out chunks of
    data that are read again, for sizes no read asks for twice."""
    from zarrfs.engine.chunk_cache import ChunkCache
    from zarrfs.fs.hierarchy import Hierarchy

    rows = textview.SIZED_ELEMENTS // 64 + 10
    values = np.array([f"r{i}" for i in range(rows * 64)], dtype=object).reshape(rows, 64)
    written(zarr.open_group(str(tmp_path / "s.zarr"), mode="w"), "grid", values, (1000, 16), rows, dtype=str)
    store, cache = LocalStore(str(tmp_path / "s.zarr"), read_only=True), ChunkCache(64 << 20)
    node = Hierarchy(store, ()).lookup("/grid.txt").node
    assert textview.Texts().size(store, node, cache) == len(oracle(values))
    assert cache.nbytes == 0


def test_an_object_stores_texts_of_millions_list_the_size_they_read(seaweed, tmp_path):
    """Through a real mount of an S3 server (SeaweedFS): whole chunks and inner chunks of shards
    fetched as a read fetches them (batched, ranged), counted from their bytes, past the old
    bound; the edge chunk decoded."""
    prefix = unique_prefix("textsize")
    group = zarr.open_group(seaweed.zarr_store(prefix), mode="w")
    labels = np.array([f"lab{i}" for i in range(HUGE)], dtype=object)
    written(group, "plain", labels, (200_000,), HUGE, dtype=str)
    written(group, "sharded", labels, (100_000,), HUGE - 700_000, dtype=str, shards=(500_000,), fill_value="-")
    shown = {"plain.txt": oracle(labels), "sharded.txt": oracle(np.where(np.arange(HUGE) < HUGE - 700_000, labels, "-"))}
    with mounted(seaweed.url(prefix), tmp_path, *seaweed.mount_options("ro"), env=seaweed.env("admin")) as m:
        sizes = {name: os.stat(m / name).st_size for name in shown}  # first stats, nothing opened
        for name, text in shown.items():
            assert sizes[name] == len(text) and (m / name).read_bytes() == text, name
        assert "WARNING" not in m.settled_log() and "ERROR" not in m.log()


def test_a_chunk_counted_from_its_bytes_that_is_not_utf8_is_named_at_the_stat(tmp_path):
    """Past the old bound a stat read nothing; now a chunk that is not UTF-8 (Latin-1 labels of
    one length, and of lengths that differ) leaves the file out of listings with one line naming
    the file and the chunk, and a stat by name and the open are refused, as for any chunk decoded."""
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    labels = np.array([f"lab{i}" for i in range(HUGE)], dtype=object)
    for name, latin1 in (("one_length", [b"caf\xe9"] * 100_000), ("lengths", [b"caf\xe9" * (i % 5 + 1) for i in range(100_000)])):
        written(group, name, labels, (100_000,), HUGE, dtype=str, compressors=None)
        (tmp_path / "s.zarr" / name / "c" / "7").write_bytes(vlen_chunk(latin1))
    with core_of(tmp_path / "s.zarr", tmp_path, "ro") as c:
        assert not {"one_length.txt", "lengths.txt"} & set(c.listdir())
        for name in ("one_length", "lengths"):
            assert [line for line in c.log().splitlines() if f"{name}: chunk {name}/c/7" in line and "not UTF-8" in line]
            for read in (c.stat, c.read_bytes):
                with pytest.raises(OSError) as refused:
                    read(f"/{name}.txt")
                assert refused.value.errno == errno.EIO
