"""A sequential write into the storage site's file system across the link, against a plain
TCP copy of the same bytes between the same nodes (bench.remote_write)."""

from __future__ import annotations

from geofed import validate
from geofed.bench import remote_write
from geofed.errors import UserError
from geofed.params import Params, param
from geofed.validate import positive_int
from geofed.workloads import Context, Workload


class RemoteWriteParams(Params):
    node: str | None = param(None, "node writing (default: the login node of the first site other than the "
                                   "storage site)", type=str)
    filesystem: str | None = param(None, "SITE:NAME of the storage site's exported file system (default: its "
                                         "first shared one)", type=str)
    size: str = param("1G", "bytes written, and copied")
    record: str = param("1M", "bytes per write call")
    repeat: int = param(3, "rounds of a write and a copy, in turn; medians", type=positive_int)


class RemoteWrite(Workload, kind="bench.remote_write", Params=RemoteWriteParams, needs_placement=False):
    """storage: a sequential write with fsync into the storage site's file system across the link, beside a plain
    TCP copy of the same bytes between the same nodes, in turn (root, the testbed up; docs/filesystems.md)"""

    def where(self, ctx: Context, params: RemoteWriteParams) -> tuple[str, str]:
        fed = ctx.fed
        node = params.node or next((s.login_node.name for s in fed.sites if s.code != fed.storage), None)
        exported = [f.name for f in fed.site(fed.storage).filesystems if f.shared]
        spec = params.filesystem or (f"{fed.storage}:{exported[0]}" if exported else None)
        if node is None or spec is None:
            raise UserError(f"{fed.path}: a remote write needs a site besides the storage site {fed.storage} and a "
                            f"shared file system there")
        return node, spec

    def sizes(self, params: RemoteWriteParams) -> tuple[int, int]:
        size, record = validate.parse_size(params.size, "--size"), validate.parse_size(params.record, "--record")
        if record > size or size % record or record % 1024:
            raise UserError(f"--record {params.record}: whole KiB dividing --size {params.size}")
        return size, record

    def check(self, ctx: Context, params: RemoteWriteParams) -> None:
        self.sizes(params)
        remote_write.check(ctx.fed, *self.where(ctx, params))

    def run(self, ctx: Context, params: RemoteWriteParams):
        from geofed.testbed.core import require_up
        data = remote_write.run(require_up(ctx.fed), *self.where(ctx, params), *self.sizes(params), params.repeat,
                                ctx.progress)
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        return remote_write.format_table(rec.to_dict()["data"])


WORKLOAD = RemoteWrite()
