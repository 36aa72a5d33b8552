"""reshape (zarr-extensions, codecs/reshape): an array->array codec that gives a chunk another
shape with the same C order. Each output size is a number, -1 (at most once: what is left), or
a list of input dimensions whose product it is; those lists, flattened, must increase strictly
and each must be the input's dimensions that fall at that place (the README's two rules)."""

import itertools
import math

import numpy as np

from zarrfs.codecs.base import ArrayArrayCodec, ChunkSpec
from zarrfs.errors import MetadataError


class ReshapeCodec(ArrayArrayCodec):

    def __init__(self, config: dict, spec: ChunkSpec, where: str):
        super().__init__(config, spec, where)
        if set(config) != {"shape"} or not isinstance(config["shape"], list) or not config["shape"]:
            raise MetadataError(f"{where}: configuration must be {{'shape': a non-empty list}}, not {config!r}")
        self.input_shape = spec.shape
        self.shape = _output_shape(config["shape"], spec.shape, where)

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(self.shape, spec.data_type, spec.fill_value)

    def encode(self, array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array).reshape(self.shape)

    def decode(self, array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array).reshape(self.input_shape)

    def encoded_size(self, nbytes: int) -> int | None:
        return nbytes


def _output_shape(entries: list, input_shape: tuple, where: str) -> tuple[int, ...]:
    sizes, flat = [], []
    for i, entry in enumerate(entries):
        if isinstance(entry, list):
            if not entry or not all(type(d) is int and 0 <= d < len(input_shape) for d in entry):
                raise MetadataError(f"{where}: shape[{i}] must list input dimensions 0..{len(input_shape) - 1}")
            flat += entry
            sizes.append(math.prod(input_shape[d] for d in entry))
        elif type(entry) is int and (entry >= 1 or entry == -1):
            sizes.append(entry)
        else:
            raise MetadataError(f"{where}: shape[{i}] must be a positive size, -1 or a list of input dimensions")
    if any(b <= a for a, b in itertools.pairwise(flat)):
        raise MetadataError(f"{where}: the input dimensions listed must increase strictly, not {flat}")
    total = math.prod(input_shape)
    if sizes.count(-1) > 1:
        raise MetadataError(f"{where}: -1 may appear once")
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        if known == 0 or total % known:
            raise MetadataError(f"{where}: no size for -1 makes {sizes} hold {total} elements")
        sizes[sizes.index(-1)] = total // known
    if math.prod(sizes) != total:
        raise MetadataError(f"{where}: shape {sizes} does not hold the {total} elements of {list(input_shape)}")
    for i, entry in enumerate(entries):
        if isinstance(entry, list) and (math.prod(sizes[:i]) != math.prod(input_shape[:entry[0]])
                                        or math.prod(sizes[i + 1:]) != math.prod(input_shape[entry[-1] + 1:])):
            raise MetadataError(f"{where}: shape[{i}] = {entry} does not stand where those input dimensions do")
    return tuple(sizes)
