"""Arrays the TIFF view is tried on, shared by its own tests and Bio-Formats': 2-D to 5-D, with
dimension names in ImageJ's order, and values of each data type."""

import numpy as np

SHAPES = {2: (5, 7), 3: (3, 5, 7), 4: (2, 3, 5, 7), 5: (2, 3, 2, 5, 7)}
NAMES = {2: ("y", "x"), 3: ("z", "y", "x"), 4: ("t", "c", "y", "x"), 5: ("t", "z", "c", "y", "x")}
IMAGEJ = {"bool", "uint8", "uint16", "float32"}  # with names in ImageJ's order: an ImageJ hyperstack
OME_AXES = [{"name": "t", "type": "time", "unit": "second"}, {"name": "c", "type": "channel"},
            {"name": "z", "type": "space", "unit": "micrometer"}, {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"}]


def values_of(dtype: str, shape, rng) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "c":  # real and imaginary parts differ: their order shows
        return (rng.normal(size=shape) * 100 + 1j * rng.normal(size=shape)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return (rng.normal(size=shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
