"""Seed 003's Table III: the obstacle problem by P2PSAP sync and async peers and MPI Jacobi (bench.obstacle)."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class ObstacleParams(Params):
    placements: str = param("W2,G1W1", "one site and across the link, comma-separated")
    n: int = param(32, "interior points per axis")
    tol: float = param(1e-8, "certified residual")
    repeat: int = param(1, "runs per cell; medians")


class ObstacleTable(Workload, name="obstacle-table", kind="bench.obstacle", Params=ObstacleParams,
                    command="bench obstacle", needs_placement=False):
    """the obstacle problem by P2PSAP sync and async peers and MPI Jacobi, in one site and across the link"""

    def run(self, ctx: Context, params: ObstacleParams):
        from geofed.apps.obstacle import bench
        data = {"n": params.n, "tol": params.tol, "repeat": params.repeat, "link_rtt_ms": ctx.fed.links[0].rtt_ms,
                "solver": bench.solver_rows(ctx.fed, params.placements.split(","), params.n, params.tol,
                                            params.repeat, ctx.progress)}
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        from geofed.apps.obstacle import bench
        return bench.format_table(rec.to_dict()["data"])


WORKLOAD = ObstacleTable()
