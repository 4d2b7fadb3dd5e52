"""HPL's input: orders and memory shares as a user gives them, and HPL.dat's format.

HPCC's HPL reads `hpccinf.txt` and appends its results to `hpccoutf.txt`, both in
the working directory of rank 0 (HPL.dat's layout: one value list per line, with
a count line before each list). The run's choices are a `records.hpl.HplParams`; the
panel factorisation stays at HPL's defaults from its tuning notes (right-looking,
Crout recursion, NBMIN 4).
"""

from __future__ import annotations

import argparse
import math

from geofed.errors import UserError
from geofed.records.hpl import BCASTS, HplParams
from geofed.validate import positive_int

DOUBLE = 8  # bytes


def parse_ns(text: str) -> list[int]:
    """--n: matrix orders separated by commas."""
    try:
        ns = [positive_int(x) for x in text.split(",") if x]
    except argparse.ArgumentTypeError:
        ns = []
    if not ns:
        raise UserError(f"--n {text!r}: expected matrix orders separated by commas, like 2000,4000")
    return ns


def n_for_memory(fraction: float, memory_bytes: float, nb: int) -> int:
    """The largest N (a multiple of NB) whose matrix fills `fraction` of `memory_bytes`."""
    if not 0 < fraction <= 0.9:
        raise UserError(f"--memory {fraction:g}: expected a fraction above 0 and at most 0.9 (HPL needs room besides A)")
    n = int(math.sqrt(fraction * memory_bytes / DOUBLE)) // nb * nb
    if n < nb:
        raise UserError(f"--memory {fraction:g}: {fraction:g} of {memory_bytes / 1e9:.3g} GB holds no {nb} x {nb} block")
    return n


def text(params: HplParams) -> str:
    """hpccinf.txt for these choices. HPCC's HPL always writes its results to
    hpccoutf.txt in the working directory, whatever the device line says."""
    def line(value, what: str) -> str:
        return f"{value:<12} {what}"
    ns = " ".join(map(str, params.ns))
    lines = [
        "HPLinpack benchmark input file",
        "written by geofed (geofed.apps.hpl.params)",
        line("HPL.out", "output file name (if any)"),
        line(8, "device out (6=stdout,7=stderr,file)"),
        line(len(params.ns), "# of problems sizes (N)"),
        line(ns, "Ns"),
        line(1, "# of NBs"),
        line(params.nb, "NBs"),
        line(0, "PMAP process mapping (0=Row-,1=Column-major)"),
        line(1, "# of process grids (P x Q)"),
        line(params.p, "Ps"),
        line(params.q, "Qs"),
        line("16.0", "threshold"),
        line(1, "# of panel fact"),
        line(2, "PFACTs (0=left, 1=Crout, 2=Right)"),
        line(1, "# of recursive stopping criterium"),
        line(4, "NBMINs (>= 1)"),
        line(1, "# of panels in recursion"),
        line(2, "NDIVs"),
        line(1, "# of recursive panel fact."),
        line(1, "RFACTs (0=left, 1=Crout, 2=Right)"),
        line(1, "# of broadcast"),
        line(BCASTS[params.bcast], "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
        line(1, "# of lookahead depth"),
        line(params.depth, "DEPTHs (>=0)"),
        line(2, "SWAP (0=bin-exch,1=long,2=mix)"),
        line(64, "swapping threshold"),
        line(0, "L1 in (0=transposed,1=no-transposed) form"),
        line(0, "U  in (0=transposed,1=no-transposed) form"),
        line(1, "Equilibration (0=no,1=yes)"),
        line(8, "memory alignment in double (> 0)"),
    ]
    return "\n".join(lines) + "\n"
