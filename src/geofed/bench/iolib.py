"""The storage benchmark's timed loops in C (storage.c, built by setup.sh and loaded with
ctypes) and the page-cache probes geofed and its peers (IOzone, fio) share."""

from __future__ import annotations

import ctypes
import os
from functools import cache
from pathlib import Path

from geofed import native

SOURCE = Path(__file__).with_name("storage.c")


@cache
def lib() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(native.library("libgeofed_io.so", SOURCE)))
    long_p = ctypes.POINTER(ctypes.c_long)
    lib.gf_io_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.gf_io_pass.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long,
                               ctypes.c_long, ctypes.c_long, ctypes.POINTER(ctypes.c_double), long_p]
    lib.gf_io_verify.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long, long_p]
    lib.gf_io_resident.argtypes = [ctypes.c_char_p]
    lib.gf_io_resident.restype = ctypes.c_double
    return lib


def resident(path: Path) -> float | None:
    """The share of the file's pages in the page cache now (None if it cannot be told)."""
    share = lib().gf_io_resident(os.fsencode(path))
    return None if share < 0 else share


def drop_cache(path: Path) -> None:
    """Drop the file's clean pages from the page cache (no root needed, unlike drop_caches)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
