"""Report section: HPL runs (time, GFLOPS and residual check per N, where the ranks were)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from geofed.report import esc, figure, section, table


@section("bench.hpl", "High-Performance Linpack on placements (seeds 001 and 002)", order=46)
def runs(records: list[dict], outdir: Path) -> str:
    rows, classes = [], []
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for r in records:
        d = r["data"]
        sites = ", ".join(f"{s} {k}" for s, k in d["ranks_per_site"].items())
        link = f"{d['link']['rtt_ms']:.4g} ms" if d["link"] else "one site"
        for x in d["rows"]:
            rows.append([d["placement"], d["ranks"], sites, link, x["n"], x["nb"], f"{x['p']}x{x['q']}",
                         f"{x['time_s']:.2f}", f"{x['gflops']:.4g}", f"{x['residual']:.3g}",
                         "PASSED" if x["passed"] else "FAILED"])
            classes.append("" if x["passed"] else "fail")
        ax.plot([x["n"] for x in d["rows"]], [x["gflops"] for x in d["rows"]], "o-",
                label=f"{d['placement']} ({link})")
    ax.set_xlabel("matrix order N")
    ax.set_ylabel("GFLOPS")
    ax.legend(fontsize=8)
    note = ("<p class='meta'>HPL 2.0 (from HPCC 1.5.0) on the placement's ranks; a run counts only with its "
            "residual check PASSED. " + esc(f"{len(records)} run(s)") + "</p>")
    return (note + table(["placement", "ranks", "ranks per site", "link RTT", "N", "NB", "P x Q", "time [s]",
                          "GFLOPS", "residual", "check"], rows, classes)
            + figure(fig, outdir, "hpl-gflops.png", "HPL GFLOPS against N per placement"))
