"""The C timed loops (kernels.c), loaded with ctypes and called on mpi4py communicators.

setup.sh builds kernels.c with the venv's `mpicc` into `<venv>/lib/libgeofed_bench.so`,
linked against the same libmpi that mpi4py uses, and with another MPI's mpicc beside it
(`libgeofed_bench.openmpi.so`, geofed.launch.mpi). GEOFED_BENCH_LIB points elsewhere.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import cache
from pathlib import Path

import numpy as np

from geofed.errors import UserError
from geofed.launch import mpi

SOURCE = Path(__file__).with_name("kernels.c")
OPS = {"bcast": 0, "gather": 1, "reduce": 2, "allreduce": 3}

_c_long_p = ctypes.POINTER(ctypes.c_long)
_c_double_p = ctypes.POINTER(ctypes.c_double)


def library_path() -> Path:
    built = Path(sys.prefix) / "lib" / mpi.program("libgeofed_bench.so")
    return Path(os.environ.get("GEOFED_BENCH_LIB") or built)


@cache
def _lib() -> ctypes.CDLL:
    path = library_path()
    if not path.is_file():
        raise UserError(f"{path}: the benchmark kernels are not built; {mpi.SETUP_FIX[mpi.choice()]}")
    if SOURCE.is_file() and SOURCE.stat().st_mtime > path.stat().st_mtime:
        raise UserError(f"{path}: older than {SOURCE}; run ./setup.sh to rebuild the benchmark kernels")
    lib = ctypes.CDLL(str(path))
    common = [ctypes.c_int, ctypes.c_long, _c_double_p, _c_long_p]  # validate, iter0, times, wrong
    lib.gf_latency.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_long, ctypes.c_long] + common
    lib.gf_bw.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long,
                          ctypes.c_int, ctypes.c_long, ctypes.c_int] + common
    lib.gf_coll.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long,
                            ctypes.c_long, ctypes.c_int] + common
    return lib


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _run(fn, fixed: list, n: int, validate: bool, iter0: int) -> tuple[np.ndarray, int]:
    times = np.zeros(max(n, 1))
    wrong = ctypes.c_long(0)
    rc = fn(*fixed, int(validate), iter0, times.ctypes.data_as(_c_double_p), ctypes.byref(wrong))
    if rc:
        raise RuntimeError(f"MPI error {rc} in {fn.__name__}")
    return times[:n], wrong.value


def latency(comm, role: int, sbuf: np.ndarray, rbuf: np.ndarray, size: int, n: int,
            validate: bool = False, iter0: int = 0) -> tuple[np.ndarray, int]:
    """n ping-pongs on a two-rank comm; round-trip times [s] on role 0, bytes wrong."""
    return _run(_lib().gf_latency, [comm.py2f(), role, _ptr(sbuf), _ptr(rbuf), size, n], n, validate, iter0)


def bw(comm, role: int, sbuf: np.ndarray, rbuf: np.ndarray, size: int, window: int, n: int, bidir: bool,
       validate: bool = False, iter0: int = 0) -> tuple[np.ndarray, int]:
    """n windows on a two-rank comm; window times [s] on role 0, bytes wrong on receivers."""
    return _run(_lib().gf_bw, [comm.py2f(), role, _ptr(sbuf), _ptr(rbuf), size, window, n, int(bidir)],
                n, validate, iter0)


def coll(comm, op: str, sbuf: np.ndarray, rbuf: np.ndarray, size: int, n: int, rotate_root: bool,
         validate: bool = False, iter0: int = 0) -> tuple[np.ndarray, int]:
    """n calls of a collective; this rank's time [s] per call, elements or bytes wrong."""
    return _run(_lib().gf_coll, [comm.py2f(), OPS[op], _ptr(sbuf), _ptr(rbuf), size, n, int(rotate_root)],
                n, validate, iter0)
