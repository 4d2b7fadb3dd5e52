"""MDFS on a data set (seed 000): on this machine, or across a placement with the data staged
from the storage site (mdfs.run; its ranks are apps.mdfs.dist's), and its kernel beside the
reference library (bench.mdfs)."""

from __future__ import annotations

import os

from geofed import records
from geofed.apps.mdfs import core
from geofed.apps.mdfs.dist import SPLITS
from geofed.errors import UserError
from geofed.params import Params, param
from geofed.validate import nonnegative_int
from geofed.workloads import Context, RankWorkload, Workload

class MdfsParams(Params):
    data: str | None = param(None, "CSV file (objects in rows); default: the Madelon-like generator", type=str)
    decision: str | None = param(None, "decision column: name or 0-based index (default: the last column)", type=str)
    decision_file: str | None = param(None, "decisions in a separate file, one per line", type=str)
    header: str | None = param(None, "does the CSV have a header row (default: detect)", choices=("yes", "no"))
    data_seed: int = param(0, "seed of the Madelon-like data", type=nonnegative_int)
    analysis: core.Params = param(core.Params(), "MDFS's parameters")
    split: str = param("speed", "work per node: by declared speed, by a measured calibration, or even", choices=SPLITS)
    threads: int = param(0, "threads (0: all cores; per rank: its node's cores)", type=nonnegative_int)


class MdfsRankParams(Params):
    """What every rank is given: the data set's file (read at the storage site) and the analysis."""
    data: str = param("", "the data set's npz file")
    analysis: dict | None = param(None, "MDFS's parameters (apps.mdfs.core.Params)", type=dict)
    split: str = param("speed", "how the tuples are shared among the ranks", choices=SPLITS)
    threads: int = param(0, "threads per rank (0: its node's cores / ranks there)", type=nonnegative_int)
    progress: bool = param(False, "rank 0 shows how far its share is")


class Mdfs(RankWorkload, name="mdfs", kind="mdfs.run", Params=MdfsParams, RankParams=MdfsRankParams, command="mdfs run",
           needs_placement=False):
    """relevant variables by MDFS: locally, or across a placement of the testbed"""

    def check(self, ctx: Context, params: MdfsParams) -> None:
        params.analysis.check()
        if ctx.placement is None and ctx.hostfile:
            raise UserError("--hostfile: only with --placement (it names the hosts the placement's nodes run on)")
        if ctx.placement is None and params.split != "speed":
            raise UserError("--split: only with --placement (it splits the work among nodes)")

    def run(self, ctx: Context, params: MdfsParams):
        from geofed.apps.mdfs import data, dist, output
        from geofed.launch import runner
        from geofed.progress import Bar
        if params.data in (None, "madelon-like"):
            ds = data.madelon_like(seed=params.data_seed)
        else:
            header = {None: None, "yes": True, "no": False}[params.header]
            ds = data.load_csv(params.data, decision=params.decision, decision_file=params.decision_file, header=header)
        if ctx.placement:
            core.fit(params.analysis, *ds.x.shape)  # what the ranks would each refuse, refused once here
            with runner.work_directory("mdfs", ctx.hostfile) as tmp:
                result = dist.run_on_placement(ctx.fed, ctx.placement, data.save_npz(tmp / "data.npz", ds.x, ds.y),
                                               params.analysis, params.split, params.threads, ctx.timeout,
                                               progress=True, hostfile=ctx.hostfile)
            meta = self.meta(ctx)
        else:
            result = core.analyse(ds.x, ds.y, params.analysis, threads=params.threads or os.cpu_count() or 1,
                                  progress=Bar("mdfs: tuples"))
            meta = {}
        files = output.write(result, ds.names, ctx.out)
        placement = ctx.placement.code if ctx.placement else None
        return records.make(self.kind, output.record_data(result, ds.names, ds.source, placement, files), **meta)

    def rank(self, comm, params: MdfsRankParams) -> dict | None:
        from geofed.apps.mdfs import dist
        return dist.analyse(comm, params.data, core.Params(**params.analysis), params.split, params.threads,
                            params.progress)

    def table(self, rec) -> str:
        from geofed.apps.mdfs import output
        return output.summary(rec.data)


class KernelParams(Params):
    cases: str = param("2d30,3d1", "cases: 2d30 (2D, 30 discretizations), 3d1, 2d1, 1d1")
    variables: int = param(500, "variables of the Madelon-like data")
    repeat: int = param(3, "runs of each side; medians")
    threads: int = param(0, "threads for the threaded runs (0: all cores)", type=nonnegative_int)


class MdfsKernel(Workload, name="mdfs-kernel", kind="bench.mdfs", Params=KernelParams, command="bench mdfs",
                 needs_placement=False):
    """MDFS kernel side by side with the reference (PyPI mdfs), same data and parameters"""

    def check(self, ctx: Context, params: KernelParams) -> None:
        from geofed.apps.mdfs import bench
        bench.check(params.cases)

    def run(self, ctx: Context, params: KernelParams):
        from geofed.apps.mdfs import bench
        # this machine's, not a federation's: the record names none
        return records.make(self.kind, bench.measure(params.cases, params.variables, params.repeat, params.threads,
                                                     ctx.progress))

    def table(self, rec) -> str:
        from geofed.apps.mdfs import bench
        return bench.format_table(rec)


WORKLOADS = (Mdfs(), MdfsKernel())
