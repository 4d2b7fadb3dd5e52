"""Record kinds of the performance models' validation."""

from __future__ import annotations

from geofed.records import kind


@kind("bench.model")
class BenchModel:
    """`geofed bench model`, `geofed demo`: every inter-site run predicted from one-site runs, SimGrid beside.

    Attributes:
        calibration: the calibration used: sources, notes, sites and the testbed's constants
        rows: per measured value: workload, placement, params, measured, unit, predicted, parts, source, error,
            simgrid_<model>
        summary: rows, within_tolerance, median_abs_error, max_abs_error, simgrid_<model>
        simgrid: ran, or why SimGrid did not
    """
    calibration: dict
    rows: list
    summary: dict
    simgrid: str
