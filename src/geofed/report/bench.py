"""Report sections of the interconnect validation suite: micro-benchmarks against the
link model, the comparison with OSU, the node-pair matrix and reference checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from geofed.records import Record
from geofed.report import esc, figure, mpi_transport, num, percent_change, section, table

def _size_axis(ax) -> None:
    # As in seed 002's figures: message size on a log2 axis, time or rate on log10.
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size [B]")
    ax.grid(True, which="major", alpha=0.3)


def _ratio(x, m) -> str:
    return f"{x / m:.3f}" if m else "-"


@section("bench.mpi", "MPI micro-benchmarks (OSU definitions) against the link model", order=40, each=True)
def mpi_runs(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    yield (f"<p class='meta'>placement {esc(d.placement)} on {esc(r.meta.get('federation', ''))}"
           f" · {esc(d.mpi_library)} (MPI {esc(d.mpi_version)}) · hosts {esc(', '.join(d.hosts))}"
           f"{mpi_transport(r)} · budget {d.budget_s} s per size · {esc(d.started)} to {esc(d.finished)}</p>")
    for unit in ("us", "MB/s"):
        results = [res for res in d.results if res["unit"] == unit and res["sizes"]]
        if not results:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for res in results:
            sizes = [row["size"] for row in res["sizes"]]
            value = [row["stats"]["p50"] if unit == "us" else row["value"] for row in res["sizes"]]
            line, = ax.plot(sizes, value, marker="o", ms=3, label=f"{res['benchmark']} ({res['class']})")
            model = [row.get("model") for row in res["sizes"]]
            if all(model):
                ax.plot(sizes, model, ls="--", color=line.get_color(), label=f"{res['benchmark']} model")
        _size_axis(ax)
        ax.set_ylabel("latency, median [us]" if unit == "us" else "bandwidth [MB/s]")
        ax.legend(fontsize=7)
        yield figure(fig, outdir, f"bench-mpi-{i}-{'lat' if unit == 'us' else 'bw'}.png", unit)
    for res in d.results:
        if not res["sizes"]:
            continue
        yield f"<h3>{esc(res['benchmark'])}: {esc(res['label'])}</h3>"
        m = res["model"]
        if m:
            bw = f", cap {m['bandwidth_MBps']:.0f} MB/s, BDP {m['bdp_bytes'] / 1e6:.3g} MB" if m["bandwidth_MBps"] else ""
            yield (f"<p>model: one-way {m['one_way_us']:.1f} us = propagation {m['propagation_us']:.1f}"
                   f" + local {m['local_us']:.1f}{esc(bw)}</p>")
        rows = [[row["size"], f"{row['value']:.2f}", f"{row['stats']['min']:.2f}", f"{row['stats']['p50']:.2f}",
                 f"{row['stats']['p90']:.2f}", f"{row['stats']['p99']:.2f}", f"{row['stats']['std']:.2f}",
                 row["iterations"], num(row.get("model"), ".2f"),
                 _ratio(row["stats"]["p50"] if res["unit"] == "us" else row["value"], row.get("model")),
                 "ok" if row["wrong"] == 0 else f"{row['wrong']} wrong"] for row in res["sizes"]]
        unit = res["unit"]
        yield table(["size [B]", f"OSU value [{unit}]", "min", "p50", "p90", "p99", "std", "iterations",
                     f"model [{unit}]", "ratio", "data"], rows,
                    ["fail" if row["wrong"] else "" for row in res["sizes"]])


@section("bench.compare", "geofed against the OSU Micro-Benchmarks (C) on the same ranks", order=41, each=True)
def compare_runs(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    yield (f"<p class='meta'>placement {esc(d.placement)}, {d.ranks_per_node} rank(s) per node,"
           f" median of {d.repeat} alternating runs each · OSU from {esc(d.osu)}</p>")
    rows = [[x["benchmark"], x["size"], f"{x['osu']:.2f}", f"{x['geofed']:.2f}", f"{x['diff']:+.2f}",
             num(x["ratio"], ".3f"), x["verdict"]] for x in d.rows]
    yield table(["benchmark", "size [B]", "OSU", "geofed", "diff", "ratio", "verdict"], rows,
                ["fail" if x["verdict"] == "differs" else "" for x in d.rows])
    for bench in dict.fromkeys(x["benchmark"] for x in d.rows):
        xs = [x for x in d.rows if x["benchmark"] == bench]
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot([x["size"] for x in xs], [x["osu"] for x in xs], marker="o", ms=3, label="OSU 7.4 (C)")
        ax.plot([x["size"] for x in xs], [x["geofed"] for x in xs], marker="x", ms=4, label="geofed")
        _size_axis(ax)
        ax.set_ylabel(f"{bench} [{xs[0]['unit']}]")
        ax.legend(fontsize=8)
        yield figure(fig, outdir, f"bench-compare-{i}-{bench}.png", bench)


@section("bench.matrix", "Latency and bandwidth between every pair of nodes", order=42, each=True)
def matrix_runs(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    nodes = d.nodes
    yield (f"<p class='meta'>{len(nodes)} nodes on {esc(r.meta.get('federation', ''))} · latency at"
           f" {d.latency_size} B (median), bandwidth at {d.bw_size} B, window {d.window} ·"
           f" {esc(d.started)}</p>")
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, key, title, cmap in ((axes[0], "latency_us", "latency [us] (colour: log10)", "viridis"),
                                 (axes[1], "bw_MBps", "bandwidth [MB/s]", "viridis_r")):
        grid = np.full((len(nodes), len(nodes)), np.nan)
        for p in d.pairs:
            a, b = nodes.index(p["a"]), nodes.index(p["b"])
            grid[a, b] = grid[b, a] = p[key]
        shown = np.log10(grid) if key == "latency_us" else grid
        im = ax.imshow(shown, cmap=cmap)
        ax.set_xticks(range(len(nodes)), nodes)
        ax.set_yticks(range(len(nodes)), nodes)
        for a in range(len(nodes)):
            for b in range(len(nodes)):
                if not np.isnan(grid[a, b]):
                    ax.text(b, a, f"{grid[a, b]:.0f}", ha="center", va="center", fontsize=7,
                            bbox={"facecolor": "white", "alpha": 0.7, "lw": 0, "pad": 1})
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.7)
    yield figure(fig, outdir, f"bench-matrix-{i}.png", "pair matrix heat map")
    rows = [[p["a"], p["b"], p["class"], f"{p['latency_us']:.2f}", f"{p['latency_min_us']:.2f}",
             num(p["model_latency_us"], ".2f"),
             _ratio(p["latency_us"], p["model_latency_us"]), f"{p['bw_MBps']:.1f}",
             num(p["model_bw_MBps"], ".1f"), _ratio(p["bw_MBps"], p["model_bw_MBps"])]
            for p in d.pairs]
    yield table(["a", "b", "class", "latency p50 [us]", "min [us]", "model [us]", "ratio", "bw [MB/s]",
                "model [MB/s]", "ratio"], rows)


@section("bench.check", "Benchmark results against references", order=43, each=True)
def check_runs(r: Record, i: int, outdir: Path) -> Iterator[str]:
    rows = r.data.rows
    yield (f"<p class='meta'>references {esc(r.data.references)} · {esc(r.created)}:"
           f" {sum(x['ok'] for x in rows)} of {len(rows)} met</p>")
    yield table(["system", "reference for", "nodes", "benchmark", "size", "reference", "allowed", "measured",
                 "deviation", "status"],
                [[x["system"], x["scope"], x["pair"] or "-", x["benchmark"], x["size"], f"{x['value']:.2f}",
                  f"{x['low']:.2f} .. {x['high']:.2f}", num(x["measured"], ".2f"),
                  percent_change(x["deviation"]), x["status"]]
                 for x in rows], ["" if x["ok"] else "fail" for x in rows])
