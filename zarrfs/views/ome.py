"""OME-Zarr images, for the TIFF view: which multiscale image an array is a level of (its axes,
their units, its scale), and the OME-XML that describes it as an OME-TIFF.

An array is a level of an OME-Zarr image when a group above it holds `multiscales` in its
attributes (v0.4; under `ome` for v0.5) one of whose `datasets` has the array's path below that
group as `path` (its name, or a nested path like `s/0`). Malformed
metadata makes no image, never an error: the array is then described like any other.
"""

import math
import numbers
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from zarrfs.views.info import ArrayInfo


@dataclass(frozen=True)
class Axis:
    name: str
    type: str | None  # "time", "channel", "space", another word, or None
    unit: str | None


@dataclass(frozen=True)
class Image:
    name: str | None  # the multiscale's name
    axes: tuple[Axis, ...]
    scale: tuple[float | None, ...]  # per axis: the dataset's scale times the image's, None if not given
    channels: tuple[str | None, ...]  # omero channel labels, () if none


MAX_NESTING = 8  # groups above an array looked at for the image it is a level of (dataset paths like "s/0")


def image_of(path: str, node_of) -> Image | None:
    """The OME-Zarr image whose level is the array at store path `path`, None if it is none: the
    nearest group above it (at most MAX_NESTING up) whose multiscales list the array's path
    relative to it as a dataset. node_of(path) gives a node (with .meta.attributes) or None."""
    for group, relative in groups_above(path):
        found = image_in(node_of(group), relative)
        if found is not None:
            return found
    return None


def groups_above(path: str) -> list[tuple[str, str]]:
    """(a group's store path, the node's path relative to it) of each group above the node at
    store path `path` whose image it may be a level of: nearest first, at most MAX_NESTING up;
    none for the root (the mounted array itself has no group around it)."""
    parts = path.split("/") if path else []
    return [("/".join(parts[:-depth]), "/".join(parts[-depth:])) for depth in range(1, min(len(parts), MAX_NESTING) + 1)]


def image_in(group, name: str) -> Image | None:
    """The image of `group`'s multiscales that has the dataset `name` (a path below the group),
    None if none has."""
    attributes = getattr(getattr(group, "meta", None), "attributes", None)
    if not isinstance(attributes, dict):
        return None
    ome = attributes.get("ome") if isinstance(attributes.get("ome"), dict) else {}
    multiscales = attributes.get("multiscales") or ome.get("multiscales")
    omero = attributes.get("omero") or ome.get("omero")
    for image in multiscales if isinstance(multiscales, list) else []:
        found = _level(image, name)
        if found is not None:
            return Image(found[0], found[1], found[2], _channels(omero))
    return None


def _level(image, name: str):
    """(name, axes, scale) of `image` if the dataset `name` is one of its levels."""
    if not isinstance(image, dict) or not isinstance(image.get("datasets"), list):
        return None
    dataset = next((d for d in image["datasets"] if isinstance(d, dict) and d.get("path") == name), None)
    axes = _axes(image.get("axes"))
    if dataset is None or axes is None:
        return None
    scale = _scale(dataset.get("coordinateTransformations"), len(axes)) or (None,) * len(axes)
    overall = _scale(image.get("coordinateTransformations"), len(axes)) or (1.0,) * len(axes)  # applied after
    combined = tuple(None if a is None or b is None else a * b for a, b in zip(scale, overall, strict=False))
    title = image.get("name")
    return (title if isinstance(title, str) else None), axes, combined


def _axes(axes) -> tuple[Axis, ...] | None:
    """v0.4 and later: a list of {name, type, unit}; v0.3: a list of names."""
    if not isinstance(axes, list) or not axes:
        return None
    out = []
    for axis in axes:
        if isinstance(axis, str):
            axis = {"name": axis}
        if not isinstance(axis, dict) or not isinstance(axis.get("name"), str):
            return None
        kind, unit = axis.get("type"), axis.get("unit")
        out.append(Axis(axis["name"], kind if isinstance(kind, str) else None, unit if isinstance(unit, str) else None))
    return tuple(out)


def _scale(transformations, ndim: int) -> tuple[float | None, ...] | None:
    """The `scale` of a list of coordinate transformations (translations do not change sizes),
    None if there is none; a value that is not a positive number is None."""
    for t in transformations if isinstance(transformations, list) else []:
        values = t.get("scale") if isinstance(t, dict) and t.get("type") == "scale" else None
        if isinstance(values, list) and len(values) == ndim:
            return tuple(float(v) if _positive(v) else None for v in values)
    return None


def _positive(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _channels(omero) -> tuple[str | None, ...]:
    channels = omero.get("channels") if isinstance(omero, dict) else None
    if not isinstance(channels, list):
        return ()
    return tuple(c.get("label") if isinstance(c, dict) and isinstance(c.get("label"), str) else None
                 for c in channels)


# OME-XML: its pixel types, and its unit symbols for OME-Zarr's (UDUNITS-2) unit names
PIXEL_TYPES = {"bool": "uint8", "int8": "int8", "int16": "int16", "int32": "int32", "uint8": "uint8",
               "uint16": "uint16", "uint32": "uint32", "float32": "float", "float64": "double",
               "complex64": "complex", "complex128": "double-complex"}  # no 64-bit integers, no float16
LENGTH_UNITS = {"angstrom": "Å", "attometer": "am", "centimeter": "cm", "decimeter": "dm", "exameter": "Em",
                "femtometer": "fm", "foot": "ft", "gigameter": "Gm", "hectometer": "hm", "inch": "in",
                "kilometer": "km", "megameter": "Mm", "meter": "m", "micrometer": "µm", "mile": "mi",
                "millimeter": "mm", "nanometer": "nm", "parsec": "pc", "petameter": "Pm", "picometer": "pm",
                "terameter": "Tm", "yard": "yd", "yoctometer": "ym", "yottameter": "Ym", "zeptometer": "zm",
                "zettameter": "Zm"}
TIME_UNITS = {"attosecond": "as", "centisecond": "cs", "day": "d", "decisecond": "ds", "exasecond": "Es",
              "femtosecond": "fs", "gigasecond": "Gs", "hectosecond": "hs", "hour": "h", "kilosecond": "ks",
              "megasecond": "Ms", "microsecond": "µs", "millisecond": "ms", "minute": "min", "nanosecond": "ns",
              "petasecond": "Ps", "picosecond": "ps", "second": "s", "terasecond": "Ts", "yoctosecond": "ys",
              "yottasecond": "Ys", "zeptosecond": "zs", "zettasecond": "Zs"}
LEADING = {"time": "T", "channel": "C", "space": "Z"}  # by axis type; an axis without one, by name
NAMED = {"t": "T", "time": "T", "frame": "T", "frames": "T", "z": "Z", "depth": "Z", "slice": "Z", "slices": "Z",
         "c": "C", "channel": "C", "channels": "C"}
NAMESPACE = "http://www.openmicroscopy.org/Schemas/OME/2016-06"


def named(info: ArrayInfo) -> Image | None:
    """The image an array's dimension names make (no types, units or scale: the names alone say
    which axis is which), None if it has none; `dimensions` says whether OME-XML can use it."""
    if not info.dimension_names or len(info.dimension_names) != len(info.shape):
        return None
    axes = tuple(Axis(name or "", None, None) for name in info.dimension_names)
    return Image(None, axes, (None,) * len(axes), ())


def dimensions(image: Image, ndim: int) -> str | None:
    """The OME letters of the leading axes (the pages' axes, slowest first), e.g. "TCZ", when the
    image can be an OME-TIFF: the last two axes are space (Y, X), the others each one of time,
    channel and space, no two alike. None otherwise."""
    if len(image.axes) != ndim or ndim > 5:
        return None
    if any((a.type or ("space" if a.name.lower() in ("y", "x") else "")) != "space" for a in image.axes[-2:]):
        return None
    letters = "".join(LEADING.get(a.type or "") or NAMED.get(a.name.lower(), "?") for a in image.axes[:-2])
    return letters if "?" not in letters and len(set(letters)) == len(letters) else None


def xml(info: ArrayInfo, image: Image) -> bytes | None:
    """The OME-XML of the array as an OME-TIFF whose pages are its leading indexes in C order,
    None if OME-XML cannot express it (its data type, or its axes: see dimensions)."""
    pixel_type = PIXEL_TYPES.get(info.data_type)
    letters = dimensions(image, len(info.shape))
    if pixel_type is None or letters is None:
        return None
    sizes = dict(zip(letters, info.shape[:-2], strict=False))
    order = "XY" + letters[::-1] + "".join(d for d in "ZCT" if d not in letters)  # fastest first
    planes = math.prod(info.shape[:-2])
    pixels = {"ID": "Pixels:0", "DimensionOrder": order, "Type": pixel_type, "SizeX": info.shape[-1],
              "SizeY": info.shape[-2], "SizeZ": sizes.get("Z", 1), "SizeC": sizes.get("C", 1),
              "SizeT": sizes.get("T", 1), "BigEndian": "false", "Interleaved": "false"}
    pixels.update(_physical(image, letters))
    channels = "".join(_channel(k, image.channels[k] if len(image.channels) == pixels["SizeC"] else None)
                       for k in range(pixels["SizeC"]))
    text = (f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<OME xmlns="{NAMESPACE}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            f'xsi:schemaLocation="{NAMESPACE} {NAMESPACE}/ome.xsd" Creator="zarrfs">'
            f'<Image ID="Image:0" Name={quoteattr(image.name or info.name)}><Pixels{_attributes(pixels)}>'
            f'{channels}<TiffData IFD="0" PlaneCount="{planes}"/></Pixels></Image></OME>')
    return text.encode()


def _physical(image: Image, letters: str) -> dict:
    """PhysicalSizeX/Y/Z and TimeIncrement, with their units, where the scale and a unit OME
    knows are both given (a size without its unit would be read as micrometres or seconds)."""
    out = {}
    axes = dict(zip(letters, zip(image.axes, image.scale, strict=False), strict=False))
    axes.update({"Y": (image.axes[-2], image.scale[-2]), "X": (image.axes[-1], image.scale[-1])})
    for letter, (axis, scale) in axes.items():
        units, name = (TIME_UNITS, "TimeIncrement") if letter == "T" else (LENGTH_UNITS, f"PhysicalSize{letter}")
        if letter != "C" and scale is not None and axis.unit in units:
            out[name], out[f"{name}Unit"] = repr(scale), units[axis.unit]
    return out


def _channel(k: int, label: str | None) -> str:
    name = f" Name={quoteattr(label)}" if label else ""
    return f'<Channel ID="Channel:0:{k}"{name} SamplesPerPixel="1"/>'


def _attributes(values: dict) -> str:
    return "".join(f" {key}={quoteattr(str(value))}" for key, value in values.items())
