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

from zarrfs.engine import growth
from zarrfs.engine.array import Array
from zarrfs.format.v3 import ArrayMetadata

log = logging.getLogger(__name__)

ALL, MARKED, NONE = "all", "marked", "none"
CHOICES = (ALL, MARKED, NONE)


def marked(rule: str, node, hierarchy) -> bool:
    """Whether the array of `node` grows under `rule` (its dimension 0 may change)."""
    meta = node.meta
    if rule == NONE or not isinstance(meta, ArrayMetadata) or not meta.shape:
        return False
    return rule == ALL or meta.shape[0] == 0 or _unlimited(node, hierarchy)


def grows(rule: str, node, hierarchy, array: Array) -> bool:
    """Whether writes past the end of `array` (the node's) append records: marked under `rule`,
    and able to (growth.why_fixed; a marked array that cannot is logged, once per call). The
    mount and zarrfs.open_raw decide alike."""
    if not marked(rule, node, hierarchy):
        return False
    why = growth.why_fixed(array)
    if why is not None:
        log.warning("%s: marked to grow, but does not: %s", node.path or "/", why)
    return why is None


def _unlimited(node, hierarchy) -> bool:
    """NCZarr marks the array's first dimension unlimited."""
    meta = node.meta
    described = meta.attributes.get("_nczarr_array") or meta.document.get("_nczarr_array")
    refs = described.get("dimrefs") or described.get("dimension_references") if isinstance(described, dict) else None
    if not isinstance(refs, list) or not refs or not isinstance(refs[0], str) or "/" not in refs[0]:
        return False
    group_path, _, name = refs[0].strip("/").rpartition("/")
    group = hierarchy.node(group_path)
    if group is None or group.meta is None:
        return False
    described = _nczarr_group(group)
    dims = described.get("dims") or described.get("dimensions")
    found = dims.get(name) if isinstance(dims, dict) else None
    return isinstance(found, dict) and str(found.get("unlimited", 0)) == "1"


def _nczarr_group(group) -> dict:
    """The group's `_nczarr_group`: in its attributes, or (NCZarr before 4.9) in .zgroup, the
    group's document as read."""
    for described in (group.meta.attributes.get("_nczarr_group"), group.meta.document.get("_nczarr_group")):
        if isinstance(described, dict):
            return described
    return {}
