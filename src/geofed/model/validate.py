"""Predicted against measured: every inter-site run in a set of records.

Rows come from records geofed already writes (bench.mpi across sites, mdfs.sweep,
bench.obstacle, bench.grayscott, bench.hpl and its sweep); each is predicted with the same models `geofed predict` uses, from
a calibration that saw only one-site runs. SimGrid (LV08 and CM02) predicts the MPI
point-to-point rows beside geofed.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Callable

from geofed.errors import UserError
from geofed.launch.placement import parse
from geofed.model import registry, simgrid
from geofed.records import Record
from geofed.records.grayscott import GrayScottParams
from geofed.records.hpl import HplParams
from geofed.records.mdfs import MdfsSplitParams
from geofed.records.mpi import MpiBandwidthParams
from geofed.records.obstacle import ObstacleParams
from geofed.records.transfer import TransferParams

TOLERANCE = 0.15  # the bar: every inter-site row within 15 % of the median measured


def _nodes_of(fed, placement: str):
    return parse(placement, fed).nodes(fed)


# Record kind -> the model's rows for its inter-site runs: rows(fed, cal, data, source).
# A model whose workload writes a new kind registers here.
PREDICTS: dict[str, list[Callable]] = {}


def predicts(kind: str):
    def register(fn):
        PREDICTS.setdefault(kind, []).append(fn)
        return fn
    return register


def rows_from(fed, cal, recs: list[Record]) -> list[dict]:
    rows = []
    for rec in recs:
        if rec.meta.get("federation") not in (fed.name, None):
            continue
        for rows_of in PREDICTS.get(rec.kind, []):
            rows += rows_of(fed, cal, rec.data, rec.path or rec.created)
    for r in rows:
        r["error"] = r["predicted"] / r["measured"] - 1 if r["measured"] else None
    return rows


def _row(workload, placement, params, measured, unit, pred, source, predicted=None) -> dict:
    """A bench.model row; `params` the model's typed parameters, kept as the fields that vary."""
    params = params if isinstance(params, dict) else dataclasses.asdict(params)
    return {"workload": workload, "placement": placement, "params": params, "measured": measured, "unit": unit,
            "predicted": pred.total_s if predicted is None else predicted, "parts": dict(pred.parts), "source": source}


@predicts("bench.mpi")
def _mpi_rows(fed, cal, data, where) -> list[dict]:
    if len(data.sites) < 2:
        return []
    placement = data.placement
    if not placement:
        return []
    nodes = _nodes_of(fed, placement)
    out = []
    for res in data.results:
        if res.get("class") != "inter-site":
            continue
        name = {"latency": "mpi-latency", "bw": "mpi-bw", "allreduce": "mpi-allreduce"}.get(res.get("benchmark"))
        if name is None:
            continue
        model = registry.get(name)
        for size_row in res.get("sizes", []):
            size = int(size_row["size"])
            measured = (size_row.get("stats") or {}).get("p50", size_row.get("value"))
            if name == "mpi-bw":
                params = MpiBandwidthParams(size, res.get("window") or MpiBandwidthParams.window)
                pred = model.predict(fed, cal, placement, nodes, params)
                out.append(_row(name, placement, params, measured, "MB/s", pred, where,
                                predicted=model.rate_MBps(pred, params)))
            else:
                params = model.Params(size)  # the message's or the allreduced vector's size
                pred = model.predict(fed, cal, placement, nodes, params)
                out.append(_row(name, placement, params, measured, "us", pred, where, predicted=pred.total_s * 1e6))
    return out


@predicts("mdfs.sweep")
def _mdfs_rows(fed, cal, data, where) -> list[dict]:
    model = registry.get("mdfs")
    out = []
    for row in data.rows:
        if len(row.get("sites") or []) < 2:
            continue
        params = MdfsSplitParams(row["split"])
        pred = model.predict(fed, cal, row["placement"], _nodes_of(fed, row["placement"]), params)
        out.append(_row("mdfs", row["placement"], params, row["compute_s"] + row["staging_s"], "s", pred, where))
    return out


@predicts("bench.obstacle")
def _obstacle_rows(fed, cal, data, where) -> list[dict]:
    model = registry.get("obstacle")
    out = []
    for row in data.solver or []:
        if not row.get("across_link"):
            continue
        for scheme in ("sync", "async", "mpi"):
            measured = row.get(f"{scheme}_s")
            if measured is None:
                continue
            params = ObstacleParams(scheme, data.n)
            pred = model.predict(fed, cal, row["placement"], _nodes_of(fed, row["placement"]), params)
            out.append(_row("obstacle", row["placement"], params, measured, "s", pred, where))
    return out


@predicts("bench.hpl")
def _hpl_run_rows(fed, cal, data, where) -> list[dict]:
    """Every N of an HPL run whose ranks sit at two sites. A run solves its orders in turn
    over the same connections: each order after the first is predicted after the one before."""
    if len(data.ranks_per_site) < 2 or data.where != "testbed":
        return []
    runs = [(data.placement, dataclasses.replace(data.params, ns=tuple(x["n"] for x in data.rows[max(0, i - 1):i + 1]),
                                                 nb=r["nb"], p=r["p"], q=r["q"]), r)
            for i, r in enumerate(data.rows) if r["passed"]]
    return _hpl_rows(fed, cal, runs, where)


@predicts("bench.hpl.sweep")
def _hpl_sweep_rows(fed, cal, data, where) -> list[dict]:
    """Every row of an HPL sweep across two sites: one rank per node, HPL.dat's default
    look-ahead, every placement solving `ns` in turn."""
    ns = data.ns
    runs = [(r["placement"], HplParams(tuple(ns[max(0, i % len(ns) - 1):i % len(ns) + 1]), r["nb"], r["p"], r["q"]), r)
            for i, r in enumerate(data.rows) if len(r["sites"]) > 1]
    return _hpl_rows(fed, cal, runs, where)


def _hpl_rows(fed, cal, runs: list[tuple[str, HplParams, dict]], where) -> list[dict]:
    model = registry.get("hpl")
    out = []
    for placement, params, r in runs:
        pred = model.predict(fed, cal, placement, _nodes_of(fed, placement), params)
        out.append(_row("hpl", placement, {"n": params.ns[-1], "nb": params.nb, "grid": f"{params.p}x{params.q}",
                                           "after": params.ns[-2] if len(params.ns) > 1 else None},
                        r["time_s"], "s", pred, where))
    return out


@predicts("bench.obstacle")
def _transfer_rows(fed, cal, data, where) -> list[dict]:
    """One TCP stream moving bench obstacle's transfer size across the link (its TCP reference)."""
    tput = data.throughput or {}
    runs = (tput.get("runs") or {}).get("tcp") or []
    if not runs or not tput.get("pair"):
        return []
    nbytes = int(tput["mbytes"] * 1e6)
    measured = statistics.median(nbytes * 8 / (r["transfer_mbps"] * 1e6) for r in runs)
    placement = "".join(f"{n[0]}1" for n in tput["pair"])
    model = registry.get("transfer")
    params = TransferParams(nbytes, streams=1)
    pred = model.predict(fed, cal, placement, _nodes_of(fed, placement), params)
    return [_row("transfer", placement, params, measured, "s", pred, where)]


@predicts("bench.grayscott")
def _grayscott_rows(fed, cal, data, where) -> list[dict]:
    if data.sim_site == data.analysis_site:
        return []
    """Per simulation step: its stencil alone plus its time outside the stencil with staging on.

    The measured staging-on step also holds the consumers' CPU use on this host's shared
    cores (bench grayscott's docstring); the sum leaves that out, as a federation would.
    """
    model = registry.get("grayscott")
    sim, analysis = data.sim_site, data.analysis_site
    placement = f"{sim}1{analysis}1"
    out = []
    for case in data.cases:
        params = GrayScottParams(case["L"], case["plotgap"], data.sim_ranks, consumers=2)
        pred = model.predict(fed, cal, placement, _nodes_of(fed, placement), params)
        measured = case["off"]["per_step_ms"] + case["on"]["staging_ms"]
        out.append(_row("grayscott", placement, {"L": case["L"], "plotgap": case["plotgap"]}, measured, "ms/step",
                        pred, where, predicted=pred.total_s * 1e3))
    return out


def add_simgrid(fed, cal, rows: list[dict]) -> str | None:
    """SimGrid's LV08 and CM02 values beside the MPI point-to-point rows; why not, if it cannot run."""
    why = simgrid.available()
    if why:
        return why
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["workload"] in ("mpi-latency", "mpi-bw"):
            groups.setdefault((r["workload"], r["placement"], r["params"].get("window", 1)), []).append(r)
    for (workload, placement, window), group in groups.items():
        nodes = _nodes_of(fed, placement)
        sizes = sorted({r["params"]["size"] for r in group})
        mode = "pingpong" if workload == "mpi-latency" else "window"
        for model in simgrid.NETWORK_MODELS:
            times = simgrid.simulate(fed, cal, nodes[0].site, nodes[1].site, sizes, mode, window, model)
            for r in group:
                t = times.get(r["params"]["size"])
                if t is None:
                    continue
                value = t / 2 * 1e6 if mode == "pingpong" else window * r["params"]["size"] / t / 1e6
                r[f"simgrid_{model}"] = value
                r[f"simgrid_{model}_error"] = value / r["measured"] - 1
    return None


def check(fed, cal, recs: list[Record], simgrid: bool = True) -> dict:
    """Every inter-site row of the records predicted, SimGrid beside when asked: a
    `bench.model` record's data. UserError when no row is there to predict."""
    rows = rows_from(fed, cal, recs)
    if not rows:
        raise UserError(f"no inter-site run of federation {fed.name} in the records given")
    why = add_simgrid(fed, cal, rows) if simgrid else "not asked (--simgrid)"
    calibration = {"sources": cal.sources, "notes": cal.notes, "sites": cal.sites,
                   "tcp_window_bytes": cal.tcp_window_bytes, "transport": cal.transport,
                   "crossing_us": cal.crossing_us, "crossing_frame_bytes": cal.crossing_frame_bytes,
                   "crossing_cpu_ns_per_byte": cal.crossing_cpu_ns_per_byte, "host_cores": cal.host_cores}
    return {"calibration": calibration, "rows": rows, "summary": summary(rows), "simgrid": why or "ran"}


def format_table(data: dict) -> str:
    lines = [f"{'workload':14} {'placement':9} {'params':22} {'measured':>10} {'predicted':>10} {'error':>7}"
             f" {'SimGrid LV08':>12} {'CM02':>10}"]
    for r in data["rows"]:
        params = ",".join(f"{k}={v}" for k, v in r["params"].items())
        sg = "".join(f" {r[k]:>{w}.4g}" if k in r else f" {'-':>{w}}" for k, w in (("simgrid_LV08", 12),
                                                                                  ("simgrid_CM02", 10)))
        lines.append(f"{r['workload']:14} {r['placement']:9} {params:22} {r['measured']:10.4g} {r['predicted']:10.4g}"
                     f" {r['error']:+7.1%}{sg}  {r['unit']}")
    summ = data["summary"]
    lines.append(f"{summ['within_tolerance']}/{summ['rows']} rows within {TOLERANCE:.0%}; "
                 f"median |error| {summ['median_abs_error']:.1%}, max {summ['max_abs_error']:.1%}")
    for model in simgrid.NETWORK_MODELS:
        s = summ.get(f"simgrid_{model}")
        if s:
            lines.append(f"SimGrid {model}: median |error| {s['median_abs_error']:.1%} on {s['rows']} MPI rows "
                         f"(geofed {s['geofed_median_abs_error']:.1%} on the same rows)")
    if data["simgrid"] != "ran":
        lines.append(f"SimGrid: {data['simgrid']}")
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["error"]) for r in rows if r["error"] is not None]
    out = {"rows": len(rows), "within_tolerance": sum(e <= TOLERANCE for e in errors),
           "median_abs_error": statistics.median(errors) if errors else None,
           "max_abs_error": max(errors) if errors else None}
    for model in simgrid.NETWORK_MODELS:
        errs = [abs(r[f"simgrid_{model}_error"]) for r in rows if f"simgrid_{model}_error" in r]
        if errs:
            mine = [abs(r["error"]) for r in rows if f"simgrid_{model}_error" in r]
            out[f"simgrid_{model}"] = {"rows": len(errs), "median_abs_error": statistics.median(errs),
                                       "geofed_median_abs_error": statistics.median(mine)}
    return out
