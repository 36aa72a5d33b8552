"""Which elements of each dirty chunk this mount wrote, so that a conflict merges elements.

On an object store shared by several machines, a conditional PUT can find that another machine
changed the chunk since this mount read it (ConflictError). The flush then reads the chunk as
now stored and keeps, of its own copy, only the elements written here: two machines writing
disjoint elements of one chunk (or one inner chunk) both persist; where both wrote the same
element, the last PUT wins.

Only arrays on remote stores keep masks (a bool per element of a partly written chunk, none for
a chunk written whole), and only until the chunk is stored.
"""

from collections.abc import Callable

import numpy as np

from zarrfs.geometry import Box

WHOLE = True  # the chunk was written whole: every element is this mount's


class WrittenMasks:
    def __init__(self, chunk_shape: tuple[int, ...] | Callable[[tuple[int, ...]], tuple[int, ...]]):
        self.chunk_shape = chunk_shape
        self._masks: dict[tuple, np.ndarray | bool] = {}

    def mark(self, coords: tuple, chunk_box: Box, complete: bool) -> None:
        if complete:
            self._masks[coords] = WHOLE
            return
        mask = self._masks.get(coords)
        if mask is WHOLE:
            return
        if not isinstance(mask, np.ndarray):  # the chunk's first part written
            shape = self.chunk_shape(coords) if callable(self.chunk_shape) else self.chunk_shape  # rectilinear
            mask = self._masks[coords] = np.zeros(shape, bool)
        mask[chunk_box] = True

    def forget_rows(self, coords: tuple, first: int) -> None:
        """Elements of chunk `coords` from index `first` along dimension 0 are no longer written
        here (growth.rebase gives them their stored values back)."""
        mask = self._masks.get(coords)
        if mask is None:
            return
        if not isinstance(mask, np.ndarray):  # WHOLE
            shape = self.chunk_shape(coords) if callable(self.chunk_shape) else self.chunk_shape
            mask = self._masks[coords] = np.ones(shape, bool)
        mask[first:] = False

    def stored(self, coords: tuple) -> None:
        """The chunk as written here is stored: nothing left to merge."""
        self._masks.pop(coords, None)

    def mask(self, coords: tuple) -> np.ndarray | None:
        """The chunk's mask while it is written only in part, else None."""
        mask = self._masks.get(coords)
        return mask if isinstance(mask, np.ndarray) else None  # None, or WHOLE

    def partial(self) -> list[tuple[tuple, np.ndarray]]:
        """(coords, mask) of every chunk written only in part."""
        return [(coords, mask) for coords, mask in self._masks.items() if isinstance(mask, np.ndarray)]


def overlay(stored: np.ndarray | None, fill_value: object, mine: np.ndarray, mask: np.ndarray) -> None:
    """`mine` becomes the stored chunk (or fill, where none is stored) with the elements under
    `mask` kept from `mine`."""
    base = np.full(mine.shape, fill_value, mine.dtype) if stored is None else stored.copy()
    base[mask] = mine[mask]
    mine[...] = base
