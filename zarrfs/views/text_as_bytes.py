"""A string array read as the bytes it stores, for counting its text's size.

vlen-utf8 and vlen-bytes store a chunk alike (a count, then each element's length and bytes);
only the decode differs: numcodecs makes a str of each element's UTF-8 bytes, or a bytes object.
Making the str objects was most of the cost of a stat's size pass (about 2.5 times a bytes
decode), and the size needs only the bytes: an escaped line is an element's UTF-8 bytes plus a
byte per backslash and per newline. So the size pass reads a string array through this view of
its metadata (data type `bytes`, codec vlen-bytes, the fill value's UTF-8), and checks that
every chunk's bytes are UTF-8, as the str decode would when the file is opened.

A chunk's size needs not even the bytes objects: sizes_view reads each chunk as the size of its
lines, counted from its stored form where that is exact (codecs/vlen_line_sizes.py).
"""

import dataclasses
from collections.abc import Callable

import numpy as np

from zarrfs.codecs.numcodecs_adapter import PREFIX, V2_FILTERS
from zarrfs.codecs.vlen_line_sizes import NAME as LINE_SIZES
from zarrfs.codecs.vlen_line_sizes import SIZES
from zarrfs.format.data_types import DataType
from zarrfs.format.numpy_types import TEXT_TYPES
from zarrfs.format.v3 import ArrayMetadata
from zarrfs.geometry import regular

UTF8, BYTES = "vlen-utf8", "vlen-bytes"
SHARDING = "sharding_indexed"


def bytes_view(meta: ArrayMetadata) -> ArrayMetadata | None:
    """`meta` with its elements read as bytes; None when it is no string array of vlen-utf8,
    or its fill value is text UTF-8 cannot hold (a lone surrogate)."""
    if meta.data_type.name not in TEXT_TYPES:
        return None
    codecs = _swapped(meta.codecs, lambda codec: {**codec, "name": codec["name"].replace(UTF8, BYTES)}, _v2_as_bytes)
    fill = meta.fill_value.item()
    if codecs is None or not isinstance(fill, str):
        return None
    try:
        fill_bytes = fill.encode("utf-8")
    except UnicodeEncodeError:
        return None
    fill_value = np.empty((), dtype=object)
    fill_value[()] = fill_bytes
    return dataclasses.replace(meta, data_type=DataType("bytes", np.dtype(object)), fill_value=fill_value,
                               codecs=codecs)


def sizes_view(meta: ArrayMetadata, fill_size: int, decode_limit: int) -> ArrayMetadata | None:
    """`meta` with each chunk read as the size of its lines (codecs/vlen_line_sizes.py: the
    first element of a chunk holds it), the fill value as `fill_size`, the size of its line;
    at most `decode_limit` elements decoded one by one. None when it is no string array of
    vlen-utf8 alone (v2: no filter after it, no compressor of arrays), or its chunk grid is
    not regular (whole chunks are told by their shape)."""
    if meta.data_type.name not in TEXT_TYPES or not regular(meta.chunk_shape):
        return None
    sizes = {"name": LINE_SIZES, "configuration": {"decode_limit": decode_limit}}
    codecs = _swapped(meta.codecs, lambda codec: sizes,
                      lambda codec, configuration: None if len(configuration["filters"]) > 1
                      or configuration.get("compressor") else sizes)
    if codecs is None:
        return None
    return dataclasses.replace(meta, data_type=DataType(SIZES.str, SIZES), fill_value=np.array(fill_size, SIZES),
                               codecs=codecs)


def _v2_as_bytes(codec: dict, configuration: dict) -> dict:
    filters = [{**configuration["filters"][0], "id": BYTES}, *configuration["filters"][1:]]
    return {**codec, "configuration": {**configuration, "filters": filters}}


def _swapped(codecs, v3: Callable[[dict], dict], v2: Callable[[dict, dict], dict | None]) -> tuple[dict, ...] | None:
    """The codecs with vlen-utf8 (v3, a shard's inner codecs) as v3(codec) makes it, v2's
    filters codec whose first is vlen-utf8 as v2(codec, its configuration) does; None when
    there is none, or v2 gives None (filters it cannot replace)."""
    out, swapped = [], False
    for codec in codecs:
        name, configuration = codec.get("name"), codec.get("configuration") or {}
        if name in (UTF8, PREFIX + UTF8):
            codec, swapped = v3(codec), True
        elif name == V2_FILTERS and (configuration.get("filters") or [{}])[0].get("id") == UTF8:
            replaced = v2(codec, configuration)
            if replaced is None:
                return None
            codec, swapped = replaced, True
        elif name == SHARDING and isinstance(configuration.get("codecs"), (list, tuple)):
            inner = _swapped(configuration["codecs"], v3, v2)
            if inner is not None:
                codec, swapped = {**codec, "configuration": {**configuration, "codecs": list(inner)}}, True
        out.append(codec)
    return tuple(out) if swapped else None
