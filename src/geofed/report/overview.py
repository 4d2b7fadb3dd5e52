"""The report's first page, for a reader who will not read the rest: the federation
drawn with its sites and links, each link's verdict with its reason, and the headline
figures of each link (round trip, MPI latency and bandwidth) beside the link model's
and the seeds' own where the seed measured them.

A link's verdict gathers what the records say about it: `testbed verify`'s pairs
across it (RTT and throughput as configured) and `bench check`'s rows for it (each
against its reference). Any of them failing fails the link, naming why; a link no
record measured says so. The federation's shape comes from its file (the command
line passes `federation.layout`s: the report does not read federation files).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, lead, num, table

# What the seeds measured on the real systems the shipped federations stand for:
# federation -> figure -> (value, where it comes from).
SEED_FIGURES = {
    "icm-task": {"RTT [ms]": (9.0, "seed 000: 9 ms round trip over ~900 km (Pionier)")},
    "ma-hd": {"MPI latency, 1 B [us]": (145.0, "seed 001: 145 us = 143 us light transit + 2 us local"),
              "MPI bandwidth [MB/s]": (930.0, "seed 001: about 930 MB/s (the testbed scales bandwidth by 0.25)")},
    "ma-hd-seed": {"MPI latency, 1 B [us]": (145.0, "seed 001: 145 us = 143 us light transit + 2 us local"),
                   "MPI bandwidth [MB/s]": (930.0, "seed 001: about 930 MB/s")},
}
FIGURES = ("RTT [ms]", "MPI latency, 1 B [us]", "MPI bandwidth [MB/s]")
COLOURS = {"ok": "tab:green", "FAIL": "tab:red", "not measured": "0.6"}


@dataclass
class LinkState:
    a: str
    b: str
    rtt_ms: float
    bandwidth_gbps: float
    failed: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    figures: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # figure -> (measured, model)

    @property
    def verdict(self) -> str:
        return "FAIL" if self.failed else "ok" if self.passed else "not measured"

    @property
    def reason(self) -> str:
        return "; ".join(self.failed or self.passed) or "no record measured this link"


def _links(layout: dict) -> dict[frozenset, LinkState]:
    return {frozenset((l["a"], l["b"])): LinkState(l["a"], l["b"], l["rtt_ms"], l["bandwidth_gbps"])
            for l in layout["links"]}


def _site_pair(layout: dict, x: str, y: str) -> frozenset | None:
    sites = frozenset(layout["nodes"].get(n.split("@")[-1]) for n in (x, y))
    return sites if len(sites) == 2 and None not in sites else None


def judge_links(recs: list[Record], layout: dict) -> dict[frozenset, LinkState]:
    """Every link of a federation with what its records (oldest first) say about it."""
    links = _links(layout)
    for r in recs:
        if r.kind != "bench.check" and r.federation != layout["name"]:
            continue  # a check's rows name their systems
        if r.kind == "testbed.verify":
            for p in r.data.pairs:
                link = links.get(_site_pair(layout, p["src"], p["dst"]))
                if link is None:
                    continue
                rtt, tp = p["rtt_ms"], p["throughput_mbps"]
                text = (f"{p['src']}>{p['dst']} RTT {rtt['median']:.4g} ms (configured {rtt['configured']:.4g}), "
                        f"throughput {tp['measured']:.0f} of {tp['configured']:.0f} Mbit/s")
                (link.passed if rtt["ok"] and tp["ok"] else link.failed).append(
                    ("as configured: " if rtt["ok"] and tp["ok"] else "off its configuration: ") + text)
                link.figures["RTT [ms]"] = (rtt["median"], rtt["configured"])
        elif r.kind == "bench.check":
            for row in (row for row in r.data.rows if row["system"] == layout["name"]):
                link = links.get(frozenset(row["link"].split("-"))) if row.get("link") else \
                    links.get(frozenset(row["scope"].split("-")))
                if link is None:
                    continue
                if row["ok"]:
                    link.passed.append(f"{row['benchmark']} {row['size']} B on {row['pair']} within its reference")
                elif row["measured"] is None:
                    link.failed.append(f"{row['benchmark']} {row['size']} B: no run measured this link")
                else:
                    link.failed.append(f"{row['benchmark']} {row['size']} B on {row['pair']}: {row['measured']:.4g} vs "
                                       f"reference {row['value']:.4g} ({row['deviation'] * 100:+.0f} %, {row['status']})")
        elif r.kind == "bench.matrix":
            for p in r.data.pairs:
                link = links.get(_site_pair(layout, p["a"], p["b"]))
                if link is not None:
                    link.figures["MPI latency, 1 B [us]"] = (p["latency_us"], p["model_latency_us"])
                    link.figures["MPI bandwidth [MB/s]"] = (p["bw_MBps"], p["model_bw_MBps"])
        elif r.kind == "bench.mpi":
            sites = {x["site"] for x in r.data.ranks[:2]}
            link = links.get(frozenset(sites)) if len(sites) == 2 else None
            for res in r.data.results if link else []:
                if res["benchmark"] == "latency" and res["sizes"] and res["sizes"][0]["size"] == 1:
                    link.figures["MPI latency, 1 B [us]"] = (res["sizes"][0]["value"], res["sizes"][0].get("model"))
                if res["benchmark"] == "bw" and res["sizes"]:
                    top = res["sizes"][-1]
                    link.figures["MPI bandwidth [MB/s]"] = (top["value"], top.get("model"))
    return links


def draw(layout: dict, links: dict[frozenset, LinkState], outdir: Path, name: str) -> str:
    """The federation: its sites on a circle, its links coloured by verdict."""
    sites = layout["sites"]
    n = len(sites)
    where = {s["code"]: (math.cos(math.pi + 2 * math.pi * i / n), math.sin(math.pi + 2 * math.pi * i / n) * 0.8)
             if n > 1 else (0.0, 0.0) for i, s in enumerate(sites)}
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for link in links.values():
        (x0, y0), (x1, y1) = where[link.a], where[link.b]
        ax.plot([x0, x1], [y0, y1], color=COLOURS[link.verdict], lw=4, zorder=1, solid_capstyle="round")
        ax.text((x0 + x1) / 2, (y0 + y1) / 2,
                f"{link.a}–{link.b}: {link.verdict}\n{link.rtt_ms:.3g} ms RTT · {link.bandwidth_gbps:g} Gb/s",
                ha="center", va="center", fontsize=9, zorder=3,
                bbox={"boxstyle": "round", "fc": "white", "ec": COLOURS[link.verdict]})
    for s in sites:
        x, y = where[s["code"]]
        ax.scatter([x], [y], s=900 + 60 * s["nodes"], color="tab:blue", zorder=2)
        ax.text(x, y, s["code"], ha="center", va="center", color="white", fontsize=13, weight="bold", zorder=4)
        side = "right" if x < -0.1 else "left" if x > 0.1 else "center"  # outwards, clear of the links
        ax.text(x + {"right": -0.2, "left": 0.2, "center": 0.0}[side], y - (0.3 if side == "center" else 0.0),
                f"{s['name']}\n{s['nodes']} node{'s' if s['nodes'] != 1 else ''}", ha=side,
                va="top" if side == "center" else "center", fontsize=9)
    ax.set_xlim(-2.0, 2.0)
    ax.set_ylim(-1.35, 1.1)
    ax.set_axis_off()
    ax.set_title(f"{layout['name']}: {layout['description']}", fontsize=10)
    return figure(fig, outdir, name, f"the federation {layout['name']}: its sites and links")


def federations_named(recs: list[Record]) -> set[tuple[str, str | None]]:
    """(name, file or None) of every federation the records name (a check's rows name theirs)."""
    return ({(r.federation, r.meta.get("federation_file")) for r in recs if r.federation}
            | {(row["system"], None) for r in recs if r.kind == "bench.check" for row in r.data.rows
               if row["system"] != "*"})


@lead
def overview(recs: list[Record], layouts: dict[str, dict], outdir: Path) -> str:
    """The overview's HTML, one block per federation the records name."""
    names = sorted({name for name, _ in federations_named(recs)})
    if not names:
        return ""
    parts = ["<section id='overview'><h2>Overview</h2>"]
    for i, name in enumerate(names):
        layout = layouts.get(name)
        if layout is None:
            parts.append(f"<p>{esc(name)}: its federation file was not found; no drawing, no verdict per link.</p>")
            continue
        links = judge_links(recs, layout)
        parts.append(draw(layout, links, outdir, f"overview-{i}.png"))
        parts.append(table(["link", "verdict", "reason"],
                           [[f"{l.a}–{l.b}", l.verdict, l.reason] for l in links.values()],
                           ["fail" if l.verdict == "FAIL" else "" for l in links.values()]))
        seeds = SEED_FIGURES.get(name, {})
        rows = [[f"{l.a}–{l.b}", fig, num(l.figures[fig][0]), num(l.figures[fig][1]),
                 num(seeds[fig][0]) if fig in seeds else "-", seeds[fig][1] if fig in seeds else ""]
                for l in links.values() for fig in FIGURES if fig in l.figures]
        if rows and seeds:
            parts.append(table(["link", "figure", "measured", "model", "seed's", "seed's source"], rows))
        elif rows:
            parts.append(table(["link", "figure", "measured", "model"], [row[:4] for row in rows]))
    parts.append("</section>")
    return "\n".join(parts)
