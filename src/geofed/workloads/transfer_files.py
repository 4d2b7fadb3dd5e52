"""Many small files beside one file of the same bytes, moved by geofed transfer on a
private copy of the federation (ops.transfer_files, workload.result)."""

from __future__ import annotations

from pathlib import Path

from geofed.errors import UserError
from geofed.ops import transfer_files
from geofed.params import Params, param
from geofed.records import Sanity
from geofed.workloads import RESULT_KIND, Context, Workload


class TransferFilesParams(Params):
    files: int = param(100_000, "files in the tree (1000 to a directory)")
    file_size: str = param("64K", "each file's size, or MIN-MAX drawn per file (0-100)")
    repeat: int = param(1, "runs of each (the tree, the one file), alternated; medians")
    streams: int = param(0, "TCP streams (0: geofed's choice from the link)", type=lambda t: int(t))
    dir: str = param("/tmp", "where the sources and destinations are made (removed at the end)")


class TransferFiles(Workload, kind=RESULT_KIND, Params=TransferFilesParams, needs_placement=False):
    """many small files against one file of the same bytes, side by side (root)"""

    def check(self, ctx: Context, params: TransferFilesParams) -> None:
        if len(ctx.fed.sites) < 2:
            raise UserError(f"{ctx.fed.path}: one site only; a transfer between sites needs two")
        transfer_files.file_sizes(params.file_size)
        if not Path(params.dir).is_dir():
            raise UserError(f"--dir {params.dir}: no such directory")
        if params.streams < 0:
            raise UserError(f"--streams {params.streams}: expected 0 or more")

    def run(self, ctx: Context, params: TransferFilesParams):
        data = transfer_files.run(ctx.fed, params.files, transfer_files.file_sizes(params.file_size),
                                  params.repeat, Path(params.dir), params.streams or None)
        return self.record(ctx, params, data)

    def sanity(self, rec) -> Sanity:
        ok = rec.data.result["intact"]
        return Sanity(ok, "every tree and file arrived as its source (find's listing, cmp)" if ok
                      else "a destination differs from its source")

    def figures(self, rec) -> dict[str, float]:
        r = rec.data.result
        return {"files_mbps": r["files_mbps"], "one_file_mbps": r["one_file_mbps"],
                "files_over_one_file": r["files_over_one_file"]}

    def table(self, rec) -> str:
        return transfer_files.table(rec.data.result)


WORKLOAD = TransferFiles()
