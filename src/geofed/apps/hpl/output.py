"""HPL's printed results: one row per solved system, each followed by its residual check.

    T/V                N    NB     P     Q               Time                 Gflops
    WR11C2R4        1000    80     1     2               0.07              8.970e+00
    ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0044729 ...... PASSED

The variant code (WR11C2R4) encodes the column-major flag, depth, broadcast,
factorisation and NBMIN. A run counts only with a PASSED residual: a FAILED one is a
wrong answer, whatever the speed.
"""

from __future__ import annotations

import re

ROW = re.compile(r"^(W[RC]\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.eE+-]+)\s*$")
RESIDUAL = re.compile(r"^\|\|Ax-b\|\|_oo/\(eps\*\(\|\|A\|\|_oo\*\|\|x\|\|_oo\+\|\|b\|\|_oo\)\*N\)=\s*"
                      r"([0-9.eE+-]+|nan|inf)\s*\.+\s*(PASSED|FAILED)\s*$", re.IGNORECASE)


class BadOutput(ValueError):
    """HPL's output lacks what a finished run prints (a crash, a cut log)."""


def parse(text: str, expected: int) -> list[dict]:
    """The `expected` results in order; BadOutput when HPL printed fewer or a row lost its check."""
    rows: list[dict] = []
    for raw in text.splitlines():
        line = raw.strip()
        if m := ROW.match(line):
            rows.append({"variant": m[1], "n": int(m[2]), "nb": int(m[3]), "p": int(m[4]), "q": int(m[5]),
                         "time_s": float(m[6]), "gflops": float(m[7]), "residual": None, "passed": None})
        elif (m := RESIDUAL.match(line)) and rows:
            if rows[-1]["residual"] is not None:
                raise BadOutput("two residual checks for one result")
            rows[-1]["residual"] = float(m[1])
            rows[-1]["passed"] = m[2].upper() == "PASSED"
    if len(rows) != expected:
        raise BadOutput(f"HPL printed {len(rows)} of {expected} results")
    unchecked = [r["n"] for r in rows if r["passed"] is None]
    if unchecked:
        raise BadOutput(f"no residual check for N = {', '.join(map(str, unchecked))}")
    return rows
