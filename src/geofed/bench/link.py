"""`geofed bench link`: how faithfully the link emulator reproduces a configured link.

For each configured RTT a two-site testbed is brought up and measured (median and p99
of UDP round trips); for each configured rate, TCP throughput with 1 and 4 streams.
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
            return measure(a, b)
        finally:
            core.down(fed.name)


def run(rtts_ms: list[float], rates_gbps: list[float], streams: list[int], throughput_rtt_ms: float = 9.0,
        seconds: float = 5.0, progress: Callable[[str], None] = lambda m: None) -> dict:
    core.require_root("bench link")
    rtt_rows = []
    for rtt in rtts_ms:
        # Enough samples for a p99, at most ~6 s of round trips per point (one per ms).
        count = int(min(1000, max(200, 6000 / (rtt + 1))))
        progress(f"RTT {rtt:g} ms: {count} round trips")
        samples, lost = _with_testbed(rtt, max(rates_gbps or [1.0]),
                                      lambda a, b: probe.rtt_samples_ms(a, b, count=count), progress)
        med, p99 = statistics.median(samples), percentile(samples, 99)
        rtt_rows.append({
            "configured_ms": rtt, "samples": len(samples), "lost": lost,
            "min_ms": min(samples), "median_ms": med, "p99_ms": p99,
            "median_error": med / rtt - 1, "p99_error": p99 / rtt - 1,
        })
    tput_rows = []
    for gbps in rates_gbps:
        def measure(a, b):
            return [probe.throughput_mbps(a, b, streams=n, seconds=seconds, warmup=2.0) for n in streams]
        progress(f"{gbps:g} Gb/s at {throughput_rtt_ms:g} ms RTT: {', '.join(map(str, streams))} streams")
        for n, mbps in zip(streams, _with_testbed(throughput_rtt_ms, gbps, measure, progress)):
            tput_rows.append({"configured_gbps": gbps, "rtt_ms": throughput_rtt_ms, "streams": n,
                              "measured_gbps": mbps / 1000, "ratio": mbps / 1000 / gbps})
    return records.make("bench.link", {"rtt": rtt_rows, "throughput": tput_rows})


def format_table(rec: dict) -> str:
    d = rec["data"]
    lines = ["# configured RTT [ms]   median [ms]   p99 [ms]   median err   p99 err"]
    for x in d["rtt"]:
        lines.append(f"{x['configured_ms']:>20g} {x['median_ms']:>13.4f} {x['p99_ms']:>10.4f}"
                     f" {x['median_error']:>+11.1%} {x['p99_error']:>+9.1%}")
    lines.append("# configured [Gb/s]   RTT [ms]   streams   measured [Gb/s]   ratio")
    for x in d["throughput"]:
        lines.append(f"{x['configured_gbps']:>19g} {x['rtt_ms']:>10g} {x['streams']:>9} "
                     f"{x['measured_gbps']:>17.3f} {x['ratio']:>7.1%}")
    return "\n".join(lines)

