"""Record kinds of the Gray-Scott workflow (seed 000) and the typed parameters of its model."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.records import Sanity, kind


class GrayScottParams(Params):
    """A Gray-Scott simulation streaming its fields to consumers reading whole steps."""
    L: int = param(64, "grid points per dimension")
    plotgap: int = param(10, "simulation steps between outputs")
    sim_ranks: int = param(4, "simulation ranks")
    consumers: int = param(2, "consumers reading the whole field each output (pdf analysis, plot)")


@kind("workflow.grayscott")
class WorkflowGrayscott:
    """`geofed workflow grayscott`, `geofed demo`: simulation at one site, SST staging, analysis at another.

    Attributes:
        settings: the simulation's settings (L, steps, plotgap, engine, ...)
        sim_site: site of the simulation
        analysis_site: site of the consumers
        run_dir: directory with the run's files (BP5 outputs, frames)
        link: rtt_ms, bandwidth_gbps, hops between the two sites
        parts: per part: name, describe, nodes, ranks, delay_s
        simulation: the simulation's summary
        steps: per output step: compute_s, gather_s, stage_s, interval_s, bytes, ...
        pdf_stream: per step the pdf analysis received
        verify: ok, expected_steps, consumers (per consumer: stream, written, received, missing, differ)
        wall_s: wall time of the run
        frames: cross_section, pdf and animations: image files
        transfer: median transfer rates per step on a common clock (absent before 2026-11)
    """
    settings: dict
    sim_site: str
    analysis_site: str
    run_dir: str
    link: dict
    parts: list
    simulation: dict
    steps: list
    pdf_stream: list
    verify: dict
    wall_s: float
    frames: dict
    transfer: dict | None = None

    def sanity(self) -> Sanity:
        """every output step reached every consumer intact (CRC32 per plane on both sides)."""
        bad = [n for n, c in self.verify["consumers"].items() if c["missing"] or c["differ"]]
        ok = self.verify["ok"] and not bad
        return Sanity(ok, "every step reached every consumer intact" if ok
                      else f"steps lost or corrupted at {', '.join(bad) or 'a consumer'}")


@kind("bench.grayscott")
class BenchGrayscott:
    """`geofed bench grayscott`: time per simulation step with staging across the link on and off.

    Attributes:
        settings: the simulation's base settings
        sim_site: site of the simulation
        analysis_site: site of the consumers
        sim_ranks: simulation ranks
        link: rtt_ms, bandwidth_gbps between the two sites
        cases: per L and round: L, steps, round, plotgap, outputs, bytes_per_output, off {per_step_ms, ...}, on
            {per_step_ms, staging_ms, transfer, intact, ...}, overhead, staging_overhead, ceiling (the same bytes
            over plain TCP between the same nodes: steps, median_mbps, median_delivery_s; null when not run),
            of_ceiling (both consumers together / the ceiling)
    """
    settings: dict
    sim_site: str
    analysis_site: str
    sim_ranks: int
    link: dict
    cases: list

    def sanity(self) -> Sanity:
        """every staged run delivered every step intact."""
        bad = [str(c["L"]) for c in self.cases if not c["on"]["intact"]]
        return Sanity(not bad, f"steps lost or corrupted at L = {', '.join(bad)}" if bad
                      else "every staged step intact")
