"""The Gray-Scott workflow's parts: the rank programs `workflow grayscott` runs side by side.

    simulation  --SST gs-->   pdf analysis  --SST pdf-->  pdf plot
                --SST gs-->   cross-section plot

Each runs under the one entry point (`python -m geofed.workloads grayscott-pdf ...`,
under the SST preload, apps/grayscott/stream.preload_argv) and returns its per-step
rows; apps/grayscott/workflow.py launches them by name and lines the rows up. A part
that cannot open its stream ends with status 3, a corrupt step 4, frames that could not
be drawn 5 (a refused request 2, as for every rank program).
"""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import RankWorkload


class SimulationParams(Params):
    settings: str = param("", "settings JSON file (the ADIOS2 tutorial's shape)")
    stream: str = param("", "stream (SST) or file (BP5) name (default: the settings' output)")
    readers: int = param(1, "SST readers to wait for (consumer processes)")
    connect_timeout: float = param(60.0, "seconds to wait for the readers")
    checkpoint: str = param("", "also write U and V at every output step to this BP5 file (rank 0)")
    restart: str = param("", "start from the last step of this checkpoint (BP5) instead of the initial state")
    kernel: str = param("native", "the stencil: native (Rust) or numpy (the reference)", choices=("native", "numpy"))
    threads: int = param(1, "threads per rank of the native kernel")
    final: bool = param(False, "return the final U and V too (nested lists), for checking")


class ConsumerParams(Params):
    stream: str = param("", "the stream to read (SST contact file is STREAM.sst)")
    engine: str = param("SST", "SST or BP5")
    connect_timeout: float = param(60.0, "seconds to wait for the writer")
    delay: float = param(0.0, "extra seconds per step (a slow consumer, for tests)")


class PdfParams(ConsumerParams):
    bins: int = param(100, "histogram bins")
    out_stream: str = param("", "where to write the PDFs (empty: analyse only)")
    out_engine: str = param("SST", "SST (to the PDF plotter) or BP5 (a file)")
    out_readers: int = param(1, "SST readers of out_stream")
    out_file: str = param("", "also write the PDFs to this BP5 file, at this site (the tutorial's pdf.bp)")
    planes: int = param(0, "the stream's plane count (the simulation's L): opens the outputs before the first "
                           "step instead of at it, whose rendezvous with the PDF plotter would otherwise hold "
                           "up that step (0: at the first step)")


class PlotterParams(ConsumerParams):
    frames: str = param("", "directory for the PNG frames and the animation")
    every: int = param(1, "draw every n-th step (all are read and checked)")


class GplotParams(PlotterParams):
    axis: str = param("z", "the axis the cross-section is taken across", choices=("x", "y", "z"))
    index: int | None = param(None, "slice index along the axis (default: the middle)")


class PdfplotParams(PlotterParams):
    slice: int | None = param(None, "which slice's PDF to draw (default: the middle)")


class Simulation(RankWorkload, name="grayscott-simulation", part_of="grayscott", Params=SimulationParams):
    """The Gray-Scott simulation: 3-D decomposition, ghost exchange, rank 0 stages U and V"""

    def rank(self, comm, params: SimulationParams) -> dict | None:
        from geofed.apps.grayscott import simulation
        return simulation.simulate(comm, params)


class Pdf(RankWorkload, name="grayscott-pdf", part_of="grayscott", Params=PdfParams):
    """PDF analysis: per-slice histograms of U and V for every step, as a stream or a file"""

    def rank(self, comm, params: PdfParams) -> dict | None:
        from geofed.apps.grayscott import pdf
        return pdf.analyse(comm, params)


class Gplot(RankWorkload, name="grayscott-gplot", part_of="grayscott", Params=GplotParams):
    """2-D cross-sections of U and V: a PNG frame per step and an animation"""

    def rank(self, comm, params: GplotParams) -> dict | None:
        from geofed.apps.grayscott import gplot
        return gplot.plot(params)


class Pdfplot(RankWorkload, name="grayscott-pdfplot", part_of="grayscott", Params=PdfplotParams):
    """PDF plots: the PDFs of U and V of one slice, a PNG frame per step and an animation"""

    def rank(self, comm, params: PdfplotParams) -> dict | None:
        from geofed.apps.grayscott import pdfplot
        return pdfplot.plot(params)


WORKLOADS = (Simulation(), Pdf(), Gplot(), Pdfplot())
