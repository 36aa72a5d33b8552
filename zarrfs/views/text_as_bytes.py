"""A string array read as the bytes it stores, for counting its text's size.

vlen-utf8 and vlen-bytes store a chunk alike (a count, then each element's length and bytes);
only the decode differs: numcodecs makes a str of each element's UTF-8 bytes, or a bytes object.
Making the str objects was most of the cost of a stat's size pass (about 2.5 times a bytes
decode), and the size needs only the bytes: an escaped line is an element's UTF-8 bytes plus a
byte per backslash and per newline. So the size pass reads a string array through this view of
its metadata (data type `bytes`, codec vlen-bytes, the fill value's UTF-8), and checks that
every chunk's bytes are UTF-8, as the str decode would when the file is opened.
"""

import dataclasses

import numpy as np

from zarrfs.codecs.numcodecs_adapter import PREFIX, V2_FILTERS
from zarrfs.format.data_types import DataType
from zarrfs.format.numpy_types import TEXT_TYPES
from zarrfs.format.v3 import ArrayMetadata

UTF8, BYTES = "vlen-utf8", "vlen-bytes"
SHARDING = "sharding_indexed"


def bytes_view(meta: ArrayMetadata) -> ArrayMetadata | None:
    """`meta` with its elements read as bytes; None when it is no string array of vlen-utf8,
    or its fill value is text UTF-8 cannot hold (a lone surrogate)."""
    if meta.data_type.name not in TEXT_TYPES:
        return None
    codecs, swapped = _codecs(meta.codecs)
    fill = meta.fill_value.item()
    if not swapped or not isinstance(fill, str):
        return None
    try:
        fill_bytes = fill.encode("utf-8")
    except UnicodeEncodeError:
        return None
    fill_value = np.empty((), dtype=object)
    fill_value[()] = fill_bytes
    return dataclasses.replace(meta, data_type=DataType("bytes", np.dtype(object)), fill_value=fill_value,
                               codecs=codecs)


def _codecs(codecs) -> tuple[tuple[dict, ...], bool]:
    """The codecs with vlen-utf8 (v3, v2's first filter, a shard's inner codecs) as vlen-bytes;
    and whether one was."""
    out, swapped = [], False
    for codec in codecs:
        name, configuration = codec.get("name"), codec.get("configuration") or {}
        if name in (UTF8, PREFIX + UTF8):
            codec, swapped = {**codec, "name": name.replace(UTF8, BYTES)}, True
        elif name == V2_FILTERS and (configuration.get("filters") or [{}])[0].get("id") == UTF8:
            filters = [{**configuration["filters"][0], "id": BYTES}, *configuration["filters"][1:]]
            codec, swapped = {**codec, "configuration": {**configuration, "filters": filters}}, True
        elif name == SHARDING and isinstance(configuration.get("codecs"), (list, tuple)):
            inner, swapped_inner = _codecs(configuration["codecs"])
            codec, swapped = {**codec, "configuration": {**configuration, "codecs": list(inner)}}, swapped or swapped_inner
        out.append(codec)
    return tuple(out), swapped
