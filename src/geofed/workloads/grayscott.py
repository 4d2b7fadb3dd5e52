"""Gray-Scott at one site streamed over ADIOS2 SST to analysis at another, every step checked (workflow.grayscott)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from geofed.params import Params, param
from geofed.workloads import Context, Workload


class GrayScottParams(Params):
    settings: str = param("", "settings JSON in the ADIOS2 tutorial's shape (empty: the tutorial defaults)")
    L: int | None = param(None, "cells per side (default: the settings')")
    steps: int | None = param(None, "simulation steps (default: the settings')")
    plotgap: int | None = param(None, "steps between outputs (default: the settings')")
    noise: float | None = param(None, "noise (default: the settings')")
    sim_site: str = param("G", "site of the simulation")
    analysis_site: str = param("W", "site of the consumers")
    pdf_site: str | None = param(None, "site of the PDF analysis (default: analysis_site)")
    plot_site: str | None = param(None, "site of the two plotters (default: analysis_site)")
    sim_ranks: int = param(4, "MPI ranks of the simulation")
    pdf_ranks: int = param(1, "MPI ranks of the PDF analysis")
    connect_timeout: float = param(60.0, "seconds the simulation waits for its consumers to connect")
    slow_pdf: float = param(0.0, "extra seconds per step of the PDF analysis")
    checkpoint: bool = param(False, "the simulation also writes U and V at every output step to gs.bp")


class GrayScott(Workload, kind="workflow.grayscott", Params=GrayScottParams, command="workflow grayscott",
                needs_placement=False):
    """Gray-Scott at one site, staged with ADIOS2 SST to analysis at another"""

    def settings(self, params: GrayScottParams):
        from geofed.apps.grayscott import settings
        return settings.with_overrides(params.settings or None, L=params.L, steps=params.steps,
                                       plotgap=params.plotgap, noise=params.noise)

    def check(self, ctx: Context, params: GrayScottParams) -> None:
        from geofed.apps.grayscott import workflow
        self.settings(params)
        workflow.check_sites(ctx.fed, sim_site=params.sim_site, analysis_site=params.analysis_site,
                             pdf_site=params.pdf_site, plot_site=params.plot_site)

    def run(self, ctx: Context, params: GrayScottParams):
        from geofed.apps.grayscott import workflow
        from geofed.testbed.core import require_up
        s = self.settings(params)
        for w in s.warnings():
            ctx.progress(f"warning: {w}")
        if not os.environ.get("SLURM_JOB_ID"):  # inside an allocation the job's user runs it, not root
            require_up(ctx.fed)
        with tempfile.TemporaryDirectory(prefix="geofed-grayscott-") as tmp:
            return workflow.run(ctx.fed, s, ctx.out or Path(tmp), sim_site=params.sim_site,
                                analysis_site=params.analysis_site, pdf_site=params.pdf_site,
                                plot_site=params.plot_site, sim_ranks=params.sim_ranks, pdf_ranks=params.pdf_ranks,
                                connect_timeout=params.connect_timeout, timeout=ctx.timeout,
                                delays={"pdf": params.slow_pdf} if params.slow_pdf else {},
                                checkpoint=params.checkpoint, hostfile=ctx.hostfile, progress=ctx.progress)

    def table(self, rec) -> str:
        from geofed.apps.grayscott import workflow
        return workflow.format_table(rec)


WORKLOAD = GrayScott()
