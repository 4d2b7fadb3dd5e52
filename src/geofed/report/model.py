"""Report section for `geofed bench model`: predicted against measured, SimGrid beside."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, num, percent_change, section, table


@section("bench.model", "Prediction: models against measurements", order=90, each=True)
def model(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    s = d.summary
    fed = r.meta.get("federation", "?")
    yield (f"<p class='meta'>federation {esc(fed)} · calibrated from {len(d.calibration['sources'])} "
           f"one-site record(s) · {s['within_tolerance']}/{s['rows']} rows within 15 % · median |error| "
           f"{percent_change(s['median_abs_error'])} · SimGrid: {esc(d.simgrid)}</p>")
    rows, classes = [], []
    for row in d.rows:
        params = ", ".join(f"{k}={v}" for k, v in row["params"].items())
        rows.append([row["workload"], row["placement"], params, num(row["measured"]), num(row["predicted"]),
                     percent_change(row["error"]), num(row.get("simgrid_LV08")), num(row.get("simgrid_CM02")),
                     row["unit"]])
        classes.append("fail" if row["error"] is not None and abs(row["error"]) > 0.15 else "")
    yield table(["workload", "placement", "parameters", "measured", "geofed", "error", "SimGrid LV08",
                "SimGrid CM02", "unit"], rows, classes)
    pts = [(row["measured"], row["predicted"], row["workload"]) for row in d.rows if row["measured"]]
    if pts:
        fig, ax = plt.subplots(figsize=(5, 5))
        for w in sorted({p[2] for p in pts}):
            ax.scatter([p[0] for p in pts if p[2] == w], [p[1] for p in pts if p[2] == w], s=12, label=w)
        lo = min(min(p[0], p[1]) for p in pts)
        hi = max(max(p[0], p[1]) for p in pts)
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
        ax.plot([lo, hi], [lo * 1.15, hi * 1.15], color="grey", lw=0.5, ls="--")
        ax.plot([lo, hi], [lo * 0.85, hi * 0.85], color="grey", lw=0.5, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured")
        ax.set_ylabel("predicted (geofed)")
        ax.legend(fontsize=7)
        ax.set_title(f"{fed}: predicted vs measured (dashed: 15 %)", fontsize=9)
        yield figure(fig, outdir, f"model-{i}.png", f"predicted against measured, {fed}")
