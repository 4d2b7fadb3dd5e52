"""Record kinds of the testbed: its verification and the link emulator's accuracy."""

from __future__ import annotations

from geofed.records import Sanity, kind


@kind("testbed.verify")
class TestbedVerify:
    """`geofed testbed verify`, `geofed demo`: configured against measured RTT and throughput per node pair.

    Attributes:
        pairs: per pair: src, dst, class, rtt_ms {configured, min, median, p99, ok}, throughput_mbps
            {configured, measured, streams, ok}, link (probe floor) and host_cpu_ms_per_MB
        host_cores: the testbed host's cores
        ok: every pair within tolerance of its configuration
    """
    pairs: list
    host_cores: int
    ok: bool

    def sanity(self) -> Sanity:
        """every pair's RTT and throughput within tolerance of the federation file."""
        bad = [f"{p['src']}->{p['dst']}" for p in self.pairs if not (p["rtt_ms"]["ok"] and p["throughput_mbps"]["ok"])]
        return Sanity(self.ok and not bad, f"pairs off their configuration: {', '.join(bad)}" if bad
                      else f"{len(self.pairs)} pairs as configured")


@kind("bench.link")
class BenchLink:
    """`geofed bench link`: the link emulator's delivered RTT and rate against configured ones.

    Attributes:
        rtt: per configured RTT: configured_ms, median_ms, p99_ms, median_error, p99_error
        throughput: per rate and stream count: configured_gbps, rtt_ms, streams, measured_gbps, ratio
        distributions: each way of a link with jitter and loss: ways, lost, round_trips, ...
        asymmetric: each way of an asymmetric link, as `distributions`
    """
    rtt: list
    throughput: list
    distributions: dict | None = None
    asymmetric: dict | None = None
