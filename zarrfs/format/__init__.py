"""The Zarr metadata format, pure: data types and their NumPy forms, fill values, extension
points, and the v3 zarr.json documents parsed into frozen records. No I/O, no codecs."""
