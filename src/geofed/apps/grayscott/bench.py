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

The network's ceiling for the same staging (apps/grayscott/ceiling.py) runs after the
staging run, between the same nodes (the writer's and the two consumers'), under their
CPU quotas: the step's bytes over plain TCP to each consumer, a connection each, sent
when it asks, published at the staging run's median output interval. Both rates are
the same measure (every consumer's bytes over publication to the last arrival, median
over the output steps), so `of TCP` is the staging's share of what the network carries
for this pattern. --repeat runs off, on and the ceiling in turn that many times per L.

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
from geofed.apps.grayscott import ceiling, workflow
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


def run_ceiling(fed: Federation, rec: records.Record, timeout: float) -> dict:
    """Plain TCP between the staging run's writer node and its two consumers' nodes, the same
    bytes per output step (both consumers read the whole step), at its median interval."""
    from geofed.testbed.core import require_up
    d = rec.data
    nodes = {p["name"]: p["nodes"] for p in d.parts}
    run_dir = Path(d.run_dir)
    return ceiling.run(require_up(fed), nodes["simulation"][0], [nodes["pdf"][0], nodes["gplot"][0]],
                       d.steps[0]["bytes"], len(d.steps), statistics.median(r["interval_s"] for r in d.steps),
                       run_dir, timeout=timeout)


def run(fed: Federation, base: Settings, sizes: list[tuple[int, int]], out: Path, *, sim_site: str = "G",
        analysis_site: str = "W", sim_ranks: int = 4, repeat: int = 1, with_ceiling: bool = True,
        timeout: float = 900.0, progress: Callable[[str], None] = lambda m: None) -> dict:
    """`sizes`: (L, steps) pairs, each measured `repeat` times (off, on, ceiling in turn).
    Returns a `bench.grayscott` record."""
    cases = []
    for (L, steps), rnd in ((size, r) for size in sizes for r in range(1, repeat + 1)):
        s = dataclasses.replace(base, L=L, steps=steps, engine="SST")
        outputs = len(s.output_steps())
        progress(f"L = {L}, {steps} steps, round {rnd}/{repeat}: staging off")
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
        tcp = None
        if with_ceiling:
            progress(f"L = {L}: the same bytes over plain TCP between the same nodes (the ceiling)")
            tcp = run_ceiling(fed, rec, timeout)
        link_mbps = d.transfer["median_link_mbps"]
        cases.append({
            "L": L, "steps": steps, "round": rnd, "plotgap": s.plotgap, "outputs": outputs,
            "bytes_per_output": on[0]["bytes"],
            "off": {"per_step_ms": off_ms, "compute_ms": compute["off"], "intervals_s": [r["interval_s"] for r in off]},
            "on": {"per_step_ms": on_ms, "compute_ms": compute["on"], "staging_ms": staging_ms,
                   "intervals_s": [r["interval_s"] for r in on],
                   "gather_ms": statistics.median(r["gather_s"] for r in on) * 1e3,
                   "stage_ms": statistics.median(r["stage_s"] for r in on) * 1e3,
                   "transfer": d.transfer, "link_mbps_steps": [r["link_mbps"] for r in on],
                   "intact": rec.sanity().ok, "run_dir": d.run_dir},
            "overhead": on_ms / off_ms - 1,
            "staging_overhead": staging_ms / off_ms,
            "ceiling": tcp,
            "of_ceiling": link_mbps / tcp["median_mbps"] if tcp and link_mbps else None,
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
            f"{'both Mb/s':>9} {'TCP Mb/s':>8} {'of TCP':>6} {'link Mb/s':>9} {'carried MB':>10} {'behind at':>9} "
            f"{'intact':>6}")
    lines = [head]
    for c in d.cases:
        on, x = c["on"], c["on"]["transfer"]
        rate, mb = x["median_mbps"], workflow.fmt_mbps
        lines.append(f"{c['L']:>4} {c['steps']:>5} {c['bytes_per_output'] / 1e6:>6.1f} {c['off']['per_step_ms']:>11.1f} "
                     f"{on['per_step_ms']:>10.1f} {c['overhead'] * 100:>+7.1f}% {on['staging_ms']:>15.2f} "
                     f"{c['staging_overhead'] * 100:>6.1f}% "
                     f"{c['off']['compute_ms']:>7.1f}/{on['compute_ms']:<6.1f} {mb(rate.get('pdf')):>8} {mb(rate.get('gplot')):>10} "
                     f"{mb(x['median_link_mbps']):>9} {mb((c.get('ceiling') or {}).get('median_mbps')):>8} "
                     f"{pct(c.get('of_ceiling')):>6} {mb(x['configured_mbps']):>9} "
                     f"{'-' if x['link_bytes'] is None else format(x['link_bytes'] / 1e6, '.0f'):>10} "
                     f"{behind_at(x):>9} {'yes' if on['intact'] else 'NO':>6}")
    for L, summary in ceiling_summary(d.cases).items():
        lines.append(f"L = {L}, {summary['rounds']} rounds, medians: staging {summary['staging_mbps']:.0f} Mb/s, "
                     f"plain TCP {summary['tcp_mbps']:.0f} Mb/s: {summary['of_ceiling']:.1%} of the ceiling")
    lines.append(f"link {d.sim_site}-{d.analysis_site}: RTT {d.link['rtt_ms']:.3g} ms, "
                 f"{d.link['bandwidth_gbps']:g} Gb/s; medians over output intervals; staging: the simulation's "
                 f"time outside its stencil (gather, staging, waiting for the writer); Mb/s: step bytes over "
                 f"EndStep-to-arrival (common clock), per consumer and for both together; behind at: the output "
                 f"steps some consumer asked for only after they were published; TCP: the same bytes over plain "
                 f"TCP between the same nodes in the same run (the ceiling), of TCP: both together / TCP")
    return "\n".join(lines)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def ceiling_summary(cases: list[dict]) -> dict:
    """Per L measured against its ceiling: medians over the rounds of both rates and of their ratio."""
    by: dict[int, list[dict]] = {}
    for c in cases:
        if c.get("of_ceiling") is not None:
            by.setdefault(c["L"], []).append(c)
    return {L: {"rounds": len(cs),
                "staging_mbps": statistics.median(c["on"]["transfer"]["median_link_mbps"] for c in cs),
                "tcp_mbps": statistics.median(c["ceiling"]["median_mbps"] for c in cs),
                "of_ceiling": statistics.median(c["of_ceiling"] for c in cs)} for L, cs in by.items()}


def behind_at(transfer: dict) -> str:
    steps = sorted({s for v in transfer["behind_steps"].values() for s in v})
    return ",".join(map(str, steps)) or "none"
