"""IOzone's semantics on a file system of the federation, from a node of the testbed: local
at the storage site, across the link elsewhere (bench.io, seed 002)."""

from __future__ import annotations

import shutil

from geofed import validate
from geofed.bench import storage as io
from geofed.params import Params, param
from geofed.validate import choices
from geofed.workloads import Context, Workload

class StorageParams(Params):
    node: str = param("W1", "node the file system is reached from")
    filesystem: str = param("W:data", "SITE:NAME of the file system")
    sizes: str = param("4M", "file sizes")
    records: str = param("64K,1M", "record sizes")
    ops: str = param("write,rewrite,read,reread", "operations, comma-separated", type=lambda t: ",".join(choices(io.OPS)(t)))
    budget: float = param(120.0, "seconds: larger files are skipped once the next would not fit")


class Storage(Workload, kind="bench.io", Params=StorageParams, needs_placement=False):
    """IOzone's grid on a file system of the testbed from one of its nodes, local or across the link (root)"""

    def check(self, ctx: Context, params: StorageParams) -> None:
        from geofed.testbed import storage
        validate.parse_sizes(params.sizes, "--sizes")
        validate.parse_sizes(params.records, "--records")
        storage.resolve(ctx.fed, params.node, params.filesystem)

    def run(self, ctx: Context, params: StorageParams):
        from geofed.testbed import core, storage
        storage.up(core.require_up(ctx.fed), ctx.progress)
        path, remote = storage.resolve(ctx.fed, params.node, params.filesystem)
        ctx.progress(f"bench io: {params.filesystem} from {params.node} ({'across the link' if remote else 'local'})")
        directory = io.workdir(str(path))
        try:
            data = io.run(directory, validate.parse_sizes(params.sizes), validate.parse_sizes(params.records),
                          ["buffered"], params.ops.split(","), 1, params.budget, [], True, ctx.progress)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        return io.format_table(rec.to_dict()["data"])


WORKLOAD = Storage()
