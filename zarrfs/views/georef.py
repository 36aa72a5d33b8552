"""Georeferencing from CF/GeoZarr attributes, only where they say it unambiguously."""

from .info import ArrayInfo


def geotransform(info: ArrayInfo) -> tuple[float, ...] | None:
    return None


def map_info(info: ArrayInfo) -> str | None:
    return None
