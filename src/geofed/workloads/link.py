"""How faithfully the link emulator reproduces configured links: RTT, throughput and each
way of an asymmetric, lossy link, on two-site testbeds of its own (bench.link)."""

from __future__ import annotations

from geofed.params import Params, joined, param
from geofed.validate import choices, positive_float_list, positive_int_list
from geofed.workloads import Context, Workload

PARTS = ("rtt", "throughput", "ways")


class LinkParams(Params):
    rtt: str = param("0.145,1,9,50", "RTTs in ms", type=joined(positive_float_list))
    rate: str = param("1,5,10", "rates in Gb/s", type=joined(positive_float_list))
    streams: str = param("1,4", "TCP stream counts", type=joined(positive_int_list))
    throughput_rtt: float = param(9.0, "RTT of the throughput runs in ms")
    seconds: float = param(5.0, "throughput measurement time")
    parts: str = param(",".join(PARTS), "what to measure, comma-separated: rtt, throughput, ways (each direction "
                                        "of an asymmetric link and the jitter and loss delivered)",
                       type=joined(choices(PARTS)))


class Link(Workload, kind="bench.link", Params=LinkParams, needs_placement=False):
    """link emulator accuracy: RTT and throughput against configured (root)"""

    def run(self, ctx: Context, params: LinkParams):
        # Its testbeds are its own two-site federations, not the one named: the record is of them.
        from geofed.bench import link
        parts = params.parts.split(",")
        return link.run([float(x) for x in params.rtt.split(",")] if "rtt" in parts else [],
                        [float(x) for x in params.rate.split(",")] if "throughput" in parts else [],
                        [int(x) for x in params.streams.split(",")], params.throughput_rtt, params.seconds,
                        ctx.progress, ways="ways" in parts)

    def table(self, rec) -> str:
        from geofed.bench import link
        return link.format_table(rec)


WORKLOAD = Link()
