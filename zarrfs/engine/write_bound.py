"""The write bound: how many written bytes an array may hold in memory before they are stored.

A writer whose array holds more than `dirty_limit` decoded bytes not yet stored waits for a
write-back (memory stays bounded); past a quarter of it, or EARLY_WRITE_BACK, write-back starts
in the background while the writer goes on, so that encoding and the store overlap a long write.
The mount (fs.filesystem) and the Python API (api.py) both follow it.
"""

from dataclasses import dataclass
from enum import Enum

EARLY_WRITE_BACK = 16 << 20  # dirty bytes of an array that start its write-back while writing goes on
DIRTY_LIMIT = 256 << 20  # dirty decoded bytes per array before a write flushes


class AfterWrite(Enum):
    NOTHING = 0
    START_WRITE_BACK = 1  # in the background: the writer goes on
    WRITE_BACK = 2  # now: the writer waits


@dataclass(frozen=True)
class WriteBound:
    dirty_limit: int = DIRTY_LIMIT

    def after_write(self, dirty_nbytes: int) -> AfterWrite:
        """What a write that left the array holding `dirty_nbytes` unstored bytes must do."""
        if dirty_nbytes > self.dirty_limit:
            return AfterWrite.WRITE_BACK
        if dirty_nbytes > min(self.dirty_limit // 4, EARLY_WRITE_BACK):
            return AfterWrite.START_WRITE_BACK
        return AfterWrite.NOTHING
