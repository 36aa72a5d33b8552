"""NAME.bin.hdr: an ENVI header for NAME.bin (GDAL looks for it beside the data file). Band
sequential: the last axis is samples, the one before it lines, the leading axes fold into bands.
ENVI has no int8 (GDAL would read it as unsigned) and no float16 or raw types."""

from zarrfs.views.geotransform import map_info
from zarrfs.views.info import ArrayInfo, raster

# ENVI "data type" codes; bool is one byte, 0 or 1
CODES = {"bool": 1, "uint8": 1, "int16": 2, "int32": 3, "float32": 4, "float64": 5, "complex64": 6,
         "complex128": 9, "uint16": 12, "uint32": 13, "int64": 14, "uint64": 15}


def header(info: ArrayInfo) -> bytes | None:
    code = CODES.get(info.data_type)
    if code is None or not raster(info):
        return None
    lines, samples = info.plane
    text = [
        "ENVI",
        f"description = {{zarrfs view of {_braces(info.name)}, shape {list(info.shape)}, C order}}",
        f"samples = {samples}",
        f"lines = {lines}",
        f"bands = {info.bands}",
        "header offset = 0",
        "file type = ENVI Standard",
        f"data type = {code}",
        "interleave = bsq",
        "byte order = 0",
    ]
    georeference = map_info(info)
    if georeference:
        text.append(georeference)
    return ("\n".join(text) + "\n").encode()


def _braces(text: str) -> str:
    """ENVI values in braces end at the first closing brace."""
    return text.replace("{", "(").replace("}", ")")
