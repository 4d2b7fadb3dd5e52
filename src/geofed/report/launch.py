"""Report section for jobs run across a placement: who talked to whom, and how fast."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, mpi_transport, section, table

CLASS_COLOURS = {"intra-node": "tab:green", "intra-site": "tab:blue", "inter-site": "tab:red"}


@section("job.pingpong", "MPI job across a placement: rank-to-rank round trips", order=30, each=True)
def pingpong(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    yield (f"<p class='meta'>placement {esc(d.placement)} on {esc(r.meta.get('federation', ''))}"
           f" · {esc(d.mpi_library)}{mpi_transport(r)} · {d.message_bytes} B messages · {esc(r.created)}</p>")
    rows = [[f"{p['a']} → {p['b']}", p["class"], f"{p['model_rtt_ms']:.4f}", f"{p['min_ms']:.4f}",
             f"{p['median_ms']:.4f}", f"{p['p99_ms']:.4f}", f"{p['median_ms'] / p['model_rtt_ms']:.3f}"
             if p["model_rtt_ms"] else "-", p["iterations"]] for p in d.pairs]
    yield table(["ranks (nodes)", "class", "model RTT [ms]", "min [ms]", "median [ms]", "p99 [ms]",
                "median / model", "iterations"], rows)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for j, p in enumerate(d.pairs):
        ax.bar(j, p["median_ms"], color=CLASS_COLOURS.get(p["class"], "grey"))
    ax.set_yscale("log")
    ax.set_xticks(range(len(d.pairs)), [f"{p['a']}-{p['b']}" for p in d.pairs], rotation=30, fontsize=8)
    ax.set_ylabel("median RTT [ms]")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in CLASS_COLOURS.values()]
    ax.legend(handles, CLASS_COLOURS.keys(), fontsize=8)
    yield figure(fig, outdir, f"pingpong-{i}.png", "round trips by pair class")
