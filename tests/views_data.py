"""A store for the header views: every data type in 1-D to 4-D, written by zarr-python, with
dimension names, plus a raw type; and what each format promises to express."""

import numpy as np
import zarr

import zarrfs
from helpers import array_doc, write_doc
from zarr_layouts import NUMERIC, random_values

SHAPES = {1: (7,), 2: (5, 7), 3: (3, 5, 7), 4: (2, 3, 5, 7)}
CHUNKS = {1: (3,), 2: (2, 3), 3: (2, 2, 3), 4: (1, 2, 2, 3)}
NAMES = ("t", "z", "y", "x")

# the data types each format can express (the table): everything else has no such file
ALL = set(NUMERIC)
EXPRESSIBLE = {
    "npy": ALL | {"r24"},
    "envi": ALL - {"int8", "float16"},
    "mhd": ALL - {"float16"},
    "nrrd": (ALL - {"float16"}) | {"r24"},
    "vrt": ALL - {"float16"},
    "nifti": ALL - {"float16"},
}
SUFFIX = {"npy": ".npy", "envi": ".bin.hdr", "mhd": ".mhd", "nrrd": ".bin.nhdr", "vrt": ".vrt", "nifti": ".hdr"}


def build(root) -> dict[str, np.ndarray]:
    """{array name: expected values}; arrays are named DTYPE_ND."""
    rng = np.random.default_rng(13)
    group = zarr.open_group(str(root), mode="w")
    expected = {}
    for dtype in NUMERIC:
        for ndim, shape in SHAPES.items():
            name = f"{dtype}_{ndim}d"
            z = group.create_array(name, shape=shape, chunks=CHUNKS[ndim], dtype=dtype,
                                   dimension_names=NAMES[-ndim:])
            values = random_values(dtype, shape, rng)
            if np.dtype(dtype).kind == "f":  # finite values: comparisons stay plain
                values = rng.normal(size=shape).astype(dtype)
            elif np.dtype(dtype).kind == "c":  # real and imaginary parts differ: their order shows
                values = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
            z[...] = values
            expected[name] = np.asarray(z[...])
    for ndim in (1, 3):  # a raw type zarr-python does not write: written through zarrfs's own API
        name = f"r24_{ndim}d"
        write_doc(root, name, array_doc(SHAPES[ndim], "r24", CHUNKS[ndim], dimension_names=list(NAMES[-ndim:])))
        values = rng.integers(0, 256, (*SHAPES[ndim], 3), dtype=np.uint8).view("V3")[..., 0]
        with zarrfs.open_raw(str(root), name, mode="r+") as view:
            view.write(0, values.tobytes())
        expected[name] = values
    return expected


def little(values: np.ndarray) -> np.ndarray:
    return values.astype(values.dtype.newbyteorder("<"))
