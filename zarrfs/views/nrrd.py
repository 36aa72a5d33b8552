"""NAME.bin.nhdr: a detached NRRD header whose data file is NAME.bin. Sizes run fastest axis first;
complex gets an extra fastest axis of size 2 (kind "complex"); raw types are `block`. No float16.
Dimension names become the axis labels."""

from zarrfs.views.info import ArrayInfo, data_file_field, raster

TYPES = {"bool": "uint8", "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16",
         "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64", "float32": "float",
         "float64": "double", "complex64": "float", "complex128": "double"}


def header(info: ArrayInfo) -> bytes | None:
    data_file = data_file_field(info.data_file)
    kind = TYPES.get(info.data_type) or ("block" if info.data_type == "raw" else None)
    if kind is None or not raster(info) or data_file is None:
        return None
    sizes = list(reversed(info.shape))
    labels = list(reversed(info.dimension_names)) if info.dimension_names else None
    kinds = ["domain"] * len(sizes)
    if info.data_type.startswith("complex"):
        sizes, kinds = [2, *sizes], ["complex", *kinds]
        labels = labels and ["complex", *labels]
    text = ["NRRD0004", f"type: {kind}"]
    if kind == "block":
        text.append(f"block size: {info.dtype.itemsize}")
    text += [
        f"dimension: {len(sizes)}",
        f"sizes: {' '.join(map(str, sizes))}",
        f"kinds: {' '.join(kinds)}",
        "endian: little",
        "encoding: raw",
        # names only past the first 64 bytes: Bio-Formats' QuickTime reader, tried before its NRRD
        # reader, claims a file with an atom's name there (an array named `wide`, `moov`, `free`...)
        f"# zarrfs view of {info.name}",
    ]
    if labels:
        text.append("labels: " + " ".join(_quoted(label or "") for label in labels))
    text.append(f"data file: {data_file}")
    return ("\n".join(text) + "\n").encode()


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'
