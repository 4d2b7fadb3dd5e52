"""Seed 000's Tables 1 and 2: MDFS on the Madelon-like data over placements and splits (mdfs.sweep)."""

from __future__ import annotations

from geofed.apps.mdfs import core
from geofed.params import Params, param
from geofed.validate import nonnegative_int
from geofed.workloads import Context, Workload


class MdfsSweepParams(Params):
    placements: str = param("G1W0,G0W1,G2W0,G1W1,G0W2,G2W2,G0W4", "placement codes, comma-separated")
    splits: str = param("speed,even", "splits of the work to compare")
    repeat: int = param(1, "runs per placement and split; medians")
    discretizations: int = param(30, "randomised discretizations of the 2D analysis")
    analysis: core.Params | None = param(None, "every parameter of the analysis (default: 2D, `discretizations`)")
    data_seed: int = param(0, "seed of the Madelon-like data", type=nonnegative_int)
    private: bool = param(False, "on a private copy of the federation, brought up and taken down here (root); "
                                 "else on its testbed, which is up")


class MdfsSweep(Workload, kind="mdfs.sweep", Params=MdfsSweepParams, command="mdfs sweep", needs_placement=False):
    """MDFS 2D across placements and work splits (seed 000's Tables 1 and 2)"""

    def analysis(self, params: MdfsSweepParams) -> core.Params:
        return params.analysis or core.Params(discretizations=params.discretizations)

    def check(self, ctx: Context, params: MdfsSweepParams) -> None:
        from geofed.apps.mdfs import sweep
        sweep.check(ctx.fed, params.placements, params.splits, self.analysis(params), params.private)

    def run(self, ctx: Context, params: MdfsSweepParams):
        from geofed.apps.mdfs import sweep
        return sweep.measure(ctx.fed, params.placements, params.splits, params.repeat, self.analysis(params),
                             params.data_seed, params.private, ctx.progress)

    def table(self, rec) -> str:
        from geofed.apps.mdfs import sweep
        return sweep.format_table(rec)


WORKLOAD = MdfsSweep()
