"""The High-Performance Linpack on a placement: time, GFLOPS and HPL's residual check (bench.hpl)."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class HplRunParams(Params):
    n: str = param("2000", "matrix orders N, comma-separated")
    nb: int = param(80, "block size NB")


class Hpl(Workload, kind="bench.hpl", Params=HplRunParams, command="bench hpl"):
    """High-Performance Linpack (HPL 2.0) on a placement: time, GFLOPS, residual check"""

    def hpl_params(self, ctx: Context, params: HplRunParams):
        from geofed.apps.hpl.params import parse_ns
        from geofed.records.hpl import HplParams
        return HplParams(tuple(parse_ns(params.n)), params.nb, ranks_per_node=ctx.ranks_per_node).on(
            ctx.placement.node_count, f"placement {ctx.placement.code}")

    def check(self, ctx: Context, params: HplRunParams) -> None:
        super().check(ctx, params)
        self.hpl_params(ctx, params)

    def run(self, ctx: Context, params: HplRunParams):
        from geofed.apps.hpl import run
        data = run.run(ctx.fed, ctx.placement, self.hpl_params(ctx, params), hostfile=ctx.hostfile,
                       timeout=ctx.timeout)
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        from geofed.apps.hpl import run
        return run.format_table(rec.to_dict()["data"])


WORKLOAD = Hpl()
