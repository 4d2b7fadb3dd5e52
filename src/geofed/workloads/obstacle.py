"""The obstacle problem of seed 003: one solve by P2PSAP peers or MPI Jacobi on a placement
(obstacle.run), and Table III with the reliable stack against TCP (bench.obstacle); their
ranks are apps.obstacle.dist's and apps.obstacle.stream's."""

from __future__ import annotations

from geofed.apps.obstacle.job import Spec
from geofed.params import Params, param
from geofed.validate import probability
from geofed.workloads import Context, RankWorkload, Workload


class ObstacleParams(Params):
    placements: str = param("W2,G1W1", "one site and across the link, comma-separated")
    n: int = param(32, "interior points per axis")
    tol: float = param(1e-8, "certified residual")
    repeat: int = param(1, "runs per cell; medians")
    part: str = param("solver", "the solver's table, the stream's throughput against TCP, or both",
                      choices=("all", "solver", "throughput"))
    mbytes: float = param(200.0, "bytes per throughput run, in MB")
    loss: float = param(0.01, "link loss of the delivery run", type=probability)
    private: bool = param(False, "on a private copy of the federation, brought up and taken down here (root); "
                                 "else on its testbed, which is up")


class ObstacleTable(Workload, name="obstacle-table", kind="bench.obstacle", Params=ObstacleParams,
                    command="bench obstacle", needs_placement=False, runs_mpi=True):
    """the obstacle problem by P2PSAP sync and async peers and MPI Jacobi, in one site and across the link"""

    def check(self, ctx: Context, params: ObstacleParams) -> None:
        from geofed.apps.obstacle import bench
        bench.check(ctx.fed, params.placements, params.private or params.part != "solver")

    def run(self, ctx: Context, params: ObstacleParams):
        from geofed.apps.obstacle import bench
        return self.record(ctx, params, bench.measure(ctx.fed, params.placements, params.n, params.tol, params.repeat,
                                                      params.part, params.mbytes, params.loss, params.private,
                                                      ctx.progress))

    def table(self, rec) -> str:
        from geofed.apps.obstacle import bench
        return bench.format_table(rec.to_dict()["data"])


class Obstacle(RankWorkload, name="obstacle", kind="obstacle.run", Params=Spec, command="obstacle"):
    """3-D obstacle problem by projected Richardson over P2PSAP on a placement (seed 003)"""

    def check(self, ctx: Context, params: Spec) -> None:
        from geofed.apps.obstacle import job
        super().check(ctx, params)
        job.check(params, ctx.placement.node_count)

    def run(self, ctx: Context, params: Spec):
        from geofed.apps.obstacle import job, output
        res = job.run_on_placement(ctx.fed, ctx.placement, params, timeout=ctx.timeout, hostfile=ctx.hostfile)
        files = output.write(res, ctx.out)
        return self.record(ctx, params, {k: v for k, v in res.items() if k != "u"} | {"files": files})

    def rank(self, comm, params: Spec) -> dict | None:
        from geofed.apps.obstacle import dist
        return dist.solve(comm, params)

    def table(self, rec) -> str:
        from geofed.apps.obstacle import output
        return output.table(rec.data)


class StreamParams(Params):
    mbytes: float = param(200.0, "bytes to send, in MB")
    message: int = param(1 << 20, "bytes per message")
    location: str = param("inter", "P2PSAP location context", choices=("intra", "inter"))
    network: str = param("eth", "P2PSAP network context", choices=("eth", "fabric"))


class Stream(RankWorkload, name="p2psap-stream", Params=StreamParams, part_of="obstacle-table"):
    """bulk transfer over one P2PSAP synchronous session between two ranks"""

    def rank(self, comm, params: StreamParams) -> dict | None:
        from geofed.apps.obstacle import stream
        return stream.transfer(comm, params.mbytes, params.message, params.location, params.network)


WORKLOADS = (ObstacleTable(), Obstacle(), Stream())
