import numpy as np
from numcodecs.abc import Buffer

def decompress(source: Buffer, dest: np.ndarray | None = None) -> Buffer: ...
