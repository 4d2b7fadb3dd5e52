"""Report section: HPL runs (time, GFLOPS and residual check per N, where the ranks were)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, num, section, table


@section("bench.hpl", "High-Performance Linpack on placements (seeds 001 and 002)", order=46)
def runs(records: list[Record], outdir: Path) -> str:
    rows, classes = [], []
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for r in records:
        d = r.data
        sites = ", ".join(f"{s} {k}" for s, k in d.ranks_per_site.items())
        link = f"{d.link['rtt_ms']:.4g} ms" if d.link else "one site"
        for x in d.rows:
            rows.append([d.placement, d.ranks, sites, link, x["n"], x["nb"], f"{x['p']}x{x['q']}",
                         f"{x['time_s']:.2f}", f"{x['gflops']:.4g}", f"{x['residual']:.3g}",
                         "PASSED" if x["passed"] else "FAILED"])
            classes.append("" if x["passed"] else "fail")
        ax.plot([x["n"] for x in d.rows], [x["gflops"] for x in d.rows], "o-",
                label=f"{d.placement} ({link})")
    ax.set_xlabel("matrix order N")
    ax.set_ylabel("GFLOPS")
    ax.legend(fontsize=8)
    note = ("<p class='meta'>HPL 2.0 (from HPCC 1.5.0) on the placement's ranks; a run counts only with its "
            "residual check PASSED. " + esc(f"{len(records)} run(s)") + "</p>")
    return (note + table(["placement", "ranks", "ranks per site", "link RTT", "N", "NB", "P x Q", "time [s]",
                          "GFLOPS", "residual", "check"], rows, classes)
            + figure(fig, outdir, "hpl-gflops.png", "HPL GFLOPS against N per placement"))


@section("bench.hpl.sweep", "HPL tables: T, S, SP and SPF over placements (seed 002), one site against two (seed 001)",
         order=47, each=True)
def sweep(r: Record, k: int, outdir: Path) -> Iterator[str]:
    d = r.data
    peer = any("peer_time_s" in x for x in d.rows)
    rows = [[x["placement"], x["nodes"], "+".join(x["sites"]), x["n"], f"{x['time_s']:.2f}", f"{x['speedup']:.2f}",
             f"{x['gflops']:.3f}", f"{x['peak_gflops']:.1f}", f"{x['spf']:.1%}"]
            + ([f"{x['peer_time_s']:.2f}", f"{x['testbed_over_peer']:.2f}"] if peer else []) for x in d.rows]
    link = f"link {d.link['rtt_ms']:.4g} ms, {d.link['bandwidth_gbps']:g} Gb/s" if d.link else "no link"
    yield (f"<p class='meta'>{esc(r.meta.get('federation', ''))}: {esc(link)}; NB {d.nb}, "
           f"medians of {d.repeat}; peak per node "
           + esc(", ".join(f"{s} {g:.1f} GFLOPS" for s, g in d.peaks_gflops.items()))
           + f" ({esc(d.peak_source)}) · {esc(r.created)}</p>")
    yield table(["placement", "nodes P", "sites", "N", "T [s]", "S", "SP [GFLOPS]", "PP [GFLOPS]", "SPF"]
                + (["peer T [s]", "testbed / peer"] if peer else []), rows)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for n in d.ns:
        for across in (False, True):
            pts = sorted((x["nodes"], x["speedup"]) for x in d.rows
                         if x["n"] == n and (len(x["sites"]) > 1) == across)
            if pts:
                ax.plot(*zip(*pts), "o--" if across else "o-", label=f"N = {n}, {'two sites' if across else 'one site'}")
    ax.set_xlabel("nodes P")
    ax.set_ylabel("speed-up S")
    ax.legend(fontsize=8)
    yield figure(fig, outdir, f"hpl-speedup-{k}.png", "HPL speed-up against nodes, one site and two")


@section("model.hpl.scaling", "HPL speed-up against p in one site and across the link, and a faster link (seed 001)",
         order=48, each=True)
def scaling(r: Record, k: int, outdir: Path) -> Iterator[str]:
    d = r.data
    a, b = d.sites
    seed = ", ".join(f"{f} {g:+.0%}" for f, g in d.seed_001_bandwidth_gains.items())
    yield (f"<p class='meta'>{esc(r.meta.get('federation', ''))}: the model (docs/hpl.md), N = {d.n}, "
           f"NB = {d.nb}, {d.ranks_per_node} rank(s) per node; one site = {esc(a)}, two sites = "
           f"{esc(a)} + {esc(b)} evenly. Seed 001's Kruse model: {esc(seed)} · {esc(r.created)}</p>")
    rows = []
    for x in d.rows:
        one, two = x.get("one_site"), x.get("two_sites")
        rows.append([x["ranks"], num(one and one["speedup"], ".1f"), num(two and two["speedup"], ".1f"),
                     num(one and two and one["speedup"] / two["speedup"], ".2f"), f"{x['kruse_bound']:.1f}"]
                    + [f"{v['speedup']:.1f} ({v['gain']:+.0%})" if v else "-"
                       for v in (x.get("variants", {}).get(name) for name in d.varies)])
    yield table(["p", "one site", "two sites", "one / two", "p / ln p"] + d.varies, rows)
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ps = [x["ranks"] for x in d.rows]
    ax.plot(ps, [x["kruse_bound"] for x in d.rows], "k:", label="p / ln p (Kruse 2009)")
    for key, style, label in (("one_site", "o-", f"one site ({a})"), ("two_sites", "s-", f"two sites ({a}+{b})")):
        pts = [(x["ranks"], x[key]["speedup"]) for x in d.rows if key in x]
        ax.plot(*zip(*pts), style, label=label)
    for name in d.varies:
        pts = [(x["ranks"], x["variants"][name]["speedup"]) for x in d.rows if name in x.get("variants", {})]
        ax.plot(*zip(*pts), "s--", label=f"two sites, {name}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processes p")
    ax.set_ylabel("speed-up T(1) / T(p)")
    ax.legend(fontsize=7)
    yield figure(fig, outdir, f"hpl-scaling-{k}.png", "HPL speed-up against p, one site, two sites, faster links")
