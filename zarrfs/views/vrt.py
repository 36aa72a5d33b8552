"""NAME.vrt: a GDAL VRT of raw bands into NAME.bin, one band per 2-D plane (the last two axes are
lines and pixels, the leading axes fold into bands in C order). No float16 or raw types. Each
band is about 300 bytes of XML, so a stack of more than MAX_BANDS planes gets no VRT (it would
be megabytes, made again whenever the header cache drops it): its ENVI header holds any number
of bands in a few lines."""

from xml.sax.saxutils import escape

from zarrfs.views.geotransform import geotransform, srs
from zarrfs.views.info import ArrayInfo, raster

GDAL_TYPES = {"bool": "Byte", "uint8": "Byte", "int8": "Int8", "int16": "Int16", "uint16": "UInt16",
              "int32": "Int32", "uint32": "UInt32", "int64": "Int64", "uint64": "UInt64", "float32": "Float32",
              "float64": "Float64", "complex64": "CFloat32", "complex128": "CFloat64"}
MAX_BANDS = 4096


def header(info: ArrayInfo) -> bytes | None:
    gdal_type = GDAL_TYPES.get(info.data_type)
    if gdal_type is None or not raster(info) or info.bands > MAX_BANDS or info.data_file is None:  # XML is text
        return None
    lines, samples = info.plane
    item = info.dtype.itemsize
    source = f'    <SourceFilename relativeToVRT="1">{escape(info.data_file)}</SourceFilename>\n'
    layout = (f"    <PixelOffset>{item}</PixelOffset>\n    <LineOffset>{item * samples}</LineOffset>\n"
              "    <ByteOrder>LSB</ByteOrder>\n")
    names = _band_names(info)
    parts = [f'<VRTDataset rasterXSize="{samples}" rasterYSize="{lines}">\n']
    transform = geotransform(info)
    if transform:
        parts.append(f"  <GeoTransform>{', '.join(repr(float(v)) for v in transform)}</GeoTransform>\n")
        if srs(info):
            parts.append(f"  <SRS>{escape(srs(info))}</SRS>\n")
    for band in range(info.bands):
        description = f"    <Description>{escape(names(band))}</Description>\n" if len(info.shape) > 2 else ""
        parts.append(f'  <VRTRasterBand dataType="{gdal_type}" band="{band + 1}" subClass="VRTRawRasterBand">\n'
                     f"{description}{source}    <ImageOffset>{band * lines * samples * item}</ImageOffset>\n"
                     f"{layout}  </VRTRasterBand>\n")
    parts.append("</VRTDataset>\n")
    return "".join(parts).encode()


def _band_names(info: ArrayInfo):
    """A band's description: the index along each leading axis, named where names are known."""
    leading = info.shape[:-2]
    labels = [(info.dimension_names[i] if info.dimension_names else None) or f"axis{i}" for i in range(len(leading))]

    def name(band: int) -> str:
        index = []
        for size in reversed(leading):
            band, i = divmod(band, size)
            index.append(i)
        return ",".join(f"{label}={i}" for label, i in zip(labels, reversed(index), strict=False))

    return name


