"""Which arrays grow along dimension 0 (-o grow=all|marked|none; docs/writing.md, "Appending").

`marked`, the default, is netCDF's rule: a variable grows along an unlimited dimension. In Zarr
that mark is NCZarr's (netCDF-C writing Zarr): the variable's `_nczarr_array` names its
dimensions (`dimrefs`, fully qualified: "/time", "/g/time"), and the group that defines one
lists it in `_nczarr_group` `dims` as {"size": N, "unlimited": 1} (a plain N when it is fixed).
xarray writes no such mark (its Zarr backend refuses `unlimited_dims`), so an array it wrote
grows with `grow=all` only. An array whose dimension 0 is stored as 0 (made to be appended to,
as from a sidecar with shape [0, ...]) grows too.
"""

import logging
from collections.abc import Callable

from zarrfs.engine import growth
from zarrfs.engine.array import Array
from zarrfs.format.v3 import ArrayMetadata, GroupMetadata

log = logging.getLogger(__name__)

ALL, MARKED, NONE = "all", "marked", "none"
CHOICES = (ALL, MARKED, NONE)


MetaAt = Callable[[str], object]  # store path -> the node's metadata there (ArrayMetadata, GroupMetadata), or None


def marked(rule: str, meta: object, meta_at: MetaAt) -> bool:
    """Whether the array of metadata `meta` grows under `rule` (its dimension 0 may change);
    `meta_at` finds the group that defines its dimensions."""
    if rule == NONE or not isinstance(meta, ArrayMetadata) or not meta.shape:
        return False
    return rule == ALL or meta.shape[0] == 0 or _unlimited(meta, meta_at)


def grows(rule: str, path: str, meta: object, meta_at: MetaAt, array: Array) -> bool:
    """Whether writes past the end of `array` (at store path `path`) append records: marked
    under `rule`, and able to (growth.why_fixed; a marked array that cannot is logged, once per
    call). The mount and zarrfs.open_raw decide alike."""
    if not marked(rule, meta, meta_at):
        return False
    why = growth.why_fixed(array)
    if why is not None:
        log.warning("%s: marked to grow, but does not: %s", path or "/", why)
    return why is None


def _unlimited(meta: ArrayMetadata, meta_at: MetaAt) -> bool:
    """NCZarr marks the array's first dimension unlimited."""
    described = meta.attributes.get("_nczarr_array") or meta.document.get("_nczarr_array")
    refs = described.get("dimrefs") or described.get("dimension_references") if isinstance(described, dict) else None
    if not isinstance(refs, list) or not refs or not isinstance(refs[0], str) or "/" not in refs[0]:
        return False
    group_path, _, name = refs[0].strip("/").rpartition("/")
    group = meta_at(group_path)
    if not isinstance(group, GroupMetadata | ArrayMetadata):
        return False
    described = _nczarr_group(group)
    dims = described.get("dims") or described.get("dimensions")
    found = dims.get(name) if isinstance(dims, dict) else None
    return isinstance(found, dict) and str(found.get("unlimited", 0)) == "1"


def _nczarr_group(group: GroupMetadata | ArrayMetadata) -> dict:
    """The group's `_nczarr_group`: in its attributes, or (NCZarr before 4.9) in .zgroup, the
    group's document as read."""
    for described in (group.attributes.get("_nczarr_group"), group.document.get("_nczarr_group")):
        if isinstance(described, dict):
            return described
    return {}
