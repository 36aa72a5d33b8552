"""The file system without FUSE: the naming scheme that turns a path into a node and one of its
files (data, sidecar, header views, previews, text), listings, and what stat reports for stored
values (sizes, dates, usage)."""
