"""What a node is made of in either Zarr format, and reading it: v3 zarr.json, v2 .zarray,
.zgroup and .zattrs (translated into the same records, with the codecs they name), consolidated
copies as a cache in front of the per-node documents, and rewriting those copies after an edit."""
