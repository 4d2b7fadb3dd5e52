"""Report sections: `geofed obstacle` runs (residual history) and the Table III analogue."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, section, table


@section("obstacle.run", "Obstacle problem over P2PSAP (seed 003)", order=70)
def runs(records: list[Record], outdir: Path) -> str:
    rows = []
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for r in records:
        d = r.data
        rows.append([d.placement, d.scheme, d.network, d.n, f"{d.tol:g}", len(d.peers),
                     " / ".join(str(p["iterations"]) for p in d.peers), f"{d.time_to_solution_s:.3f}",
                     f"{d.certified_residual:.3g}", f"{d.error_bound:.3g}"])
        if d.residual_history:
            t, res = zip(*d.residual_history)
            ax.semilogy(t, res, ".-", label=f"{d.scheme} {d.placement}")
    ax.set_xlabel("seconds")
    ax.set_ylabel("global residual seen by peer 0")
    ax.legend(fontsize=8)
    return (table(["placement", "scheme", "network", "n", "tol", "peers", "iterations per peer", "time [s]",
                   "certified residual", "max error <="], rows)
            + figure(fig, outdir, "obstacle-history.png", "certified residual against time"))


@section("bench.obstacle", "Obstacle problem: seed 003's Table III and the reliable stack against TCP", order=71, each=True)
def bench(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    yield (f"<p class='meta'>n = {d.n}, certified residual &le; {d.tol:g}, link RTT {d.link_rtt_ms:.3g} ms,"
           f" medians of {d.repeat} · {esc(r.created)}</p>")
    if d.solver is not None:
        cell = lambda x, s: f"{x[s + '_s']:.3f} s ({x[s + '_iterations']:.0f} it.)"  # noqa: E731
        yield table(["placement", "peers", "across the link", "P2PSAP sync", "P2PSAP async", "MPI Jacobi",
                     "async vs MPI"],
                    [[x["placement"], x["peers"], "yes" if x["across_link"] else "no", cell(x, "sync"),
                      cell(x, "async"), cell(x, "mpi"), f"{x['async_speedup_vs_mpi']:.1f}x"] for x in d.solver])
    if d.throughput is not None:
        t = d.throughput
        rows = [[r["what"], f"{r['transfer_mbps']:.0f}", f"{100 * r['transfer_of_tcp']:.1f} %",
                 f"{r['steady_mbps']:.0f}", f"{100 * r['steady_of_tcp']:.1f} %"] for r in t["rows"]]
        yield table([f"one session {t['pair'][0]} -> {t['pair'][1]}", f"transfer of {t['mbytes']:g} MB [Mb/s]",
                    "of TCP's", "steady state [Mb/s]", "of TCP's"], rows)
    if d.lossy is not None:
        l = d.lossy
        ok = l["delivered"] == l["messages"] and not l["extra"]
        yield table(["link loss", "P2PSAP sync/inter/Eth [Mb/s]", "delivered intact", "retransmissions", "timeouts"],
                    [[f"{100 * l['loss']:g} %", f"{l['transfer_mbps']:.0f}", f"{l['delivered']}/{l['messages']}",
                      l["sender"]["retransmissions"], l["sender"]["timeouts"]]], ["" if ok else "fail"])
