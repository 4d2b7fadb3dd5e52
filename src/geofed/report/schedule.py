"""Report section: seed 001's utilisation experiment: separate clusters, a Slurm federation, one cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, section, table


@section("bench.schedule", "Jobs through Slurm: separate site clusters, a Slurm federation, one cluster (seed 001)", order=75, each=True)
def schedule(r: Record, k: int, outdir: Path) -> Iterator[str]:
    d = r.data
    sites = list(d.sites)
    yield (f"<p class='meta'>{esc(r.meta.get('federation', ''))}: {len(d.stream)} jobs over "
           f"{d.window_s:g} s, seed {d.seed}; "
           + ", ".join(f"site {s}: {n} nodes" for s, n in d.sites.items())
           + f"; jobs stay at one site in every mode · {esc(r.created)}</p>")
    yield table(["mode", "mean wait s", "p90 wait s"] + [f"mean wait {s} s" for s in sites]
                + ["utilisation"] + [f"use {s}" for s in sites] + ["makespan s", "jobs at the other site"],
                [[mode, f"{m['mean_wait_s']:.1f}", f"{m['p90_wait_s']:.1f}"]
                 + [f"{m['mean_wait_s_' + s]:.1f}" for s in sites]
                 + [f"{m['utilisation']:.1%}"] + [f"{m['site_utilisation'][s]:.1%}" for s in sites]
                 + [f"{m['makespan_s']:.0f}", m["spilled"]]
                 for mode, m in d.modes.items()])
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for mode, m in d.modes.items():
        waits = sorted(j["start"] - j["submit"] for j in m["jobs"])
        ax.step(waits, [(i + 1) / len(waits) for i in range(len(waits))], where="post", label=mode)
    ax.set_xlabel("wait in the queue [s]")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=8)
    yield figure(fig, outdir, f"schedule-{k}.png", "distribution of queue waits in each mode")
