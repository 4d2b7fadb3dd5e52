"""The MPI micro-benchmark suite with OSU's definitions on a placement (bench.mpi)."""

from __future__ import annotations

from dataclasses import dataclass

from geofed import validate
from geofed.params import param
from geofed.records import Sanity
from geofed.workloads import Context, Workload


@dataclass(frozen=True)
class MpiParams:
    benchmarks: str = param("latency,bw", "benchmarks or groups, comma-separated (bench mpi's names)")
    sizes: str = param("1:1M", "message sizes: MIN:MAX (powers of 2) or a list")
    budget: float = param(0.2, "seconds per message size")


class Mpi(Workload):
    name = "mpi"
    help = "MPI micro-benchmarks with OSU definitions: latency, bw, bibw, collectives"
    kind = "bench.mpi"
    Params = MpiParams
    command = "bench mpi"

    def check(self, ctx: Context, params: MpiParams) -> None:
        from geofed.bench import suite
        super().check(ctx, params)
        validate.parse_sizes(params.sizes)
        suite.check_ranks(suite.resolve(params.benchmarks.split(",")), ctx.placement.node_count * ctx.ranks_per_node,
                          f"placement {ctx.placement.code} with {ctx.ranks_per_node} rank per node")

    def run(self, ctx: Context, params: MpiParams):
        from geofed.bench import jobs
        argv = ["geofed.bench.mpi", *params.benchmarks.split(","), "--sizes", params.sizes,
                "--budget", str(params.budget)]
        return jobs.run_program(ctx.fed, ctx.placement, argv, ranks_per_node=ctx.ranks_per_node,
                                hostfile=ctx.hostfile, timeout=ctx.timeout,
                                what=f"bench mpi {params.benchmarks} on {ctx.placement.code}")

    def sanity(self, rec) -> Sanity:
        if rec.data.exit_status != 0:
            return Sanity(False, f"the ranks ended with status {rec.data.exit_status}")
        return rec.sanity() or Sanity(True, "every message checked")


WORKLOAD = Mpi()
