import numpy as np

# What numcodecs takes (any object with the buffer protocol; these are the ones zarrfs passes) and
# gives: bytes from compressors, an array from filters and the codecs of object arrays.
Buffer = bytes | bytearray | memoryview | np.ndarray

class Codec:
    codec_id: str
    def encode(self, buf: Buffer) -> Buffer: ...
    def decode(self, buf: Buffer, out: Buffer | None = None) -> Buffer: ...
