"""The testbed against its federation file: every pair's RTT and throughput (testbed verify)."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class VerifyParams(Params):
    count: int = param(200, "RTT samples per pair")
    streams: int = param(4, "TCP streams for throughput")
    seconds: float = param(3.0, "throughput measurement time")


class Verify(Workload, kind="testbed.verify", Params=VerifyParams, command="testbed verify", needs_placement=False):
    """measure RTT and throughput of every node pair against the federation file"""

    def run(self, ctx: Context, params: VerifyParams):
        from geofed.testbed import verify
        data = verify.verify(ctx.fed, rtt_count=params.count, streams=params.streams, seconds=params.seconds,
                             progress=ctx.progress)
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        from geofed.testbed import verify
        return verify.format_table(rec.to_dict()["data"])


WORKLOAD = Verify()
