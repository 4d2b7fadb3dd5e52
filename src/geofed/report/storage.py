"""Report section: `geofed bench io` as seed 002's IOzone heat maps (file size x record
size, log2 axes, one map per operation and mode), and geofed's figures over IOzone's and
fio's on the same cells."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm

from geofed.records import Record
from geofed.records.storage import fmt_size
from geofed.report import esc, figure, num, section, table


def _grid(cells: list[Record], sizes: list[int], recs: list[int], value) -> np.ndarray:
    """A sizes x records array of value(cell); NaN where there is no cell (record > file)."""
    grid = np.full((len(sizes), len(recs)), np.nan)
    for c in cells:
        v = value(c)
        if v is not None:
            grid[sizes.index(c["size"]), recs.index(c["record"])] = v
    return grid


def _heat(ax, grid, sizes, recs, norm, cmap, title, text) -> object:
    im = ax.imshow(grid, origin="lower", aspect="auto", norm=norm, cmap=cmap)
    # Seed 002's maps: both axes log2, here one row per file size and one column per record
    ax.set_xticks(range(len(recs)), [fmt_size(r) for r in recs], fontsize=7, rotation=45)
    ax.set_yticks(range(len(sizes)), [fmt_size(s) for s in sizes], fontsize=7)
    ax.set_xlabel("record size", fontsize=8)
    ax.set_ylabel("file size", fontsize=8)
    ax.set_title(title, fontsize=9)
    for (i, j), v in np.ndenumerate(grid):
        if not np.isnan(v):
            ax.text(j, i, text(i, j, v), ha="center", va="center", fontsize=6)
    return im


def _maps(cells, ops, sizes, recs, mode, value, norm, cmap, text, unit, ticks=None) -> plt.Figure:
    fig, axes = plt.subplots(1, len(ops), figsize=(2.9 * len(ops), 3.1), squeeze=False)
    for ax, op in zip(axes[0], ops):
        mine = [c for c in cells if c["mode"] == mode and c["op"] == op]
        if not mine:
            ax.set_visible(False)
            continue
        grid = _grid(mine, sizes, recs, value)
        if np.isnan(grid).all():
            ax.text(0.5, 0.5, "not like for like", ha="center", va="center", transform=ax.transAxes, fontsize=8)
        im = _heat(ax, grid, sizes, recs, norm, cmap, f"{mode} {op}", text(mine, sizes, recs))
    bar = fig.colorbar(im, ax=axes[0][-1], label=unit)  # one scale for the row, beside its last map
    if ticks:
        bar.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])
        bar.minorticks_off()
    return fig


def _rate_text(cells, sizes, recs):
    cached = {(sizes.index(c["size"]), recs.index(c["record"])) for c in cells if c["cache_read"]}
    return lambda i, j, v: f"{v:.0f}" + ("\nc" if (i, j) in cached else "")


@section("bench.io", "Storage: IOzone's grid, with IOzone and fio on the same cells (seed 002)", order=72, each=True)
def storage(r: Record, k: int, outdir: Path) -> Iterator[str]:
    d = r.data
    cells, sizes, recs = d.cells, sorted({c["size"] for c in d.cells}), sorted({c["record"] for c in d.cells})
    notes = [f"{mode}: {why}" for mode, why in d.unsupported.items()]
    if d.skipped_sizes:
        notes.append(f"skipped by the {d.budget_s:g} s budget: " + ", ".join(map(fmt_size, d.skipped_sizes)))
    yield (f"<p class='meta'>{esc(d.path)} ({esc(d.filesystem)}) on {esc(r.host)}: medians of "
           f"{d.repeat} runs in MB/s; fsync inside every write's time; "
           + ("the file's pages dropped before `read`" if d.drop_cache else "no page-cache drop")
           + f"; 'c': a cache read (most of the file in the page cache as it began; memory "
           f"{d.memory_bytes / 2 ** 30:.1f} GiB) · {esc(r.created)}"
           + "".join(f"<br>{esc(n)}" for n in notes) + "</p>")
    if not cells:
        return
    if d.peers:
        rows = []
        for p in d.peers:
            a = d.agreement[p]
            rows.append([p, d.peer_versions.get(p, "?"), a["cells"], num(a["median_ratio"], ".3f"), a["within"],
                         a["long_cells"], num(a["long_median_ratio"], ".3f"),
                         a["long_within"], f"{a['self_within']} of {a['self_cells']}"])
        near = f"within {d.near:.0%}"
        yield table(["peer", "version", "cells", "median geofed / peer", near,
                    f"cells of {d.long_s * 1e3:g} ms or more", "their median", near,
                    f"the peer's first two runs {near}"], rows)
    rates = [c["geofed_mbps"] for c in cells if c["geofed_mbps"]]
    norm = LogNorm(vmin=min(rates), vmax=max(rates))
    for mode in d.modes:
        if not any(c["mode"] == mode for c in cells):
            continue
        fig = _maps(cells, d.ops, sizes, recs, mode, lambda c: c["geofed_mbps"], norm, "viridis", _rate_text, "MB/s")
        yield figure(fig, outdir, f"io-{k}-{mode}.png", f"geofed MB/s per file and record size, {mode}")
        for p in d.peers:
            # blank where the peer measures something else by design (see the command's notes)
            fig = _maps(cells, d.ops, sizes, recs, mode, lambda c: c[f"ratio_{p}"] if c[f"{p}_comparable"] else None,
                        LogNorm(vmin=0.5, vmax=2), "coolwarm", lambda *_: (lambda i, j, v: f"{v:.2f}"),
                        f"geofed / {p}", ticks=[0.5, 0.7, 0.9, 1, 1.1, 1.4, 2])
            yield figure(fig, outdir, f"io-{k}-{mode}-{p}.png", f"geofed over {p} per cell, {mode}")


@section("bench.remote_write", "Storage: a write across the link against a plain TCP copy of the same bytes", order=73,
         each=True)
def render_remote_write(rec: Record, i: int, outdir: Path) -> Iterator[str]:
    d = rec.data
    yield (f"<p class='meta'>{esc(rec.meta.get('federation'))}: {esc(d.node)} writing {fmt_size(d.size)} in "
           f"{fmt_size(d.record)} records with fsync into {esc(d.filesystem)} (served by {esc(d.server)}), then the "
           f"same bytes over one TCP stream {esc(d.node)} -> {esc(d.server)}; link RTT {d.link['rtt_ms']:.4g} ms, "
           f"{num(d.link['bandwidth_gbps'], 'g')} Gb/s</p>")
    rows = [[n, f"{r['write_mb_s']:.1f}", f"{r['copy_mb_s']:.1f}", f"{r['write_mb_s'] / r['copy_mb_s'] * 100:.1f} %"]
            for n, r in enumerate(d.rounds, 1)]
    rows.append(["median", f"{d.write_mb_s:.1f}", f"{d.copy_mb_s:.1f}", f"{d.of_copy * 100:.1f} %"])
    yield table(["round", "write MB/s", "plain copy MB/s", "write / copy"], rows)
