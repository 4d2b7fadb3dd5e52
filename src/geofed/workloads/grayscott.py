"""Gray-Scott at one site streamed over ADIOS2 SST to analysis at another, every step checked (workflow.grayscott)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class GrayScottParams(Params):
    L: int = param(32, "cells per side")
    steps: int = param(60, "simulation steps")
    plotgap: int = param(10, "steps between outputs")
    sim_site: str = param("G", "site of the simulation")
    analysis_site: str = param("W", "site of the consumers")


class GrayScott(Workload, kind="workflow.grayscott", Params=GrayScottParams, command="workflow grayscott",
                needs_placement=False):
    """Gray-Scott at one site, staged with ADIOS2 SST to analysis at another"""

    def check(self, ctx: Context, params: GrayScottParams) -> None:
        from geofed.apps.grayscott import workflow
        workflow.check_sites(ctx.fed, sim_site=params.sim_site, analysis_site=params.analysis_site)

    def run(self, ctx: Context, params: GrayScottParams):
        from geofed.apps.grayscott import settings, workflow
        s = settings.from_dict({"L": params.L, "steps": params.steps, "plotgap": params.plotgap}, "parameters")
        with tempfile.TemporaryDirectory(prefix="geofed-grayscott-") as tmp:
            return workflow.run(ctx.fed, s, ctx.out or Path(tmp), sim_site=params.sim_site,
                                analysis_site=params.analysis_site, timeout=ctx.timeout, hostfile=ctx.hostfile,
                                progress=ctx.progress)

    def table(self, rec) -> str:
        from geofed.apps.grayscott import workflow
        return workflow.format_table(rec)


WORKLOAD = GrayScott()
