"""`geofed bench grayscott`: what staging across a long link costs the simulation.

For each L the same simulation (same settings, ranks and nodes) runs twice, one
after the other: with staging off (engine "none": no gather, no stream) and with
the whole workflow (SST to the consumers at the other site). The simulation's time
per step is the median over its output intervals of rank 0's wall time for the
interval divided by plotgap; the overhead is on / off - 1. That ratio also moves
with the host: on 2 shared cores the consumers' processes take CPU from the
simulation's stencil, which staging on a real federation would not. So the
simulation's time outside its stencil (interval - compute: gather, staging, ranks
waiting for the writer) is reported too, as the direct cost of staging, against
the time per step without it. The staging run also gives the transfer rates of
every step (see workflow.step_table) and the bytes the link emulator carried.

The plotters draw only the first step here: drawing a frame under a node's CPU
quota takes longer than an interval of the simulation, and a plotter that falls
behind holds the writer (by design), which would measure matplotlib, not staging.
"""

from __future__ import annotations

import dataclasses
import statistics
import uuid
from pathlib import Path
from typing import Callable

from geofed import records
from geofed.apps.grayscott import workflow
from geofed.apps.grayscott.settings import Settings
from geofed.errors import UserError
from geofed.federation import Federation
from geofed.launch import runner


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """`64:200,128:100`: the (L, steps) pairs to measure."""
    try:
        pairs = [tuple(int(x) for x in item.split(":")) for item in text.split(",")]
    except ValueError:
        pairs = []
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise UserError(f"--sizes: expected L:STEPS pairs like 64:200,128:60, got {text!r}")
    return pairs


def per_step_ms(rows: list[dict], plotgap: int, key=lambda r: r["interval_s"]) -> float:
    """Median over output intervals of `key` (seconds per interval), in ms per simulation step."""
    return statistics.median(key(r) for r in rows) / plotgap * 1e3


def outside_stencil(r: dict) -> float:
    return r["interval_s"] - r["compute_s"]


def run_off(fed: Federation, s: Settings, out: Path, *, sim_site: str, analysis_site: str, sim_ranks: int,
            timeout: float, progress: Callable[[str], None]) -> list[dict]:
    """The simulation alone, staging off, on the nodes the workflow gives it; its output-interval rows."""
    run_dir = out / f"grayscott-off-{uuid.uuid4().hex[:8]}"
    run_dir.mkdir(parents=True)
    with runner.work_directory("grayscott", None) as work:
        parts = workflow.plan_parts(fed, dataclasses.replace(s, engine="none"), run_dir, work,
                                    sim_site=sim_site, analysis_site=analysis_site, pdf_site=None, plot_site=None,
                                    sim_ranks=sim_ranks, pdf_ranks=1, connect_timeout=60.0, frame_every=1, delays={})
        _, res = workflow.run_parts(fed, [p for p in parts if p.name == "simulation"], work, timeout, progress)
    return res["simulation"]["steps"]


def run(fed: Federation, base: Settings, sizes: list[tuple[int, int]], out: Path, *, sim_site: str = "G",
        analysis_site: str = "W", sim_ranks: int = 4, timeout: float = 900.0,
        progress: Callable[[str], None] = lambda m: None) -> dict:
    """`sizes`: (L, steps) pairs. Returns a `bench.grayscott` record."""
    cases = []
    for L, steps in sizes:
        s = dataclasses.replace(base, L=L, steps=steps, engine="SST")
        outputs = len(s.output_steps())
        progress(f"L = {L}, {steps} steps: staging off")
        off = run_off(fed, s, out, sim_site=sim_site, analysis_site=analysis_site, sim_ranks=sim_ranks, timeout=timeout,
                      progress=progress)
        progress(f"L = {L}, {steps} steps: staging on, SST from {sim_site} to {analysis_site}")
        rec = workflow.run(fed, s, out, sim_site=sim_site, analysis_site=analysis_site, sim_ranks=sim_ranks,
                           timeout=timeout, frame_every=outputs, progress=progress)
        d = rec.data
        on = d.steps
        off_ms, on_ms = per_step_ms(off, s.plotgap), per_step_ms(on, s.plotgap)
        staging_ms = per_step_ms(on, s.plotgap, outside_stencil)
        compute = {k: per_step_ms(rows, s.plotgap, lambda r: r["compute_s"]) for k, rows in (("off", off), ("on", on))}
        cases.append({
            "L": L, "steps": steps, "plotgap": s.plotgap, "outputs": outputs,
            "bytes_per_output": on[0]["bytes"],
            "off": {"per_step_ms": off_ms, "compute_ms": compute["off"], "intervals_s": [r["interval_s"] for r in off]},
            "on": {"per_step_ms": on_ms, "compute_ms": compute["on"], "staging_ms": staging_ms,
                   "intervals_s": [r["interval_s"] for r in on],
                   "gather_ms": statistics.median(r["gather_s"] for r in on) * 1e3,
                   "stage_ms": statistics.median(r["stage_s"] for r in on) * 1e3,
                   "transfer": d.transfer, "intact": rec.sanity().ok, "run_dir": d.run_dir},
            "overhead": on_ms / off_ms - 1,
            "staging_overhead": staging_ms / off_ms,
        })
    data = {"settings": base.to_json(), "sim_site": sim_site, "analysis_site": analysis_site, "sim_ranks": sim_ranks,
            "link": {"rtt_ms": fed.rtt_ms(sim_site, analysis_site),
                     "bandwidth_gbps": fed.bandwidth_gbps(sim_site, analysis_site)},
            "cases": cases}
    return records.make("bench.grayscott", data, **records.federation_meta(fed))


def format_table(rec: records.Record) -> str:
    d = rec.data
    head = (f"{'L':>4} {'steps':>5} {'MB/out':>6} {'off ms/step':>11} {'on ms/step':>10} {'overhead':>8} "
            f"{'staging ms/step':>15} {'of off':>7} {'compute off/on':>14} {'pdf Mb/s':>8} {'gplot Mb/s':>10} "
            f"{'both Mb/s':>9} {'link Mb/s':>9} {'carried MB':>10} {'behind at':>9} {'intact':>6}")
    lines = [head]
    for c in d.cases:
        on, x = c["on"], c["on"]["transfer"]
        rate, mb = x["median_mbps"], workflow.fmt_mbps
        lines.append(f"{c['L']:>4} {c['steps']:>5} {c['bytes_per_output'] / 1e6:>6.1f} {c['off']['per_step_ms']:>11.1f} "
                     f"{on['per_step_ms']:>10.1f} {c['overhead'] * 100:>+7.1f}% {on['staging_ms']:>15.2f} "
                     f"{c['staging_overhead'] * 100:>6.1f}% "
                     f"{c['off']['compute_ms']:>7.1f}/{on['compute_ms']:<6.1f} {mb(rate.get('pdf')):>8} {mb(rate.get('gplot')):>10} "
                     f"{mb(x['median_link_mbps']):>9} {mb(x['configured_mbps']):>9} "
                     f"{'-' if x['link_bytes'] is None else format(x['link_bytes'] / 1e6, '.0f'):>10} "
                     f"{behind_at(x):>9} {'yes' if on['intact'] else 'NO':>6}")
    lines.append(f"link {d.sim_site}-{d.analysis_site}: RTT {d.link['rtt_ms']:.3g} ms, "
                 f"{d.link['bandwidth_gbps']:g} Gb/s; medians over output intervals; staging: the simulation's "
                 f"time outside its stencil (gather, staging, waiting for the writer); Mb/s: step bytes over "
                 f"EndStep-to-arrival (common clock), per consumer and for both together; behind at: the output "
                 f"steps some consumer asked for only after they were published")
    return "\n".join(lines)


def behind_at(transfer: dict) -> str:
    steps = sorted({s for v in transfer["behind_steps"].values() for s in v})
    return ",".join(map(str, steps)) or "none"
