"""NPB BT-I/O's pattern over MPI-IO on a placement, into a file system of the testbed (bench.btio, seed 002)."""

from __future__ import annotations

from dataclasses import dataclass

from geofed.params import Params, param
from geofed.workloads import Context, RankWorkload


class BtioParams(Params):
    cls: str = param("S", "NPB class: S (12^3), W (24^3), A (64^3), B, C")
    subtypes: str = param("simple,full", "simple, full or both")
    filesystem: str = param("W:data", "SITE:NAME of the file system the shared file is written in")


@dataclass(frozen=True)
class BtioRun:
    """One job of the ranks: one subtype into one file."""
    n: int
    steps: int
    subtype: str
    file: str


class Btio(RankWorkload, kind="bench.btio", Params=BtioParams, RankParams=BtioRun, command="bench btio"):
    """NPB BT-I/O's pattern over MPI-IO on a placement: simple and full subtypes"""

    def check(self, ctx: Context, params: BtioParams) -> None:
        from geofed.testbed import storage
        super().check(ctx, params)
        storage.resolve(ctx.fed, ctx.placement.nodes(ctx.fed)[0].name, params.filesystem)

    def run(self, ctx: Context, params: BtioParams):
        """A run per subtype (bench.btio.run), into the file system as the placement's first node reaches it."""
        from geofed.bench import btio
        from geofed.testbed import core, storage
        storage.up(core.require_up(ctx.fed), ctx.progress)
        mount, _ = storage.resolve(ctx.fed, ctx.placement.nodes(ctx.fed)[0].name, params.filesystem)
        data = btio.run(ctx.fed, ctx.placement, params.cls, params.subtypes.split(","), mount,
                        ranks_per_node=ctx.ranks_per_node, hostfile=ctx.hostfile, timeout=ctx.timeout)
        return self.record(ctx, params, data)

    def rank(self, comm, run: BtioRun) -> dict | None:
        from geofed.bench import btio
        return btio.measure(comm, run.n, run.steps, run.subtype, run.file)

    def table(self, rec) -> str:
        from geofed.bench import btio
        return btio.format_table(rec.to_dict()["data"])


WORKLOAD = Btio()
