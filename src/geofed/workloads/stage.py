"""A data set staged from a node of one site to a node of another with `geofed transfer`,
compared byte for byte on arrival (ops.transfer): seed 000 staged its data from ICM to TASK."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from geofed.bench.btio import file_digest
from geofed.errors import JobFailed
from geofed.params import Params, param
from geofed.workloads import Context, Workload


class StageParams(Params):
    source: str = param("W1", "node the data set is made at")
    destination: str = param("G1", "node it is staged to")
    mbytes: int = param(300, "size of the data set in MiB")


class Stage(Workload, kind="ops.transfer", Params=StageParams, command="transfer", needs_placement=False):
    """stage a data set of random bytes between two nodes with geofed transfer and compare it on arrival"""

    def run(self, ctx: Context, params: StageParams):
        from geofed.ops import transfer
        with tempfile.TemporaryDirectory(prefix="geofed-stage-") as tmp:
            src, dst = Path(tmp) / "dataset.bin", Path(tmp) / "staged.bin"
            with open(src, "wb") as f:
                for _ in range(params.mbytes):
                    f.write(os.urandom(1 << 20))
            data = transfer.run(ctx.fed, f"{params.source}:{src}", f"{params.destination}:{dst}")
            if file_digest(dst) != file_digest(src):
                raise JobFailed(f"stage {params.source} -> {params.destination}: the data set arrived different")
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        d = rec.data
        cap = d.link["bandwidth_gbps"] * 1000
        return (f"transfer {d.source.split(':')[0]} -> {d.destination.split(':')[0]}: {d.moved_bytes / 1e6:.0f} MB in "
                f"{d.seconds:.2f} s, {d.rate_mbps:.0f} of {cap:.0f} Mb/s ({d.rate_mbps / cap:.0%}) over {d.streams} "
                f"streams; identical on arrival")


WORKLOAD = Stage()
