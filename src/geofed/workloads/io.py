"""IOzone's grid of file x record sizes on a directory of this host, or on a file system of
the testbed from one of its nodes (local at the storage site, across the link elsewhere),
with IOzone and fio beside it (bench.io, seed 002)."""

from __future__ import annotations

import shutil

from geofed import records, validate
from geofed.bench import storage as io
from geofed.bench import storage_peers
from geofed.errors import JobFailed, UserError
from geofed.params import Params, joined, param
from geofed.validate import choices
from geofed.workloads import Context, Workload


class IoParams(Params):
    path: str | None = param(None, "directory of this host to measure (default: the current one); the files go in "
                                   "a private directory made there and removed at the end", type=str)
    filesystem: str | None = param(None, "instead of --path: SITE:NAME of a file system of the testbed, measured "
                                         "from --node", type=str)
    node: str | None = param(None, "node of the testbed --filesystem is reached from", type=str)
    sizes: str = param(io.DEFAULT_SIZES, "file sizes: MIN:MAX (powers of 2), MIN:MAX:4 (of 4) or a list")
    records: str | None = param(None, "record sizes, as --sizes (default: 4K to 16M or the largest file, powers "
                                      "of 4); a file is measured with each record no larger than itself", type=str)
    modes: str = param(",".join(io.MODES), "buffered, sync (O_SYNC), direct (O_DIRECT), comma-separated",
                       type=joined(choices(io.MODES)))
    ops: str = param(",".join(io.OPS), "write, rewrite, read, reread, randread, randwrite, comma-separated",
                     type=joined(choices(io.OPS)))
    budget: float = param(300.0, "seconds: larger file sizes are skipped once the next would not fit")
    repeat: int = param(3, "runs per cell; medians")
    peers: str | None = param(None, "iozone, fio, comma-separated, on the same cells (default none)",
                              type=joined(choices(storage_peers.PEERS, none=True)))
    drop_cache: bool = param(True, "drop the file's pages from the page cache before `read`, so that it reads the "
                                   "storage and `reread` the cache")


class Io(Workload, kind="bench.io", Params=IoParams, needs_placement=False):
    """storage: IOzone's grid of file x record sizes, buffered, O_SYNC and O_DIRECT, beside IOzone and fio, on a
    directory here or on a file system of the testbed from a node (docs/storage.md)"""

    def grid(self, params: IoParams) -> tuple[list[int], list[int]]:
        sizes = validate.parse_sizes(params.sizes, "--sizes")
        return sizes, validate.parse_sizes(params.records or io.default_records(max(sizes)), "--records")

    def check(self, ctx: Context, params: IoParams) -> None:
        sizes, record_sizes = self.grid(params)
        io.check_grid(sizes, record_sizes, params.modes.split(","))
        storage_peers.check(self.peers(params), record_sizes)
        if params.filesystem is None:
            if params.node is not None:
                raise UserError(f"--node {params.node}: give --filesystem SITE:NAME too (--node says where it is "
                                f"reached from)")
            return
        if params.path is not None:
            raise UserError("--path and --filesystem: give one (a directory here, or a file system of the testbed)")
        if params.node is None:
            raise UserError(f"--filesystem {params.filesystem}: give --node, the node it is reached from")
        from geofed.testbed import storage
        storage.resolve(ctx.fed, params.node, params.filesystem)

    def peers(self, params: IoParams) -> list[str]:
        return params.peers.split(",") if params.peers else []

    def run(self, ctx: Context, params: IoParams):
        sizes, record_sizes = self.grid(params)
        if params.filesystem is None:
            directory = io.workdir(params.path)
        else:
            from geofed.testbed import core, storage
            storage.up(core.require_up(ctx.fed), ctx.progress)
            path, remote = storage.resolve(ctx.fed, params.node, params.filesystem)
            ctx.progress(f"bench io: {params.filesystem} from {params.node} "
                         f"({'across the link' if remote else 'local'})")
            directory = io.workdir(str(path))
        try:  # the directory goes whatever happens: an error, a failed peer, Ctrl-C
            io.check_space(directory, max(sizes))
            data = io.run(directory, sizes, record_sizes, params.modes.split(","), params.ops.split(","),
                          params.repeat, params.budget, self.peers(params), params.drop_cache, ctx.progress)
        except OSError as e:  # the storage failed us (full, gone, an I/O error): one line, exit 1
            raise JobFailed(f"bench io: {e}") from None
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        # A directory of this host belongs to no federation; a testbed's file system does.
        return self.record(ctx, params, data) if params.filesystem else records.make(self.kind, data)

    def table(self, rec) -> str:
        return io.format_table(rec.to_dict()["data"])


WORKLOAD = Io()
