"""The record kind of workloads that need no picture of their own (geofed.workloads)."""

from __future__ import annotations

from geofed.records import Sanity, doc, kind


@kind("workload.result")
class WorkloadResult:
    """`geofed bench NAME` of a workload without a kind of its own: its parameters, what it measured, its verdict."""
    workload: str = doc("the workload's name (geofed bench NAME)")
    placement: str | None = doc("the placement it ran on, None for the testbed as a whole")
    params: dict = doc("its parameters, field by field")
    result: dict = doc("what it measured, as the workload returned it (its own rows and columns)")
    verdict: dict = doc("its sanity check: ok, and why not")
    figures: dict = doc("its performance figures by name (`t_max_us@1024`), for references with tolerances")

    def sanity(self) -> Sanity:
        return Sanity(bool(self.verdict["ok"]), self.verdict["why"] or "checked by the workload")
