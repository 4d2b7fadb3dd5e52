"""Seed 001's utilisation: one job stream on the testbed's real Slurm with the sites as
separate clusters, as clusters in Slurm's federation, then as one (ops.schedule,
bench.schedule)."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class ScheduleParams(Params):
    seed: int = param(1, "the job stream's random seed", type=int)
    window: float = param(60.0, "seconds over which jobs arrive")
    single_load: float = param(0.5, "share of the larger site's nodes its single-node jobs ask for")
    mpi_load: float = param(1.3, "share of the smaller site's nodes its MPI jobs ask for (above 1: overloaded)")


class Schedule(Workload, kind="bench.schedule", Params=ScheduleParams, needs_placement=False):
    """seed 001's utilisation: the sites as separate Slurm clusters, a Slurm federation, one cluster (root)"""

    def run(self, ctx: Context, params: ScheduleParams):
        from geofed.ops import schedule
        return self.record(ctx, params, schedule.run(ctx.fed, params.seed, params.window, params.single_load,
                                                     params.mpi_load))

    def table(self, rec) -> str:
        from geofed.ops import schedule
        return schedule.table(rec.to_dict()["data"])


WORKLOAD = Schedule()
