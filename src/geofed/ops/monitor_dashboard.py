"""`geofed monitor dashboard STORE --out DIR`: one self-contained HTML page of a store of
`monitor serve` (its plots are embedded), what MaDDash and a Grafana board show a NOC:

- a grid of the nodes, a row per source and a column per destination, each cell
  coloured by the worst state of that direction's series (ok, degraded, down), its
  reasons in the cell's tooltip; the paths' states and reasons below it;
- each series over time with the link model's line, the path's reference band (the
  judgement's allowance around its learnt level), the alerts (opened and cleared), the
  sustained level shifts, and the samples taken while another test ran apart (grey).

The y-axis is fixed by what matters, not by the noise: the model ±20 % and the
reference band three times over (loss: 0 to a few times its threshold), widened to
the current level when that left it; an older sample beyond it is drawn on the edge
as a triangle.
"""

from __future__ import annotations

import base64
import html
import io
import time
from datetime import datetime
from pathlib import Path

import matplotlib

from geofed.errors import UserError
from geofed.ops import judge
from geofed.ops.monitor_export import path_nodes, series_now
from geofed.ops.shifts import level_shifts

matplotlib.use("Agg")

COLOURS = {"ok": "#33cc33", "degraded": "#ffcc33", "down": "#ee3333", None: "#dddddd"}
STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table.grid { border-collapse: collapse; }
table.grid th, table.grid td { border: 1px solid #999; padding: 0.4em 0.8em; text-align: center; }
table.grid td.cell { width: 4em; height: 2em; }
table.paths td { padding: 0.2em 0.8em; white-space: nowrap; }
table.paths td.reason { white-space: normal; }
table.changes { border-collapse: collapse; font-size: 90%; margin-bottom: 0.5em; }
table.changes th, table.changes td { border-bottom: 1px solid #ddd; padding: 0.1em 0.6em; }
.series { display: inline-block; margin: 0.3em; }
.meta { color: #666; font-size: 90%; }
"""


def band(st: judge.Settings, metric: str, ref: tuple[float, float] | None) -> tuple[float, float] | None:
    """The reference's allowed range, as judge.assess_series allows it."""
    if ref is None or metric == "loss":
        return None
    level, spread = ref
    half = judge.reference_slack(st, metric, level, spread)
    return level - half, level + half


def y_range(st: judge.Settings, metric: str, model: float | None, allowed: tuple[float, float] | None,
            values: list[float]) -> tuple[float, float]:
    """Fixed limits: the model ±20 % and the reference band ×3 (loss: 0 to 3× its threshold)."""
    if metric == "loss":
        return 0.0, 3 * st.thresholds.get("loss", st.loss_degraded)
    spans = []
    if model:
        spans.append((0.8 * model, 1.2 * model))
    if allowed:
        mid, half = sum(allowed) / 2, (allowed[1] - allowed[0]) / 2
        spans.append((mid - 3 * half, mid + 3 * half))
    if not spans and values:
        mid = sorted(values)[len(values) // 2]
        spans.append((0.8 * mid, 1.2 * mid))
    if not spans:
        return 0.0, 1.0
    return max(0.0, min(s[0] for s in spans)), max(s[1] for s in spans)


def plot_series(store, st, s, events: list[tuple], changes: list[tuple] = ()) -> str:
    """One series' figure as a base64 PNG; `changes`: the live changes of its links
    (t, link, way, key, old, new)."""
    import matplotlib.pyplot as plt
    rows = store.rows("SELECT t, value, during FROM samples WHERE path=? AND src=? AND dst=? AND metric=? "
                      "ORDER BY t, id", (s.path, s.src, s.dst, s.metric))
    judged = [(t, v) for t, v, during in rows if v is not None and during is None]
    beside = [(t, v) for t, v, during in rows if v is not None and during is not None]
    failed = [t for t, v, _ in rows if v is None]
    allowed = band(st, s.metric, s.reference)
    lo, hi = y_range(st, s.metric, s.model, allowed, [v for _, v in judged])
    if s.value is not None and not lo <= s.value <= hi:  # a level that left the range is what to see
        lo, hi = min(lo, 0.9 * s.value), max(hi, 1.1 * s.value)
    fig, ax = plt.subplots(figsize=(6.2, 2.6))
    when = lambda ts: [datetime.fromtimestamp(t) for t in ts]  # noqa: E731
    if allowed:
        ax.axhspan(*allowed, color="tab:green", alpha=0.15, label="reference band")
    if s.model:
        ax.axhline(s.model, color="tab:blue", ls="--", lw=1, label="model")
    for points, colour, name in ((judged, "k", "samples"), (beside, "0.6", "during another test")):
        if not points:
            continue
        ts, vs = zip(*points)
        inside = [(t, v) for t, v in zip(ts, vs) if lo <= v <= hi]
        if inside:
            ax.plot(when([t for t, _ in inside]), [v for _, v in inside], ".", ms=3, color=colour, label=name)
        above = [t for t, v in zip(ts, vs) if v > hi]
        below = [t for t, v in zip(ts, vs) if v < lo]
        if above:
            ax.plot(when(above), [hi] * len(above), "^", ms=5, color=colour, clip_on=False)
        if below:
            ax.plot(when(below), [lo] * len(below), "v", ms=5, color=colour, clip_on=False)
    for t in failed:
        ax.axvline(datetime.fromtimestamp(t), color="tab:red", lw=0.6, alpha=0.5)
    for opened, cleared in events:
        ax.axvline(datetime.fromtimestamp(opened), color="tab:red", lw=1.5, label="alert")
        if cleared is not None:
            ax.axvline(datetime.fromtimestamp(cleared), color="tab:green", lw=1.5, label="cleared")
    for t, *_ in changes:
        ax.axvline(datetime.fromtimestamp(t), color="tab:purple", ls="--", lw=1.2, label="link changed")
    if judged:
        ts, vs = zip(*judged)
        for e in level_shifts(list(ts), list(vs)):
            ax.axvline(datetime.fromtimestamp(e["start"]), color="tab:orange", ls=":", lw=1.5, label="level shift")
    ax.set_ylim(lo, hi)
    unit = judge.METRICS[s.metric][0]
    ax.set_title(f"{s.path}  {s.direction}  {s.metric}", fontsize=9)
    ax.set_ylabel(unit or s.metric, fontsize=8)
    ax.tick_params(labelsize=7)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=6, loc="upper left")
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def grid(store, st, fed, series, paths: dict[str, tuple[str, str]]) -> str:
    """The MaDDash grid: a row per source, a column per destination."""
    esc = html.escape
    cells: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for s in series:
        state, reason = judge.assess_series(store, st, fed, s.path, s.src, s.dst, s.metric)
        if paths[s.path][0] == "down" and paths[s.path][1].startswith("no probe sample"):
            state, reason = paths[s.path]
        worst, reasons = cells.get((s.src, s.dst), ("ok", []))
        cells[(s.src, s.dst)] = (max(worst, state, key=judge.STATES.index), reasons + ([reason] if reason else []))
    srcs = sorted({k[0] for k in cells})
    dsts = sorted({k[1] for k in cells})
    out = ["<table class='grid'><tr><th>from \\ to</th>" + "".join(f"<th>{esc(d)}</th>" for d in dsts) + "</tr>"]
    for a in srcs:
        row = [f"<tr><th>{esc(a)}</th>"]
        for b in dsts:
            state, reasons = cells.get((a, b), (None, []))
            tip = "; ".join(reasons) or (state or "not monitored")
            row.append(f"<td class='cell' data-src='{esc(a)}' data-dst='{esc(b)}' data-state='{state or 'none'}' "
                       f"title='{esc(tip)}' style='background:{COLOURS[state]}'>{esc(state or '')}</td>")
        out.append("".join(row) + "</tr>")
    return "\n".join(out) + "</table>"


def write(store_path: str, outdir: str | Path) -> Path:
    """Write DIR/index.html; its path."""
    store, fed, st = judge.open_store(store_path)
    try:
        now = time.time()
        status = judge.status(store, fed, st, now)
        if not status:
            raise UserError(f"{store_path}: the store has no samples yet")
        paths = {p: (state, reason) for p, state, reason in status}
        series = series_now(store, fed, st)
        esc = html.escape
        parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>geofed monitor: {esc(fed.name)}</title>"
                 f"<style>{STYLE}</style></head><body>",
                 f"<h1>{esc(fed.name)}: link monitoring</h1>",
                 f"<p class='meta'>store {esc(str(Path(store_path).resolve()))} · "
                 f"{datetime.fromtimestamp(now).isoformat(' ', 'seconds')}</p>",
                 "<h2>Paths</h2>", grid(store, st, fed, series, paths),
                 "<table class='paths'>" + "".join(
                     f"<tr><td>{esc(p)}</td><td style='background:{COLOURS[state]}'>{state}</td>"
                     f"<td class='reason'>{esc(reason)}</td></tr>" for p, (state, reason) in paths.items()) + "</table>"]
        kept = store.link_changes()
        for path in paths:
            events = store.rows("SELECT opened, cleared FROM events WHERE path=? ORDER BY opened", (path,))
            a, b = path_nodes(path)
            crossed = {link.name for link in fed.route(fed.node(a).site, fed.node(b).site)}
            changes = [c for c in kept if c[1] in crossed]
            parts.append(f"<h2 id='{esc(path)}'>{esc(a)} – {esc(b)}</h2>")
            if changes:
                parts.append("<table class='changes'><tr><th>link changed</th><th>link</th><th>way</th>"
                             "<th>setting</th><th>from</th><th>to</th></tr>" + "".join(
                                 f"<tr><td>{datetime.fromtimestamp(t).isoformat(' ', 'seconds')}</td>"
                                 + "".join(f"<td>{esc(x)}</td>" for x in rest) + "</tr>"
                                 for t, *rest in changes) + "</table>")
            order = list(judge.METRICS)
            for s in sorted((s for s in series if s.path == path), key=lambda s: (order.index(s.metric), s.src != a)):
                parts.append(f"<div class='series'><img alt='{esc(f'{path} {s.direction} {s.metric}')}' "
                             f"src='data:image/png;base64,{plot_series(store, st, s, events, changes)}'></div>")
        parts.append("</body></html>")
    finally:
        store.close()
    outdir = Path(outdir)
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        index = outdir / "index.html"
        tmp = outdir / ".index.html.tmp"
        tmp.write_text("\n".join(parts))
        tmp.replace(index)
    except OSError as e:
        raise UserError(f"{outdir}: cannot write the dashboard there: {e.strerror}") from None
    return index
