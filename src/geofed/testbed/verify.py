"""Measure a running testbed and hold it against its federation file.

Inter-site pairs must meet the link model: the link's own contribution to the median
RTT (measured minus the floor: the same path's round trip with the emulator holding
nothing, measured at `up`) within 5 % of twice the fibre's propagation; no round trip
below twice the propagation (1 % slack); TCP goodput within 10 % of what the path's
narrowest hop carries (its payload share, TCP_PAYLOAD_PER_WIRE_BYTE: 95.6 %): a node's
interface on its site's fabric is a hop as much as a link is (Federation.path_between). Inside a site the host cannot emulate the
microseconds of an InfiniBand fabric (veths and a bridge cost tens of µs), so an
intra-site pair passes when its median RTT is below 1 ms and, where a local rate is
configured, its goodput is within 10 % of that rate's payload share.

Each pair also reports the host CPU one TCP stream between them costs per MB (every
core's busy time around a 128 MB transfer, median of five; not a pass/fail item):
across the link it includes the emulator's forwarding, which on a host with no core
left over delays the ranks (model calibration: `crossing_cpu_ns_per_byte`).
"""

from __future__ import annotations

import os
import statistics
from typing import Callable

from geofed.federation import TCP_PAYLOAD_PER_WIRE_BYTE, Federation
from geofed.stats import percentile
from geofed.testbed import host, probe
from geofed.testbed.core import read_state, require_root
from geofed.testbed.plan import NodePlan, make_plan

RTT_TOLERANCE = 0.05
PROPAGATION_SLACK = 0.01
THROUGHPUT_TOLERANCE = 0.10
INTRA_SITE_RTT_LIMIT_MS = 1.0
CPU_PROBE_BYTES = 128 << 20
CPU_PROBE_RUNS = 5


def pairs(fed: Federation) -> list[tuple[NodePlan, NodePlan, str]]:
    """One intra-site pair per site that has two nodes, and every pair of sites."""
    plan = make_plan(fed)
    first = {}
    out = []
    for s in fed.sites:
        nodes = [n for n in plan.nodes if n.node.site == s.code]
        first[s.code] = nodes[0]
        if len(nodes) >= 2:
            out.append((nodes[0], nodes[1], "intra-site"))
    codes = [s.code for s in fed.sites]
    for i, a in enumerate(codes):
        for b in codes[i + 1:]:
            out.append((first[a], first[b], "inter-site"))
    return out


def verify(fed: Federation, rtt_count: int = 200, streams: int = 4, seconds: float = 3.0,
           progress: Callable[[str], None] = lambda m: None) -> dict:
    require_root("verify")
    state = read_state(make_plan(fed)) or {}
    results = []
    for src, dst, cls in pairs(fed):
        a, b = src.node.site, dst.node.site
        progress(f"measuring {src.node.name} -> {dst.node.name} ({cls})")
        samples, lost = probe.rtt_samples_ms(src, dst, count=rtt_count)
        mbps = probe.throughput_mbps(src, dst, streams=streams, seconds=seconds)
        cpu = host_cpu_ms_per_mb(src, dst)
        configured_rtt = fed.rtt_ms(a, b)
        bw = fed.bandwidth_gbps(a, b)
        configured_mbps = bw * 1000 if bw else None
        median = statistics.median(samples)
        link = None
        if cls == "inter-site":
            link = link_check(fed, state, a, b, samples)
            rtt_ok = link["ok"]
        else:
            rtt_ok = median < INTRA_SITE_RTT_LIMIT_MS
        # The rate is the wire's; TCP's goodput is its payload share of it.
        goodput = configured_mbps * TCP_PAYLOAD_PER_WIRE_BYTE if configured_mbps else None
        tput_ok = goodput is None or abs(mbps - goodput) <= THROUGHPUT_TOLERANCE * goodput
        results.append({
            "src": src.node.name, "dst": dst.node.name, "class": cls,
            "rtt_ms": {
                "configured": configured_rtt,
                "min": min(samples), "median": median, "p99": percentile(samples, 99),
                "samples": len(samples), "lost": lost, "ok": rtt_ok,
            },
            "link": link,
            "throughput_mbps": {
                "configured": configured_mbps, "measured": mbps, "streams": streams, "ok": tput_ok,
            },
            "host_cpu_ms_per_MB": cpu,
        })
    return {"pairs": results, "host_cores": os.cpu_count(),
            "ok": all(r["rtt_ms"]["ok"] and r["throughput_mbps"]["ok"] for r in results)}


def host_cpu_ms_per_mb(src: NodePlan, dst: NodePlan) -> float:
    """Busy CPU seconds of the whole host per 10^6 bytes one TCP stream carries from src to dst, in ms."""
    costs = []
    for _ in range(CPU_PROBE_RUNS):
        before = host.busy_cpu_s()
        probe.throughput_mbps(src, dst, streams=1, nbytes=CPU_PROBE_BYTES)
        costs.append((host.busy_cpu_s() - before) / (CPU_PROBE_BYTES / 1e6) * 1e3)
    return statistics.median(costs)


def link_check(fed: Federation, state: dict, a: str, b: str, samples: list[float]) -> dict:
    """The link's own part of the round trip against the fibre's, and the physics floor of every sample."""
    route = fed.route(a, b)
    propagation_rtt = sum(l.propagation_rtt_ms for l in route)
    emulators = state.get("emulators", {})
    floor = sum(emulators[l.name]["floor"]["probe_rtt_ms"]["median"] for l in route if l.name in emulators)
    contribution = statistics.median(samples) - floor
    error = contribution / propagation_rtt - 1 if propagation_rtt else 0.0
    below = sum(1 for x in samples if x < (1 - PROPAGATION_SLACK) * propagation_rtt)
    return {"propagation_rtt_ms": propagation_rtt, "floor_rtt_ms": floor, "contribution_ms": contribution,
            "error": error, "below_propagation": below,
            "ok": abs(error) <= RTT_TOLERANCE and below == 0}


def format_table(data: dict) -> str:
    lines = [f"{'pair':<10} {'class':<11} {'RTT conf [ms]':>13} {'min':>9} {'median':>9} {'p99':>9} "
             f"{'Mb/s conf':>9} {'measured':>9} {'CPU ms/MB':>9}  verdict"]
    for p in data["pairs"]:
        r, t = p["rtt_ms"], p["throughput_mbps"]
        conf = "-" if t["configured"] is None else f"{t['configured']:.0f}"
        cpu = p.get("host_cpu_ms_per_MB")
        cpu = "-" if cpu is None else f"{cpu:.2f}"
        verdict = "ok" if r["ok"] and t["ok"] else ("RTT off" if not r["ok"] else "throughput off")
        lines.append(f"{p['src'] + '-' + p['dst']:<10} {p['class']:<11} {r['configured']:>13.4f} {r['min']:>9.4f} "
                     f"{r['median']:>9.4f} {r['p99']:>9.4f} {conf:>9} {t['measured']:>9.0f} {cpu:>9}  {verdict}")
    for p in data["pairs"]:
        k = p.get("link")
        if k:
            lines.append(f"  {p['src']}-{p['dst']}: link contribution {k['contribution_ms']:.4f} ms = median "
                         f"{p['rtt_ms']['median']:.4f} - floor {k['floor_rtt_ms']:.4f}; fibre {k['propagation_rtt_ms']:.4f}"
                         f" ms ({k['error'] * 100:+.1f} %); samples below the fibre: {k['below_propagation']}")
    lines.append("verify: " + ("all pairs within tolerance" if data["ok"] else
                               "FAILED (link contribution 5 %, no round trip below the fibre, throughput 10 %)"))
    return "\n".join(lines)
