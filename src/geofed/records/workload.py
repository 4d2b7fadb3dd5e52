"""The record kind of workloads that need no picture of their own (geofed.workloads)."""

from __future__ import annotations

from geofed.records import Sanity, kind


@kind("workload.result")
class WorkloadResult:
    """`geofed bench NAME` of a workload without a kind of its own: its parameters, what it measured, its verdict.

    Attributes:
        workload: the workload's name (geofed bench NAME)
        placement: the placement it ran on, None for the testbed as a whole
        params: its parameters, field by field
        result: what it measured, as the workload returned it (its own rows and columns)
        verdict: its sanity check: ok, and why not
        figures: its performance figures by name (`t_max_us@1024`), for references with tolerances
    """
    workload: str
    placement: str | None
    params: dict
    result: dict
    verdict: dict
    figures: dict

    def sanity(self) -> Sanity:
        return Sanity(bool(self.verdict["ok"]), self.verdict["why"] or "checked by the workload")
