"""The file system without FUSE: the naming scheme that turns a path into a node and one of its
files (data, sidecar, header views, previews, text), listings, what stat reports for stored
values (sizes, dates, usage), the open-array table with its write-back (open_arrays), and the
extended attributes (xattrs)."""
