"""What geofed's profiler costs a program: HPL with and without it, side by side (workload.result).

Runs alternate (without, with, without, ...) so that the host's load, shared with other
work, weighs on both alike; HPL's own time of its solve is compared, medians over
`repeat` runs of each.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from geofed.params import Params, param
from geofed.records import Sanity
from geofed.validate import positive_int
from geofed.workloads import RESULT_KIND, Context, Workload


class OverheadParams(Params):
    n: int = param(4000, "HPL's matrix order N", type=positive_int)
    repeat: int = param(5, "runs with and without the profiler, alternating; medians", type=positive_int)


class ProfileOverhead(Workload, kind=RESULT_KIND, Params=OverheadParams, runs_mpi=True):
    """what `geofed profile` costs a program: HPL with and without the profiler, alternating"""

    def run(self, ctx: Context, params: OverheadParams):
        import os
        from geofed.apps.hpl import run
        from geofed.apps.profile import preload
        from geofed.records.hpl import HplParams
        hpl = HplParams((params.n,), ranks_per_node=ctx.ranks_per_node).on(ctx.placement.node_count,
                                                                            f"placement {ctx.placement.code}")
        times: dict[str, list[float]] = {"without": [], "with": []}
        loads, passed = [], True
        for i in range(params.repeat):
            for side in times:
                with tempfile.TemporaryDirectory(prefix="geofed-overhead-") as tmp:
                    os.chmod(tmp, 0o777)
                    loads.append(os.getloadavg()[0])
                    data = run.run(ctx.fed, ctx.placement, hpl, hostfile=ctx.hostfile, timeout=ctx.timeout,
                                   preload=preload(Path(tmp)) if side == "with" else [])
                    times[side].append(data["rows"][0]["time_s"])
                    passed = passed and data["passed"]
                ctx.progress(f"run {i + 1}/{params.repeat} {side} the profiler: HPL N = {params.n} "
                             f"{times[side][-1]:.3f} s (load {loads[-1]:.2f})")
        without, with_ = statistics.median(times["without"]), statistics.median(times["with"])
        return self.record(ctx, params, {"placement": ctx.placement.code, "n": params.n, "without_s": times["without"],
                                         "with_s": times["with"], "median_without_s": without,
                                         "median_with_s": with_, "overhead": with_ / without - 1,
                                         "load": [min(loads), max(loads)], "cores": os.cpu_count(),
                                         "passed": passed})

    def sanity(self, rec) -> Sanity:
        ok = rec.data.result["passed"]
        return Sanity(ok, "HPL's residual check passed in every run" if ok else "HPL's residual check failed")

    def figures(self, rec) -> dict:
        return {"overhead": rec.data.result["overhead"]}

    def table(self, rec) -> str:
        d = rec.data.result
        return (f"HPL N = {d['n']} on {d['placement']}: median {d['median_without_s']:.3f} s without the profiler "
                f"({', '.join(f'{t:.3f}' for t in d['without_s'])}), {d['median_with_s']:.3f} s with it "
                f"({', '.join(f'{t:.3f}' for t in d['with_s'])}): overhead {d['overhead']:+.1%} (target 3 %); "
                f"load {d['load'][0]:.2f} to {d['load'][1]:.2f} on {d['cores']} cores")


WORKLOAD = ProfileOverhead()
