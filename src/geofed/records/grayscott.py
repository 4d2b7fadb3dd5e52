"""Record kinds of the Gray-Scott workflow (seed 000) and the typed parameters of its model."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.records import Sanity, doc, kind


class GrayScottParams(Params):
    """A Gray-Scott simulation streaming its fields to consumers reading whole steps."""
    L: int = param(64, "grid points per dimension")
    plotgap: int = param(10, "simulation steps between outputs")
    sim_ranks: int = param(4, "simulation ranks")
    consumers: int = param(2, "consumers reading the whole field each output (pdf analysis, plot)")


@kind("workflow.grayscott")
class WorkflowGrayscott:
    """`geofed workflow grayscott`, `geofed demo`: simulation at one site, SST staging, analysis at another."""
    settings: dict = doc("the simulation's settings (L, steps, plotgap, engine, ...)")
    sim_site: str = doc("site of the simulation")
    analysis_site: str = doc("site of the consumers")
    run_dir: str = doc("directory with the run's files (BP5 outputs, frames)")
    link: dict = doc("rtt_ms, bandwidth_gbps, hops between the two sites")
    parts: list = doc("per part: name, describe, nodes, ranks, delay_s")
    simulation: dict = doc("the simulation's summary")
    steps: list = doc("per output step: compute_s, gather_s, stage_s, interval_s, bytes, ...")
    pdf_stream: list = doc("per step the pdf analysis received")
    verify: dict = doc("ok, expected_steps, consumers (per consumer: stream, written, received, missing, differ)")
    wall_s: float = doc("wall time of the run")
    frames: dict = doc("cross_section, pdf and animations: image files")
    transfer: dict | None = doc("median transfer rates per step on a common clock (absent before 2026-11)", None)

    def sanity(self) -> Sanity:
        """every output step reached every consumer intact (CRC32 per plane on both sides)."""
        bad = [n for n, c in self.verify["consumers"].items() if c["missing"] or c["differ"]]
        ok = self.verify["ok"] and not bad
        return Sanity(ok, "every step reached every consumer intact" if ok
                      else f"steps lost or corrupted at {', '.join(bad) or 'a consumer'}")


@kind("bench.grayscott")
class BenchGrayscott:
    """`geofed bench grayscott`: time per simulation step with staging across the link on and off."""
    settings: dict = doc("the simulation's base settings")
    sim_site: str = doc("site of the simulation")
    analysis_site: str = doc("site of the consumers")
    sim_ranks: int = doc("simulation ranks")
    link: dict = doc("rtt_ms, bandwidth_gbps between the two sites")
    cases: list = doc("per L: L, steps, plotgap, outputs, bytes_per_output, off {per_step_ms, ...}, "
                      "on {per_step_ms, staging_ms, transfer, intact, ...}, overhead, staging_overhead")

    def sanity(self) -> Sanity:
        """every staged run delivered every step intact."""
        bad = [str(c["L"]) for c in self.cases if not c["on"]["intact"]]
        return Sanity(not bad, f"steps lost or corrupted at L = {', '.join(bad)}" if bad
                      else "every staged step intact")
