"""The MPI micro-benchmark suite with OSU's definitions on a placement (bench.mpi)."""

from __future__ import annotations

from geofed import validate
from geofed.bench import suite
from geofed.params import param
from geofed.workloads import Context, RankWorkload


class MpiParams(suite.Measure):
    benchmarks: str = param("latency,bw", f"benchmarks or groups, comma-separated: {', '.join([*suite.BENCHMARKS, *suite.GROUPS])}")


class Mpi(RankWorkload, kind="bench.mpi", Params=MpiParams, command="bench mpi"):
    """MPI micro-benchmarks with OSU definitions: latency, bw, bibw, collectives"""
    echo = True  # OSU's table, size by size, as it is measured

    def check(self, ctx: Context, params: MpiParams) -> None:
        super().check(ctx, params)
        validate.parse_sizes(params.sizes)
        suite.check_ranks(suite.resolve(params.benchmarks.split(",")), ctx.placement.node_count * ctx.ranks_per_node,
                          f"placement {ctx.placement.code} with {ctx.ranks_per_node} rank per node")

    def rank(self, comm, params: MpiParams) -> dict | None:
        from geofed.bench import mpi
        return mpi.measure(comm, params.benchmarks.split(","), params)


WORKLOAD = Mpi()
