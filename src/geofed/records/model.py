"""Record kinds of the performance models' validation."""

from __future__ import annotations

from geofed.records import doc, kind


@kind("bench.model")
class BenchModel:
    """`geofed bench model`, `geofed demo`: every inter-site run predicted from one-site runs, SimGrid beside."""
    calibration: dict = doc("the calibration used: sources, notes, sites and the testbed's constants")
    rows: list = doc("per measured value: workload, placement, params, measured, unit, predicted, parts, source, "
                     "error, simgrid_<model>")
    summary: dict = doc("rows, within_tolerance, median_abs_error, max_abs_error, simgrid_<model>")
    simgrid: str = doc("ran, or why SimGrid did not")
