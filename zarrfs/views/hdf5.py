"""zarr.h5 and zarr.nc: a group and everything below it as one HDF5 file in netCDF-4's conventions.

The file's metadata is written by h5py (an optional extra, `zarrfs[hdf5]`), not by hand: a
template holding every array as a contiguous dataset, allocated early and never filled, is
written into a sparse scratch file, and the library says where each dataset's bytes begin. The
view keeps the template's metadata bytes (its holes are zeros) and maps each dataset's byte range
onto the array's flat bytes, the bytes of NAME.bin, decoded on demand. See docs/formats.md.

- Subgroups are HDF5 groups (empty ones too); a group's and an array's attributes are HDF5
  attributes, as JSON text where HDF5 has no type for them (objects, null, mixed lists). Text is
  NC_CHAR (a fixed-length string) as netCDF-C writes it; CF's _FillValue, missing_value and valid
  range (and a float's scale_factor, add_offset) are in the variable's type.
- Dimension names become netCDF-4 dimensions, i.e. HDF5 dimension scales: an array named as its
  one dimension is that dimension's coordinate variable, other dimensions get a dimension-only
  scale. Within one group a name used with a second length becomes NAME_LENGTH; unnamed axes are
  phony_dim_N, one per length, as netCDF-C names them.
- bool is int8 0/1 with attribute dtype="bool" (xarray's convention); complex is a committed
  compound {r, i}; a v2 fill_value is _FillValue (xarray masks it), a v3 one is not.
- Left out, and named in the attribute `zarrfs_omitted` of their group: float16, fixed-length
  unicode and bytes, datetimes, raw bits, variable-length strings and bytes, unreadable arrays.
"""

import base64
import bisect
import json
import logging
import os
import reprlib
import tempfile
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from zarrfs import names
from zarrfs.errors import ViewError, ViewTooLargeError
from zarrfs.views.tiles import Tiles

log = logging.getLogger(__name__)

NAMES = ("zarr.h5", "zarr.nc")  # the same file: .nc for netCDF tools that go by the suffix
MAX_NODES = 20_000  # arrays and groups in one file: more is refused (h5py writes ~1,000 a second)
LIBVER = ("v108", "v110")  # readable by HDF5 1.8 and later (Debian's 1.10, netCDF 4.9); large attributes need v108
PHONY_NAME = "This is a netCDF dimension but not a netCDF variable."  # netCDF-C's mark of a dimension-only scale
# datasets of 1 MiB or more begin at a multiple of 1 MiB (the holes before them cost nothing): the
# kernel's 1 MiB reads of them then cover the same element ranges as reads of NAME.bin
ALIGNMENT = 1 << 20
KINDS = "biufc"  # element kinds HDF5 and netCDF-4 both read; float16 is excluded by name
OMITTED_ATTRIBUTE = "zarrfs_omitted"
MAX_NAME = 1024  # bytes of an attribute name written (HDF5's own limit is its object header's 64 KiB)
# CF attributes of a variable that netCDF tools read in the variable's type (CF 1.11, 2.5.1 and 8.1)
TYPED_ATTRIBUTES = {"missing_value", "valid_min", "valid_max", "valid_range"}
PACKING_ATTRIBUTES = {"scale_factor", "add_offset"}
HIDDEN_ATTRIBUTES = {"_ARRAY_DIMENSIONS"}  # xarray's v2 dimension names: they are the dimension scales
# attributes HDF5's dimension scales and netCDF-4 write themselves: a Zarr attribute of that name is left out
RESERVED_ATTRIBUTES = {"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates",
                       "_NCProperties", "_nc3_strict", OMITTED_ATTRIBUTE}


HDF5ViewError, TooLargeError = ViewError, ViewTooLargeError  # this view's names for them

def available() -> bool:
    try:
        import h5py  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Member:
    """What goes into the file: a group or an array, by its path relative to the view's group."""

    path: str  # relative, '' for the view's group
    node: object  # hierarchy.Node
    children: tuple = ()  # of a group: its members' names, in name order


# what a Layout holds besides its metadata's bytes, measured with tracemalloc (CPython 3.11,
# tests/views/test_views_pyramid.py): an Extent or a level's Tiles with its list slot and what it
# alone holds (path, shape, tile); a metadata piece's tuple, offset and bytes header; the Layout
EXTENT_BYTES, METADATA_BYTES, LAYOUT_BYTES = 360, 130, 460


class Extent(NamedTuple):
    """nbytes of the file at offset are the flat bytes of the array at store path `path` from
    byte `at` on (a dataset: all of them)."""

    offset: int
    nbytes: int
    path: str
    at: int = 0


@dataclass
class Layout:
    """The file: its size, the template's metadata bytes by offset, and the byte ranges that are
    arrays' flat bytes, by offset."""

    size: int
    metadata: list[tuple[int, bytes]] = field(default_factory=list)
    data: list["Extent | Tiles"] = field(default_factory=list)
    listed: int = 0  # zarr.h5: the size listings showed before it was made (size_bound)

    def __sizeof__(self) -> int:
        """What the layout holds in memory, as the header cache (sys.getsizeof) counts it: its
        metadata bytes, and the objects around them and its extents (EXTENT_BYTES...)."""
        return sum(len(b) + METADATA_BYTES for _, b in self.metadata) + EXTENT_BYTES * len(self.data) + LAYOUT_BYTES

    def extents(self) -> list[tuple[int, int, object]]:
        """(offset, length, bytes, Extent or Tiles), by offset."""
        return sorted([(o, len(b), b) for o, b in self.metadata] + [(e.offset, e.nbytes, e) for e in self.data],
                      key=lambda e: e[0])


def linkable(name) -> bool:
    """Whether `name` can be an HDF5 link: a dimension named "a/b" would make a group a, and a
    node name that is not UTF-8 has no HDF5 (nor netCDF) spelling (docs/names.md)."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name \
        and names.text(name) is not None and len(name.encode("utf-8")) <= MAX_NAME


def writable(meta) -> bool:
    """Whether HDF5 and netCDF-4 both hold the array's data type."""
    dtype = meta.data_type.numpy
    return dtype.kind in KINDS and dtype != np.float16


def build(members: list[Member], store_path_of, max_bytes: int) -> Layout:
    """The layout of the file describing `members` (a group first, then what is below it, each
    group before its members). store_path_of(member) gives an array's store path."""
    import h5py

    if len(members) > MAX_NODES:
        raise TooLargeError(f"{len(members)} arrays and groups: more than the {MAX_NODES} one HDF5 view describes")
    try:
        layout = _build(h5py, members, store_path_of, max_bytes)
    except (OSError, RuntimeError, ValueError, TypeError, KeyError) as e:  # h5py's errors, the scratch file's
        raise HDF5ViewError(f"h5py cannot write its template: {e}") from e
    bound = size_bound(members)
    if layout.size > bound:  # listings showed a size too small: the file is shown whole, its size moves
        log.warning("%s: its HDF5 view takes %d bytes, more than the %d listed before it was made (size_bound)",
                    members[0].node.path or "/", layout.size, bound)
    layout.size = max(layout.size, bound)  # zeros after the end HDF5 records: the size listed is the size read
    layout.listed = bound
    return layout


# What the size bound allows for the template's metadata (size_bound), each figure at least
# twice what h5py was measured to write (docs/formats.md): an object header with its link, per
# attribute its message (or dense storage's heap and index), per axis its dimension list entry
# and back reference, per distinct dimension of a group its scale
BOUND_BASE = 16384  # superblock, the root group, the committed complex types
BOUND_MEMBER = 1024  # a group's or an array's object header and its link in the parent
BOUND_ATTRIBUTE = 256  # an attribute's message, besides its name and value
BOUND_AXIS = 256  # DIMENSION_LIST's reference to the scale and the scale's REFERENCE_LIST entry
BOUND_DIMENSION = 2048  # a dimension's scale (a dimension-only dataset, or a coordinate's attributes)
BOUND_NUMBER = 8  # an attribute's number in HDF5 (int64, float64), whatever its JSON spelling ("0, " is 3)
BOUND_STRING = 64  # a string of a list attribute besides its text: its reference and heap object
BOUND_HEAP = 4096  # the global heap collection a list of strings opens (HDF5's smallest)


def size_bound(members: list[Member]) -> int:
    """The size the file is shown with before it is made, from metadata alone (no h5py, no
    chunk): every array's bytes, a dataset of 1 MiB or more its alignment besides, and a bound
    of the metadata h5py writes for the members and their attributes. The file made is padded
    with zeros to this size (HDF5 reads only up to the end its superblock records), so that
    listing a group never makes its file; build() says when a file exceeds it. A sum over the
    members of name_bound and node_bound, and of the dimensions of each group's arrays: a
    listing adds it up a group at a time (fs/hierarchy.py), with group_bound too."""
    found = {member.path: member.node for member in members}
    size = BOUND_BASE
    for member in members:
        if member.path and not walked(member.path.rpartition("/")[2], member.node):
            continue  # its parent's group_bound counts it whole
        children = [(name, found[f"{member.path}/{name}" if member.path else name]) for name in member.children]
        size += group_bound(member.node, children)
    return size


def walked(name: str, node) -> bool:
    """Whether the child `name` is a group whose members the file holds too (members_of's rule:
    an unlinkable group, or one that cannot be read, is one member alone)."""
    return node.kind == "group" and node.meta is not None and linkable(name)


def group_bound(group, children: list) -> int:
    """size_bound's share of a group and its children [(name, node)], BOUND_BASE left out: its
    node, their names, the children that are not walked (each walked group adds its own), and
    a scale for each distinct dimension of its arrays."""
    size, dimensions = node_bound(group), set()
    for name, child in children:
        size += name_bound(name) + (0 if walked(name, child) else node_bound(child))
        if child.kind == "array" and child.meta is not None:
            dimensions |= dimension_keys(child.meta)
    return size + BOUND_DIMENSION * len(dimensions)


def name_bound(name: str) -> int:
    """size_bound's share of a member's name (its link, its entry in a list of omitted names)."""
    return 2 * len(name.encode("utf-8", "surrogatepass"))


def node_bound(node) -> int:
    """size_bound's share of a node, its name and dimensions left out: its object header, its
    attributes, and an array's bytes and axes."""
    meta = node.meta
    if meta is None:
        return BOUND_MEMBER
    size = BOUND_MEMBER + sum(BOUND_ATTRIBUTE + 2 * len(key.encode("utf-8", "surrogatepass")) + _value_bound(value)
                              for key, value in meta.attributes.items())
    if node.kind != "array":
        return size
    if writable(meta):
        size += meta.nbytes + (ALIGNMENT if meta.nbytes >= ALIGNMENT else 0)
    return size + BOUND_AXIS * len(meta.shape)


def dimension_keys(meta) -> set[tuple]:
    """(name or None, length) of each axis: a group's distinct ones each cost a scale."""
    dims = _dimension_names(meta) or (None,) * len(meta.shape)
    return set(zip(dims, meta.shape, strict=False))


def _value_bound(value) -> int:
    """What an attribute's value may take in the file, twice what was measured: as JSON text
    (_attribute's fallback), or in HDF5's own form (_attribute), whichever is more. A list of
    small numbers or of short strings takes more in HDF5 than its JSON spelling."""
    items = value if isinstance(value, list) else [value]
    native = 2 * BOUND_NUMBER * len(items)
    if isinstance(value, list) and any(isinstance(v, str) for v in items):
        native += BOUND_HEAP + sum(BOUND_STRING + 2 * len(v.encode("utf-8", "surrogatepass"))
                                   for v in items if isinstance(v, str))
    return max(2 * _json_size(value), native)


def _json_size(value) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):
        return len(repr(value))


def _build(h5py, members: list[Member], store_path_of, max_bytes: int) -> Layout:
    with tempfile.NamedTemporaryFile(prefix="zarrfs-", suffix=".h5") as scratch:
        placed = []
        with h5py.File(scratch.name, "w", libver=LIBVER, alignment_threshold=ALIGNMENT,
                       alignment_interval=ALIGNMENT) as f:
            writer = _Writer(f, members)
            for member in members:
                dataset = writer.add(member)
                if dataset is not None:
                    placed.append((dataset, member))
            writer.finish()
            data = [(d.id.get_offset(), member.node.meta.nbytes, store_path_of(member)) for d, member in placed]
        data = [Extent(o, n, p) for o, n, p in data if o is not None and n]
        return Layout(os.path.getsize(scratch.name), _metadata(scratch.name, data, max_bytes), sorted(data))


def _metadata(name: str, data: list, max_bytes: int) -> list[tuple[int, bytes]]:
    """The template's written bytes outside the datasets: its holes are left out (they read as zeros)."""
    out, kept = [], 0
    with open(name, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        gaps, start = [], 0
        for offset, nbytes, *_ in sorted(data):
            if offset > start:
                gaps.append((start, offset))
            start = max(start, offset + nbytes)
        if start < size:
            gaps.append((start, size))
        for begin, end in gaps:
            for lo, hi in _written(f.fileno(), begin, end):
                out.append((lo, os.pread(f.fileno(), hi - lo, lo)))  # lseek moved the position: pread
                kept += hi - lo
                if kept > max_bytes:
                    raise TooLargeError(f"its HDF5 metadata is more than header_cache_size ({max_bytes} bytes)")
    return out


def _written(fd: int, begin: int, end: int):
    """The (start, end) ranges of [begin, end) that hold data, by SEEK_DATA and SEEK_HOLE."""
    position = begin
    while position < end:
        try:
            lo = os.lseek(fd, position, os.SEEK_DATA)
        except OSError:  # ENXIO: no data past position
            return
        if lo >= end:
            return
        hi = min(os.lseek(fd, lo, os.SEEK_HOLE), end)
        yield lo, hi
        position = hi


class _Writer:
    """Writes the members into an h5py file: groups, datasets, attributes, dimension scales."""

    def __init__(self, f, members: list[Member]):
        import h5py

        self.h5py, self.f = h5py, f
        self.kids = {m.path: m.children for m in members if m.node.kind == "group"}
        self.arrays = {m.path: m for m in members if m.node.kind == "array"}
        self.dims: dict[str, dict[str, int]] = {}  # group path -> dimension name -> length
        self.attached: list[tuple[object, int, str, str]] = []  # (dataset, axis, group path, dimension)
        self.omitted: dict[str, list[str]] = {}
        self.types: dict[str, object] = {}
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.CONTIGUOUS)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)  # the offset is known before anything is written
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)  # nothing is written: the scratch file stays sparse
        self.dcpl = dcpl

    def add(self, member: Member):
        parent, _, name = member.path.rpartition("/")
        node = member.node
        if member.path and not linkable(name):  # its members were not walked (members_of)
            self.omitted.setdefault(parent, []).append(names.printable(name))
            return None
        if node.kind == "group":
            group = self.f.require_group(member.path) if member.path else self.f
            if node.meta is not None:
                _set_attributes(group, node.meta.attributes, member.path or "/")
            return None
        if node.meta is None or not writable(node.meta) or not linkable(name):
            self.omitted.setdefault(parent, []).append(names.printable(name))
            return None
        meta = node.meta
        dataset = self._dataset(parent, name, tuple(meta.shape), self._type(meta))
        # _FillValue first, where netCDF-C and xarray's netCDF writers put it (ncks and ncdump list in order)
        attributes = dict(sorted(((k, v) for k, v in meta.attributes.items() if k not in HIDDEN_ATTRIBUTES),
                                 key=lambda item: item[0] != "_FillValue"))
        if meta.data_type.numpy.kind == "b":
            attributes["dtype"] = "bool"
        stored_fill = meta.document.get("fill_value") if meta.zarr_format == 2 else None  # as written: null is none
        if stored_fill is not None and "_FillValue" not in attributes:
            _set_fill(dataset, stored_fill, meta.data_type.numpy, member.path)
        _set_attributes(dataset, attributes, member.path, meta.data_type.numpy)
        for axis, dim in enumerate(self._dimensions(parent, name, meta)):
            self.attached.append((dataset, axis, parent, dim))
        return dataset

    def _dataset(self, parent: str, name: str, shape: tuple, stored):
        """A contiguous dataset allocated now and never filled (the low-level call: h5py's
        create_dataset allocates no storage for a 0-d one)."""
        h5py = self.h5py
        space = h5py.h5s.create(h5py.h5s.SCALAR) if shape == () else h5py.h5s.create_simple(shape)
        type_id = stored.id if isinstance(stored, h5py.Datatype) else h5py.h5t.py_create(stored, logical=True)
        return h5py.Dataset(h5py.h5d.create(self.f[parent or "/"].id, name.encode(), type_id, space, dcpl=self.dcpl))

    def _type(self, meta):
        dtype = meta.data_type.numpy
        if dtype.kind == "b":
            return np.dtype("i1")
        if dtype.kind != "c":
            return dtype.newbyteorder("<")
        name = dtype.name  # complex64, complex128: committed once, at the top, as netCDF-4 wants user types
        if name not in self.types:
            part = np.dtype(f"<f{dtype.itemsize // 2}")
            link, taken = name, set(self.kids.get("", ()))  # members are made in name order: some may come later
            while link in taken or link in self.f:
                link += "_type"
            self.f[link] = np.dtype([("r", part), ("i", part)])
            self.types[name] = self.f[link]
        return self.types[name]

    def _dimensions(self, group: str, name: str, meta) -> list[str]:
        """The netCDF dimension of each axis; a name taken with another length gets its length added."""
        known = self.dims.setdefault(group, {})
        names = _dimension_names(meta)
        out = []
        for axis, length in enumerate(meta.shape):
            dim = names[axis] if names and linkable(names[axis]) else self._phony(known, length)
            original = dim
            while (dim in known and known[dim] != length) or self._taken(group, dim, length):
                dim = f"{original}_{length}" if dim == original else f"{dim}_"
            if dim != original:
                log.info("%s: dimension %r of length %d is %r in its HDF5 view (the name has another length)",
                         f"{group}/{name}".lstrip("/"), original, length, dim)
            known[dim] = length
            out.append(dim)
        return out

    @staticmethod
    def _phony(known: dict[str, int], length: int) -> str:
        for dim, n in known.items():
            if dim.startswith("phony_dim_") and n == length:
                return dim
        return f"phony_dim_{sum(d.startswith('phony_dim_') for d in known)}"

    def _taken(self, group: str, dim: str, length: int) -> bool:
        """A link of that name that cannot be the dimension's coordinate variable."""
        path = f"{group}/{dim}" if group else dim
        if dim in self.kids.get(group, ()) and path not in self.arrays:
            return True  # a subgroup
        member = self.arrays.get(path)
        if member is None:
            return False
        meta = member.node.meta
        return meta is None or not writable(meta) or tuple(meta.shape) != (length,) or \
            (_dimension_names(meta) or (dim,))[0] not in (dim, None)

    def finish(self) -> None:
        """Dimension scales (coordinate variables, else dimension-only scales), then the lists of
        arrays left out."""
        scales = {}
        ids = {(group, dim): i for i, (group, dim) in
               enumerate((group, dim) for group, dims in self.dims.items() for dim in dims)}  # unique in the file, as netCDF's
        for dataset, axis, group, dim in self.attached:
            key = (group, dim)
            if key not in scales:
                scales[key] = self._scale(group, dim, ids[key])
            if scales[key] != dataset:  # a coordinate variable is its own scale
                dataset.dims[axis].attach_scale(scales[key])
        for group, left_out in self.omitted.items():
            self.f[group or "/"].attrs[OMITTED_ATTRIBUTE] = np.array(left_out, dtype=self.h5py.string_dtype())

    def _scale(self, group: str, dim: str, dimid: int):
        length = self.dims[group][dim]
        path = f"{group}/{dim}" if group else dim
        if path in self.arrays and path in self.f:  # a coordinate variable
            scale = self.f[path]
            scale.make_scale(dim)
        else:
            scale = self.f[group or "/"].create_dataset(dim, shape=(length,), dtype="<f4")  # never allocated
            scale.make_scale(f"{PHONY_NAME}{length:10d}")
        scale.attrs["_Netcdf4Dimid"] = np.int32(dimid)
        return scale


def _dimension_names(meta) -> tuple | None:
    from zarrfs.views.info import dimension_names

    return dimension_names(meta)


def _set_attributes(obj, attributes: dict, where: str, dtype: np.dtype | None = None) -> None:
    for key, value in attributes.items():
        if key in RESERVED_ATTRIBUTES:
            log.info("%s: attribute %r left out of its HDF5 view: HDF5 or netCDF-4 writes that name", where, key)
        elif not 0 < len(key.encode("utf-8", "surrogatepass")) <= MAX_NAME or "\0" in key:
            # checked first: HDF5 refusing a name past its object header's limit leaves the header broken
            log.info("%s: attribute %r left out of its HDF5 view: HDF5 cannot hold its name", where, key[:80])
        elif key == "_FillValue" and dtype is not None:
            _set_fill(obj, value, dtype, where)
        elif dtype is not None and _in_variable_type(key, dtype):
            _set_typed(obj, key, value, dtype, where)
        elif not _set_attribute(obj, key, _attribute(value)) and not _set_attribute(obj, key, _text(json.dumps(value))):
            log.info("%s: attribute %r left out of its HDF5 view: HDF5 cannot hold its value", where, key[:80])


def _in_variable_type(key: str, dtype: np.dtype) -> bool:
    """Whether CF wants the attribute in the variable's own type: missing_value and the valid
    range always (of the stored, packed, type), scale_factor and add_offset when the variable
    is a float (an integer's packing factors are floats: their type is the unpacked type)."""
    if key in TYPED_ATTRIBUTES:
        return dtype.kind != "c"
    return key in PACKING_ATTRIBUTES and dtype.kind == "f"


def _set_typed(obj, key: str, value, dtype: np.dtype, where: str) -> None:
    items = value if isinstance(value, list) else [value]
    typed = [_fill_value(v, dtype) for v in items]
    if not items or any(v is None for v in typed):
        log.info("%s: attribute %r = %s has no value of the variable's type: written as it is in its HDF5 view",
                 where, key, repr(value)[:80])
        written = _set_attribute(obj, key, _attribute(value)) or _set_attribute(obj, key, _text(json.dumps(value)))
    else:
        array = np.array(typed, dtype=typed[0].dtype)
        written = _set_attribute(obj, key, array if isinstance(value, list) else array[0])
    if not written:
        log.info("%s: attribute %r left out of its HDF5 view: HDF5 cannot hold its value", where, key)


def _set_attribute(obj, key: str, value) -> bool:
    """Whether HDF5 took it. Its refusals come as TypeError, ValueError, RuntimeError or KeyError
    (an empty name, a name or value beyond an object header's 64 KiB), after which the attribute
    may be half made: it is removed."""
    try:
        obj.attrs[key] = value
        return True
    except Exception as e:  # noqa: BLE001 - any refusal of h5py: the caller tries JSON text, then leaves it out
        log.debug("attribute %r: %s", key[:80], e)
        return False


def _attribute(value):
    """The HDF5 value of a JSON attribute: numbers, strings and lists of one kind natively, bool as
    int8 (netCDF has no boolean), everything else as JSON text."""
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(v, bool) for v in items):
        kind = "i1"
    elif items and all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        kind = "i8" if all(-(1 << 63) <= v < (1 << 63) for v in items) else None
    elif items and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        kind = "f8"
    elif items and all(isinstance(v, str) for v in items):
        import h5py

        return _text(value) if isinstance(value, str) else np.array(items, dtype=h5py.string_dtype())
    else:
        kind = None
    if kind is None:
        return json.dumps(value)
    array = np.array(items, dtype=kind)
    return array if isinstance(value, list) else array[0]


def _text(value: str):
    """One string as netCDF-C's nc_put_att_text, NCO and CDO write a text attribute: NC_CHAR, a
    fixed-length HDF5 string, empty as a null dataspace. Non-ASCII text is marked UTF-8 (netCDF-C
    marks it ASCII, which h5netcdf decodes as surrogates). Variable-length
    strings (NC_STRING) are left to lists, which NC_CHAR cannot hold: Octave's ncinfo fails on
    NC_STRING (issue 40) and ncdump -t reads only NC_CHAR units. A string with a NUL is given
    back as it is: HDF5 refuses it, and the caller writes it as JSON text (NC_CHAR would end it)."""
    import h5py

    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: HDF5 refuses the str, and the caller writes JSON text
        return value
    if "\0" in value:
        return value
    encoding = "ascii" if encoded.isascii() else "utf-8"
    if not encoded:
        return h5py.Empty(h5py.string_dtype(encoding, 1))
    return np.array(encoded, dtype=h5py.string_dtype(encoding, len(encoded)))


def _set_fill(obj, value, dtype: np.dtype, where: str) -> None:
    """_FillValue in the variable's own type, as netCDF requires."""
    fill = _fill_value(value, dtype)
    if fill is None:
        shown = reprlib.repr(value)  # a fill value is the metadata's: it may be any size
        log.info("%s: fill value %s has no value of its type: no _FillValue in its HDF5 view", where, shown)
        return
    obj.attrs["_FillValue"] = fill


def _fill_value(value, dtype: np.dtype):
    """A fill value as zarr v2 metadata or xarray's attributes give it (numbers, NaN and Infinity
    as words, xarray's base64 bytes for v3), as one element of the stored type."""
    stored = np.dtype("i1") if dtype.kind == "b" else dtype.newbyteorder("<")
    try:
        if dtype.kind == "c":
            if isinstance(value, list) and len(value) == 2:
                value = complex(*(_float(part, np.dtype("<f8")) for part in value))
            part = np.dtype(f"<f{dtype.itemsize // 2}")
            c = np.asarray(value, dtype)
            return np.array((c.real, c.imag), dtype=[("r", part), ("i", part)])
        if dtype.kind == "f":
            return np.asarray(_float(value, stored)).astype(stored)[()]
        number = float(value) if isinstance(value, str) else value
        with np.errstate(all="ignore"):
            cast = np.asarray(number).astype(stored)[()]
        if stored.kind in "iu" and cast != number:  # NaN, a fraction or out of range: no such value
            return None
        return cast
    except (TypeError, ValueError, OverflowError, base64.binascii.Error):
        return None


def _float(value, stored: np.dtype):
    """A float as Zarr and xarray write one: a number, NaN or Infinity as a word, or base64 of
    its bytes: xarray's v3 _FillValue is a little-endian float64 whatever the variable's width
    (FillValueCoder), zarr's own of the stored type. A float64 beyond a float32's range is
    refused rather than made infinite."""
    if not isinstance(value, str) or value in ("NaN", "Infinity", "-Infinity"):
        wide = float(value)
    else:
        raw = base64.b64decode(value, validate=True)
        if len(raw) == stored.itemsize:
            return np.frombuffer(raw, stored)[0]
        if len(raw) != 8:
            raise ValueError(f"{len(raw)} bytes for a {stored.itemsize}-byte float")
        wide = np.frombuffer(raw, "<f8")[0]
    if np.isfinite(wide) and abs(float(wide)) > float(np.finfo(stored).max):  # as floats: no cast that overflows
        raise ValueError(f"{wide} is beyond a {stored.itemsize}-byte float")
    return wide


class GroupFile:
    """A file of a layout: reads fill from the template's bytes, the arrays' flat bytes (through
    raw_of(store path), a RawFile), tiles of arrays (views/tiles.py) and zeros for the template's holes."""

    def __init__(self, layout: Layout, raw_of):
        self.layout, self.raw_of, self.size = layout, raw_of, layout.size
        self._extents = layout.extents()
        self._starts = [e[0] for e in self._extents]

    def read(self, offset: int, size: int) -> bytes:
        out = np.empty(max(0, min(size, self.size - offset)), "u1")
        return out[:self.read_into(offset, out)].tobytes()

    def read_malloced(self, offset: int, size: int) -> tuple[int, int]:
        """(address, count) in memory from malloc (replies.py): a read within one dataset is the
        array's own (a chunk decoded ahead as it is), any other is filled here."""
        from zarrfs.engine.buffers import malloced

        n = max(0, min(size, self.size - offset))
        within = self._within_dataset(offset, n)
        if within is not None:
            return within[0].read_malloced(within[1], n)
        return malloced(n, lambda out: self.read_into(offset, out))

    def stored_ranges(self, offset: int, size: int):
        """A read within one dataset: its array's stored bytes, as RawFile.stored_ranges gives
        them (an uncompressed array is answered from its files, engine/stored_as_is.py)."""
        n = max(0, min(size, self.size - offset))
        within = self._within_dataset(offset, n)
        return None if within is None else within[0].stored_ranges(within[1], n)

    def _within_dataset(self, offset: int, n: int):
        """(the dataset's RawFile, the offset in it) when bytes [offset, offset + n) lie in one
        dataset; else None."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0 and n:
            start, length, what = self._extents[i]
            if isinstance(what, Extent) and offset + n <= start + length:
                return self.raw_of(what.path), offset - start + what.at
        return None

    def read_into(self, offset: int, out: np.ndarray) -> int:
        n = max(0, min(len(out), self.size - offset))
        if offset < 0 or not n:
            return 0
        end, position = offset + n, offset  # out is filled up to position
        i = max(0, bisect.bisect_right(self._starts, offset) - 1)
        while i < len(self._extents) and self._extents[i][0] < end:
            start, length, what = self._extents[i]
            lo, hi = max(start, offset), min(start + length, end)
            if lo < hi:
                out[position - offset:lo - offset] = 0  # a hole of the template
                target = out[lo - offset:hi - offset]
                if isinstance(what, bytes):
                    target[:] = np.frombuffer(what, "u1", hi - lo, lo - start)
                elif isinstance(what, Extent):
                    self.raw_of(what.path).read_into(lo - start + what.at, target)
                else:  # tiles, each made from its box of the array
                    what.read_into(self.raw_of(what.path), lo - start, target)
                position = hi
            i += 1
        out[position - offset:n] = 0
        return n


def members_of(group_node, listing_of) -> list[Member]:
    """The group and every group and array below it, each group before its members (depth first,
    in name order), from listing_of(store path) -> [(name, node)] of a group's child nodes."""
    out, stack = [], [("", group_node)]
    while stack:
        path, node = stack.pop()
        linked = not path or linkable(path.rpartition("/")[2])  # an unlinkable group is left out whole
        children = listing_of(node.path) if node.kind == "group" and node.meta is not None and linked else []
        out.append(Member(path, node, tuple(name for name, _ in children)))
        if len(out) > MAX_NODES:
            raise TooLargeError(f"more than {MAX_NODES} arrays and groups below it")
        for name, child in reversed(children):
            stack.append((f"{path}/{name}" if path else name, child))
    return out


def version_of(members: list[Member]) -> tuple:
    """What the file depends on: every member's node, compared by identity (a node is made anew
    when its documents change)."""
    return tuple(m.node for m in members)


def same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))

