"""geofed's MPI micro-benchmarks side by side with OSU's C programs on the same ranks (bench.compare)."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class OsuRuns(Params):
    """How each side runs; `bench compare` names its benchmarks as words."""
    osu: str | None = param(None, "OSU Micro-Benchmarks install prefix (built by you, see docs/bench.md)", type=str)
    sizes: str = param("1:4M", "message sizes, as for bench mpi")
    repeat: int = param(3, "alternate runs of each; medians are compared")


class CompareParams(OsuRuns):
    benchmarks: str = param("latency,bw", "benchmarks or groups, comma-separated")


class Compare(Workload, kind="bench.compare", Params=CompareParams, command="bench compare"):
    """geofed's micro-benchmarks side by side with OSU's (C) on the same ranks"""

    def check(self, ctx: Context, params: CompareParams) -> None:
        from geofed.bench import compare
        super().check(ctx, params)
        compare.check(ctx.placement, params.benchmarks.split(","), params.sizes, params.osu, ctx.ranks_per_node)

    def run(self, ctx: Context, params: CompareParams):
        from geofed.bench import compare
        return self.record(ctx, params, compare.run(ctx.fed, ctx.placement, params.benchmarks.split(","), params.sizes,
                                                    params.osu, params.repeat, ctx.ranks_per_node, ctx.timeout,
                                                    ctx.progress))

    def table(self, rec) -> str:
        from geofed.bench import compare
        return compare.format_table(rec.to_dict()["data"])


WORKLOAD = Compare()
