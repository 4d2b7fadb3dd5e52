"""Measure RTT and TCP throughput between two testbed nodes with `geofed-probe`."""

from __future__ import annotations

import json
from dataclasses import dataclass

from geofed.native import binary
from geofed.testbed import host
from geofed.testbed.plan import NodePlan

PROBE_PORT = 47000
SINK_PORT = 47001
ARP_WARMUP = 3


@dataclass
class RoundTrips:
    """UDP round trips from src to an echo at dst, in ms; each split at the echo's
    receive time into its forward and back halves (one host, one clock). `lost`: no
    echo ever came back; `late`: the echo came after the timeout (the host stalled), so
    the round trip is neither a sample nor lost."""
    rtt: list[float]
    forward: list[float]
    back: list[float]
    lost: int
    late: int


def round_trips(src: NodePlan, dst: NodePlan, count: int = 200, interval_us: int = 1000,
                size: int = 64, timeout_ms: int = 2000) -> RoundTrips:
    """`timeout_ms`: how long a datagram may take before it counts as lost (on a lossy
    link, a few RTTs keep a run from waiting seconds per loss)."""
    probe = binary("geofed-probe")
    server = host.spawn_ready(host.in_netns(dst.netns, [
        probe, "udp-echo", "--bind", f"{dst.address}:{PROBE_PORT}", "--max-seconds", "600"]))
    try:
        res = host.run_in(src.netns, [
            probe, "rtt", "--to", f"{dst.address}:{PROBE_PORT}", "--count", str(count + ARP_WARMUP),
            "--interval-us", str(interval_us), "--size", str(size), "--timeout-ms", str(timeout_ms)], timeout=600)
    finally:
        host.terminate([server.pid])
        server.wait()
    out = json.loads(res.stdout)
    # The first datagrams wait for ARP on every hop: they measure address resolution.
    rtt = [s / 1e6 for s in out["samples_ns"][ARP_WARMUP:]]
    forward = [s / 1e6 for s in out["forward_ns"][ARP_WARMUP:]]
    late = int(out["late"])
    return RoundTrips(rtt, forward, [r - f for r, f in zip(rtt, forward)], int(out["lost"]) - late, late)


def rtt_samples_ms(src: NodePlan, dst: NodePlan, count: int = 200, interval_us: int = 1000,
                   size: int = 64) -> tuple[list[float], int]:
    """Round trips of UDP datagrams from src to an echo server at dst: (samples in ms,
    lost on the way)."""
    r = round_trips(src, dst, count, interval_us, size)
    return r.rtt, r.lost


def throughput_mbps(src: NodePlan, dst: NodePlan, streams: int = 4, seconds: float = 3.0,
                    warmup: float = 1.0, nbytes: int = 0) -> float:
    """TCP goodput from src to dst over `streams` parallel connections, in Mbit/s: the
    steady state over `seconds` after `warmup`, or with `nbytes` a transfer of that many
    bytes per stream, from the first write to the last byte acknowledged."""
    probe = binary("geofed-probe")
    mode = ["--bytes", str(nbytes)] if nbytes else ["--seconds", str(seconds), "--warmup", str(warmup)]
    sink = host.spawn_ready(host.in_netns(dst.netns, [
        probe, "tcp-sink", "--bind", f"{dst.address}:{SINK_PORT}", "--max-seconds", "600"]))
    try:
        res = host.run_in(src.netns, [
            probe, "tcp-send", "--to", f"{dst.address}:{SINK_PORT}", "--streams", str(streams), *mode],
            timeout=seconds + warmup + 600)
    finally:
        host.terminate([sink.pid])
        sink.wait()
    return float(json.loads(res.stdout)["mbps"])
