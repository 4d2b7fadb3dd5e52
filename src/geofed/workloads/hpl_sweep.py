"""Seed 002's HPL tables over placements and N on a private copy of the federation
(bench.hpl.sweep), and its part: the DGEMM run that measures each site's peak."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import Context, RankWorkload, Workload


class HplSweepParams(Params):
    placements: str = param("W1,W2,G1W1", "placements, the first of one node (the speed-up's base); one rank per "
                                          "host core here (W4,G2W2 oversubscribe a 2-core host)")
    n: str = param("2000,3000", "matrix orders N, comma-separated")
    nb: int = param(80, "block size NB")
    repeat: int = param(1, "runs per placement; medians")
    peer: bool = param(False, "also run each placement's rank count on this host without the testbed (plain mpiexec)")


class HplSweep(Workload, kind="bench.hpl.sweep", Params=HplSweepParams, needs_placement=False):
    """seed 002's HPL tables T, S, SP, SPF over placements and N on a private copy of the federation (root)"""

    def codes(self, params: HplSweepParams) -> list[str]:
        return [c.strip() for c in params.placements.split(",") if c.strip()]

    def ns(self, params: HplSweepParams) -> list[int]:
        from geofed.apps.hpl.params import parse_ns
        return parse_ns(params.n)

    def check(self, ctx: Context, params: HplSweepParams) -> None:
        from geofed.apps.hpl import sweep
        sweep.check(ctx.fed, self.codes(params), self.ns(params), params.nb)

    def run(self, ctx: Context, params: HplSweepParams):
        from geofed.apps.hpl import sweep
        return self.record(ctx, params, sweep.on_copy(ctx.fed, self.codes(params), self.ns(params), params.nb,
                                                      params.repeat, params.peer, ctx.timeout, ctx.progress))

    def table(self, rec) -> str:
        from geofed.apps.hpl import sweep
        return sweep.format_table(rec.to_dict()["data"])


class DgemmParams(Params):
    n: int = param(1000, "matrix order")
    seconds: float = param(2.0, "seconds of products at least")


class Dgemm(RankWorkload, name="dgemm", Params=DgemmParams, part_of="hpl-sweep"):
    """a node's DGEMM rate, the peak HPL's SPF is a fraction of (one rank per node)"""

    def rank(self, comm, params: DgemmParams) -> dict | None:
        from geofed.apps.hpl import dgemm
        return dgemm.measure(comm, params.n, params.seconds)


WORKLOADS = (HplSweep(), Dgemm())
