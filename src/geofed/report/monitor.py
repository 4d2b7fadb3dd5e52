"""Report section for `geofed monitor show`: each pair's series with its level shifts."""

from __future__ import annotations

from datetime import datetime
from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.records.ops import METRICS
from geofed.report import esc, figure, percent_change, section, table


@section("monitor.series", "Link monitoring: series and sustained level shifts", order=45, each=True)
def monitor(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    yield (f"<p class='meta'>store {esc(d.db)} · a shift must last {d.run} samples and exceed"
           f" {d.k:g} noise standard deviations and {d.rel * 100:g} % of the level</p>")
    rows = []
    for j, s in enumerate(d.series):
        fig, axes = plt.subplots(1, len(METRICS), figsize=(10, 2.8))
        when = [datetime.fromtimestamp(t) for t in s["t"]]
        for ax, (metric, label) in zip(axes, METRICS.items()):
            ax.plot(when, s[metric], marker=".", ms=3, lw=0.8)
            for e in s["events"][metric]:
                ax.axvline(datetime.fromtimestamp(e["start"]), color="tab:red", ls="--")
                rows.append([f"{s['a']}-{s['b']}", metric, datetime.fromtimestamp(e["start"]).isoformat(" ", "seconds"),
                             f"{e['before']:.4g}", f"{e['after']:.4g}",
                             percent_change(e["relative"])])
            ax.set_ylabel(label, fontsize=8)
            ax.tick_params(axis="x", labelsize=7, rotation=30)
        axes[0].set_title(f"{s['a']}-{s['b']} ({s['class']}), {len(s['errors'])} failed rounds", fontsize=9)
        yield figure(fig, outdir, f"monitor-{i}-{j}.png", f"series {s['a']}-{s['b']}")
    yield (table(["pair", "metric", "start", "before", "after", "change"], rows) if rows
           else "<p>No sustained level shift.</p>")
