"""What codecs pass stored bytes as: bytes, or a view of other memory (a memoryview, the uint8
array the bytes codec makes), never copied to bytes only to be read. For annotations."""

from typing import TypeAlias

import numpy as np

BytesLike: TypeAlias = bytes | bytearray | memoryview | np.ndarray
