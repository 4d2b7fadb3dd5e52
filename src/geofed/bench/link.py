"""`geofed bench link`: how faithfully the link emulator reproduces a configured link.

For each configured RTT a two-site testbed is brought up and measured with the UDP
probe (round trips) and with MPI (1-byte ping-pong, one-way), each beside its floor
(the same path with the emulator holding nothing but a short fixed hold, measured by
`up` and bench.floor), so the link's own contribution (measured - floor) is held
against the fibre's propagation; for each configured rate, TCP throughput with 1 and
4 streams.
The testbeds are described by federation files like any other (written to a
temporary directory), so the emulator is driven exactly as `testbed up` drives it.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Callable

from geofed import federation, records
from geofed.stats import percentile
from geofed.bench import floor
from geofed.testbed import core, probe

BENCH_NAME = "bench-link"


def two_site_toml(rtt_ms: float, gbps: float, name: str = BENCH_NAME, a_nodes: int = 1,
                  local_latency_us: float = 0.0) -> str:
    """Sites A and B joined by one link. The benchmark's own default has no local
    latency or local shaping: what is measured is the link alone."""
    return f"""
name = "{name}"
description = "two sites joined by one emulated link"
[local]
latency_us = {local_latency_us}
[[site]]
code = "A"
nodes = {a_nodes}
[[site]]
code = "B"
nodes = 1
[[link]]
sites = ["A", "B"]
rtt_ms = {rtt_ms}
bandwidth_gbps = {gbps}
"""


def _with_testbed(rtt_ms: float, gbps: float, measure: Callable, progress) -> object:
    with tempfile.TemporaryDirectory(prefix="geofed-") as tmp:
        path = Path(tmp) / f"{BENCH_NAME}.toml"
        path.write_text(two_site_toml(rtt_ms, gbps))
        fed = federation.load(path)
        plan = core.up(fed, progress)
        try:
            a, b = plan.nodes
            return measure(fed, a, b)
        finally:
            core.down(fed.name)


def rtt_row(fed, a, b, count: int) -> dict:
    """Probe and MPI on one link: measured, floor, the link's contribution, against the fibre."""
    link = fed.links[0]
    samples, lost = probe.rtt_samples_ms(a, b, count=count)
    med, p99 = statistics.median(samples), percentile(samples, 99)
    return {
        "configured_ms": link.rtt_ms, "propagation_us": link.propagation_ms * 1e3, "samples": len(samples),
        "lost": lost, "min_ms": min(samples), "median_ms": med, "p99_ms": p99,
        "median_error": med / link.rtt_ms - 1, "p99_error": p99 / link.rtt_ms - 1,
        **floor.measure_link(fed, a, b, count),
    }


def run(rtts_ms: list[float], rates_gbps: list[float], streams: list[int], throughput_rtt_ms: float = 9.0,
        seconds: float = 5.0, progress: Callable[[str], None] = lambda m: None) -> dict:
    core.require_root("bench link")
    rtt_rows = []
    for rtt in rtts_ms:
        # Enough samples for a p99, at most ~6 s of round trips per point (one per ms).
        count = int(min(1000, max(200, 6000 / (rtt + 1))))
        progress(f"RTT {rtt:g} ms: {count} round trips")
        rtt_rows.append(_with_testbed(rtt, max(rates_gbps or [1.0]),
                                      lambda fed, a, b: rtt_row(fed, a, b, count), progress))
    tput_rows = []
    for gbps in rates_gbps:
        def measure(a, b):
            return [probe.throughput_mbps(a, b, streams=n, seconds=seconds, warmup=2.0) for n in streams]
        progress(f"{gbps:g} Gb/s at {throughput_rtt_ms:g} ms RTT: {', '.join(map(str, streams))} streams")
        for n, mbps in zip(streams, _with_testbed(throughput_rtt_ms, gbps, lambda fed, a, b: measure(a, b), progress)):
            tput_rows.append({"configured_gbps": gbps, "rtt_ms": throughput_rtt_ms, "streams": n,
                              "measured_gbps": mbps / 1000, "ratio": mbps / 1000 / gbps})
    return records.make("bench.link", {"rtt": rtt_rows, "throughput": tput_rows})


def format_table(rec: dict) -> str:
    d = rec["data"]
    lines = ["# one-way [us]: fibre = propagation; link = median - floor; err = link / fibre - 1",
             "# RTT [ms]    fibre | probe: min  median  floor   link    err | MPI: min  median  floor   link    err"]
    for x in d["rtt"]:
        p, m = x["probe"], x["mpi"]
        lines.append(f"{x['configured_ms']:>10g} {x['propagation_us']:>8.1f} |"
                     f" {p['min_one_way_us']:>10.1f} {p['median_one_way_us']:>7.1f} {p['floor_one_way_us']:>6.1f}"
                     f" {p['contribution_us']:>6.1f} {p['contribution_us'] / x['propagation_us'] - 1:>+6.1%} |"
                     f" {m['min_one_way_us']:>8.1f} {m['median_one_way_us']:>7.1f} {m['floor_one_way_us']:>6.1f}"
                     f" {m['contribution_us']:>6.1f} {m['contribution_us'] / x['propagation_us'] - 1:>+6.1%}")
    lines.append("# configured [Gb/s]   RTT [ms]   streams   measured [Gb/s]   ratio")
    for x in d["throughput"]:
        lines.append(f"{x['configured_gbps']:>19g} {x['rtt_ms']:>10g} {x['streams']:>9} "
                     f"{x['measured_gbps']:>17.3f} {x['ratio']:>7.1%}")
    return "\n".join(lines)

