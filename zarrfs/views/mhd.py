"""NAME.mhd: a MetaImage header whose ElementDataFile is NAME.bin. Sizes run fastest axis first;
a 1-D array is an N x 1 image (ITK reads no 1-D images); complex is two channels (real,
imaginary). No float16 or raw types."""

from zarrfs.views.info import ArrayInfo, data_file_field, raster

ELEMENT_TYPES = {"bool": "MET_UCHAR", "int8": "MET_CHAR", "uint8": "MET_UCHAR", "int16": "MET_SHORT",
                 "uint16": "MET_USHORT", "int32": "MET_INT", "uint32": "MET_UINT", "int64": "MET_LONG_LONG",
                 "uint64": "MET_ULONG_LONG", "float32": "MET_FLOAT", "float64": "MET_DOUBLE",
                 "complex64": "MET_FLOAT", "complex128": "MET_DOUBLE"}


def header(info: ArrayInfo) -> bytes | None:
    data_file = data_file_field(info.data_file)
    element = ELEMENT_TYPES.get(info.data_type)
    if element is None or not raster(info) or data_file is None:
        return None
    sizes = list(reversed(info.shape)) + ([1] if len(info.shape) == 1 else [])
    channels = 2 if info.data_type.startswith("complex") else 1
    text = [
        "ObjectType = Image",
        f"NDims = {len(sizes)}",
        f"DimSize = {' '.join(map(str, sizes))}",
        f"ElementType = {element}",
        f"ElementNumberOfChannels = {channels}",
        "BinaryData = True",
        "BinaryDataByteOrderMSB = False",
        "CompressedData = False",
        "HeaderSize = 0",
        f"ElementDataFile = {data_file}",  # last: MetaImage reads the data file after it
    ]
    return ("\n".join(text) + "\n").encode()
