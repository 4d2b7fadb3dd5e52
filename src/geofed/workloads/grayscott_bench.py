"""What staging across a long link costs the Gray-Scott simulation: each size with staging off and on (bench.grayscott)."""

from __future__ import annotations

from geofed import validate
from geofed.params import Params, param
from geofed.workloads import Context, Workload


class GrayScottBenchParams(Params):
    sizes: str = param("64:200,128:100", "L:STEPS pairs to measure")
    settings: str = param("", "settings JSON (its L and steps are replaced by sizes; empty: the tutorial defaults)")
    plotgap: int | None = param(None, "steps between outputs (default: the settings')")
    sim_site: str = param("G", "site of the simulation")
    analysis_site: str = param("W", "site of the consumers")
    sim_ranks: int = param(4, "MPI ranks of the simulation")
    repeat: int = param(1, "rounds per L (staging off, on and the plain-TCP ceiling in turn); medians",
                        type=validate.positive_int)
    ceiling: bool = param(True, "after each staging run, the same bytes over plain TCP between the same nodes")


class GrayScottBench(Workload, kind="bench.grayscott", Params=GrayScottBenchParams, command="bench grayscott",
                     needs_placement=False):
    """Gray-Scott time per step with SST staging across a link against without"""

    def check(self, ctx: Context, params: GrayScottBenchParams) -> None:
        from geofed.apps.grayscott import bench, settings, workflow
        settings.with_overrides(params.settings or None, plotgap=params.plotgap)
        bench.parse_sizes(params.sizes)
        workflow.check_sites(ctx.fed, sim_site=params.sim_site, analysis_site=params.analysis_site)

    def run(self, ctx: Context, params: GrayScottBenchParams):
        from geofed.apps.grayscott import bench, settings
        from geofed.testbed.core import require_up
        s = settings.with_overrides(params.settings or None, plotgap=params.plotgap)
        for w in s.warnings():
            ctx.progress(f"warning: {w}")
        require_up(ctx.fed)
        return bench.run(ctx.fed, s, bench.parse_sizes(params.sizes), ctx.out, sim_site=params.sim_site,
                         analysis_site=params.analysis_site, sim_ranks=params.sim_ranks, repeat=params.repeat,
                         with_ceiling=params.ceiling, timeout=ctx.timeout,
                         progress=ctx.progress)

    def table(self, rec) -> str:
        from geofed.apps.grayscott import bench
        return bench.format_table(rec)


WORKLOAD = GrayScottBench()
