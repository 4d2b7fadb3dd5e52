"""The testbed against its federation file: every pair's RTT and throughput (testbed verify)."""

from __future__ import annotations

from dataclasses import dataclass

from geofed.params import param
from geofed.workloads import Context, Workload


@dataclass(frozen=True)
class VerifyParams:
    count: int = param(200, "RTT samples per pair")
    streams: int = param(4, "TCP streams for throughput")
    seconds: float = param(3.0, "throughput measurement time")


class Verify(Workload):
    name = "verify"
    help = "measure RTT and throughput of every node pair against the federation file"
    kind = "testbed.verify"
    Params = VerifyParams
    command = "testbed verify"
    needs_placement = False

    def run(self, ctx: Context, params: VerifyParams):
        from geofed.testbed import verify
        data = verify.verify(ctx.fed, rtt_count=params.count, streams=params.streams, seconds=params.seconds,
                             progress=ctx.progress)
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        from geofed.testbed import verify
        return verify.format_table(rec.to_dict()["data"])


WORKLOAD = Verify()
