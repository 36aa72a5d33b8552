# The part of numcodecs that zarrfs uses, typed: numcodecs ships no types (no py.typed), so mypy
# reads these stubs instead (mypy_path in pyproject.toml). A name zarrfs starts using is added here.

from typing import Any

from numcodecs import blosc as blosc
from numcodecs import compat as compat
from numcodecs import errors as errors
from numcodecs import zstd as zstd
from numcodecs.abc import Codec as Codec

def get_codec(config: dict[str, Any]) -> Codec: ...

class GZip(Codec):
    def __init__(self, level: int = 1) -> None: ...

class Zstd(Codec):
    def __init__(self, level: int = 0, checksum: bool = False) -> None: ...

class Blosc(Codec):
    def __init__(self, cname: str = "lz4", clevel: int = 5, shuffle: int = 1, blocksize: int = 0,
                 typesize: int | None = None) -> None: ...

class LZ4(Codec):
    def __init__(self, acceleration: int = 1) -> None: ...
