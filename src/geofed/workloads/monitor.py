"""`monitor serve`'s accelerated schedule, quiet, on a private copy of the federation:
every alert is a false alarm (ops.monitor_bench, workload.result)."""

from __future__ import annotations

from pathlib import Path

from geofed.errors import UserError
from geofed.ops import monitor_bench
from geofed.params import Params, param
from geofed.records import Sanity
from geofed.validate import positive_float
from geofed.workloads import RESULT_KIND, Context, Workload


class MonitorParams(Params):
    minutes: float = param(60.0, "how long the quiet run lasts")
    gbps: float | None = param(None, "the links' rate for the run (default: the federation's); the halved-bandwidth "
                                     "check needs a rate the host carries", type=positive_float)
    keep: str = param("", "a directory to keep the schedule, the store, the alerts and the service's log in "
                          "(default: removed)")


class Monitor(Workload, kind=RESULT_KIND, Params=MonitorParams, needs_placement=False):
    """the monitor's accelerated schedule on a quiet link: alerts per hour (none expected), probes and tests (root)"""

    def check(self, ctx: Context, params: MonitorParams) -> None:
        if not ctx.fed.links:
            raise UserError(f"{ctx.fed.path}: no link to monitor")

    def run(self, ctx: Context, params: MonitorParams):
        changes = {"bandwidth_gbps": params.gbps} if params.gbps else {}
        keep = Path(params.keep).resolve() if params.keep else None
        return self.record(ctx, params, monitor_bench.run(ctx.fed, params.minutes, ctx.progress, keep, **changes))

    def sanity(self, rec) -> Sanity:
        events = rec.data.result["events"]
        return Sanity(not events, "no alert on the quiet link" if not events
                      else f"{len(events)} false alarm(s), the first: {events[0]['path']} {events[0]['reason']}")

    def figures(self, rec) -> dict[str, float]:
        return {f"{k}_per_hour": v for k, v in rec.data.result["per_hour"].items()}

    def table(self, rec) -> str:
        return monitor_bench.table(rec.data.result)


WORKLOAD = Monitor()
