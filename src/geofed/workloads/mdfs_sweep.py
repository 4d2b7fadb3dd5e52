"""Seed 000's Tables 1 and 2: MDFS on the Madelon-like data over placements and splits (mdfs.sweep)."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class MdfsSweepParams(Params):
    placements: str = param("G1W0,G0W1,G2W0,G1W1,G0W2,G2W2,G0W4", "placement codes, comma-separated")
    splits: str = param("speed,even", "splits of the work to compare")
    repeat: int = param(1, "runs per placement and split; medians")
    discretizations: int = param(30, "randomised discretizations")


class MdfsSweep(Workload, kind="mdfs.sweep", Params=MdfsSweepParams, command="mdfs sweep", needs_placement=False):
    """MDFS 2D across placements and work splits (seed 000's Tables 1 and 2)"""

    def run(self, ctx: Context, params: MdfsSweepParams):
        from geofed.apps.mdfs import data, sweep
        from geofed.apps.mdfs.core import Params
        return sweep.sweep(ctx.fed, params.placements.split(","), params.splits.split(","), params.repeat,
                           Params(discretizations=params.discretizations), data.madelon_like(), ctx.progress)

    def table(self, rec) -> str:
        from geofed.apps.mdfs import sweep
        return sweep.format_table(rec)


WORKLOAD = MdfsSweep()
