"""Report section: bulk transfers, and geofed transfer beside iperf3 per stream count and loss."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, num, section, table


@section("ops.transfer", "Bulk transfers between nodes", order=70)
def transfers(records: list[Record], outdir: Path) -> str:
    rows = []
    for r in records:
        d = r.data
        cap = d.link["bandwidth_gbps"]
        rows.append([d.source, d.destination, f"{d.moved_bytes / 1e6:.1f}", f"{d.held_bytes / 1e6:.1f}",
                     f"{d.seconds:.2f}", f"{d.rate_mbps:.0f}",
                     f"{d.rate_mbps / (cap * 1000):.1%}" if cap else "-", d.streams, d.corrupt_found,
                     f"{d.sender_cpu_s_per_gb:.2f} / {d.receiver_cpu_s_per_gb:.2f}",
                     # records made before version 3 have neither
                     d.congestion.get("algorithm", "-"), d.limit.get("narrower", "-")])
    return table(["source", "destination", "moved MB", "already there MB", "s", "Mb/s", "of link", "streams",
                  "damaged chunks resent", "CPU s/GB send / receive", "congestion control", "narrower end"], rows)


@section("bench.transfer", "geofed transfer beside iperf3, GridFTP and xrootd: streams and loss (seed 004)", order=71, each=True)
def bench(r: Record, k: int, outdir: Path) -> Iterator[str]:
    d = r.data
    cap = d.link["bandwidth_gbps"] * 1000
    yield (f"<p class='meta'>{esc(r.meta.get('federation', ''))}: link {d.link['rtt_ms']:.4g} ms RTT, "
           f"{cap:.0f} Mb/s; memory to /dev/null; medians; geofed's own choice on this link: "
           f"{d.auto_streams} streams · {esc(r.created)}</p>")
    peers = d.peers
    yield table(["loss", "streams", "geofed Mb/s", "congestion control", "of link", "iperf3 Mb/s", "geofed / iperf3",
                 "iperf3 bbr Mb/s"]
                + [f"{p} Mb/s" for p in peers] + ["CPU s/GB geofed", "CPU s/GB iperf3"]
                + [f"CPU s/GB {p}" for p in peers],
                # records made before the congestion control was chosen lack its columns
                [[f"{x['loss']:g}", x["streams"], f"{x['geofed_mbps']:.0f}",
                  "/".join(x.get("geofed_congestion", ["-"])), f"{x['geofed_mbps'] / cap:.1%}",
                  f"{x['iperf3_mbps']:.0f}", f"{x['geofed_mbps'] / x['iperf3_mbps']:.3f}",
                  num(x.get("iperf3_bbr_mbps"), ".0f")]
                 + [f"{x[p + '_mbps']:.0f}" for p in peers]
                 + [f"{x['geofed_sender_cpu_s_per_gb']:.2f}", f"{x['iperf3_sender_cpu_s_per_gb']:.2f}"]
                 # records made before the peers' CPU was measured lack it
                 + [num(x.get(f"{p}_sender_cpu_s_per_gb"), ".2f") for p in peers]
                 for x in d.rows])
    losses = sorted({x["loss"] for x in d.rows})
    fig, axes = plt.subplots(1, len(losses), figsize=(3.6 * len(losses), 3.2), squeeze=False)
    for ax, loss in zip(axes[0], losses):
        pts = [x for x in d.rows if x["loss"] == loss]
        ax.plot([x["streams"] for x in pts], [x["geofed_mbps"] for x in pts], "o-", label="geofed transfer")
        ax.plot([x["streams"] for x in pts], [x["iperf3_mbps"] for x in pts], "s--", label="iperf3")
        if "iperf3_bbr_mbps" in pts[0]:
            ax.plot([x["streams"] for x in pts], [x["iperf3_bbr_mbps"] for x in pts], "d--", label="iperf3 -C bbr")
        for p, style in zip(peers, ("^-.", "v:")):
            ax.plot([x["streams"] for x in pts], [x[p + "_mbps"] for x in pts], style, label=p)
        if loss == 0:
            ax.axhline(cap, color="k", lw=0.8, ls=":", label="link")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("TCP streams")
        ax.set_ylabel("Mb/s")
        ax.set_title(f"loss {loss:g}", fontsize=9)
        ax.legend(fontsize=7)
    yield figure(fig, outdir, f"transfer-{k}.png", "transfer rate against stream count, geofed and iperf3")
