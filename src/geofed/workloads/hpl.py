"""The High-Performance Linpack on a placement: time, GFLOPS and HPL's residual check (bench.hpl)."""

from __future__ import annotations

import argparse

from geofed.errors import UserError
from geofed.params import Params, param
from geofed.records.hpl import BCASTS
from geofed.validate import nonnegative_int, positive_float
from geofed.workloads import Context, Workload

# A small share of the nodes' memory: on the scaled testbed (2 GB per node, 0.4 core)
# a 2-node HPL run then takes seconds, not minutes. Acceptance runs ask for more.
DEFAULT_MEMORY = 0.02


def lookahead(text) -> int:
    depth = nonnegative_int(text)
    if depth > 2:
        raise argparse.ArgumentTypeError(f"expected 0, 1 or 2, got {text!r}")
    return depth


class HplRunParams(Params):
    n: str | None = param(None, "matrix orders N, comma-separated (default: the order filling --memory)", type=str)
    memory: float | None = param(None, f"fraction of the placement's memory (federation file) the matrix fills "
                                       f"(default {DEFAULT_MEMORY})", type=positive_float)
    nb: int = param(80, "block size NB")
    grid: str | None = param(None, "process grid PxQ (default: as square as the rank count allows, P <= Q)", type=str)
    bcast: str = param("1rM", "panel broadcast variant", choices=tuple(BCASTS))
    depth: int = param(1, "lookahead depth: 0, 1 or 2", type=lookahead)
    cpu_limit: bool = param(False, "testbed: ranks under their node's CPU quota (HPL's broadcasts poll, and a "
                                   "polling rank under a quota is throttled; docs/hpl.md)")


class Hpl(Workload, kind="bench.hpl", Params=HplRunParams, runs_mpi=True):
    """High-Performance Linpack (HPL 2.0) on a placement: time, GFLOPS, residual check"""

    def hpl_params(self, ctx: Context, params: HplRunParams):
        """HPL's input for the placement: the orders given, or the one filling --memory."""
        from geofed.apps.hpl import params as P
        from geofed.records.hpl import HplParams, parse_grid
        if params.n and params.memory:
            raise UserError("--n and --memory: give one (the matrix order, or the share of the nodes' memory it fills)")
        if params.n:
            ns = P.parse_ns(params.n)
        else:
            memory = sum(ctx.fed.site(n.site).memory_gb for n in ctx.placement.nodes(ctx.fed)) * 1e9
            ns = [P.n_for_memory(params.memory or DEFAULT_MEMORY, memory, params.nb)]
        p, q = parse_grid(params.grid) if params.grid else (0, 0)
        return HplParams(tuple(ns), params.nb, p, q, params.bcast, params.depth, ctx.ranks_per_node).on(
            ctx.placement.node_count, f"placement {ctx.placement.code} with {ctx.ranks_per_node} rank per node")

    def check(self, ctx: Context, params: HplRunParams) -> None:
        super().check(ctx, params)
        self.hpl_params(ctx, params)

    def run(self, ctx: Context, params: HplRunParams):
        from geofed.apps.hpl import run
        data = run.run(ctx.fed, ctx.placement, self.hpl_params(ctx, params), hostfile=ctx.hostfile,
                       timeout=ctx.timeout, cpu_limit=params.cpu_limit)
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        from geofed.apps.hpl import run
        return run.format_table(rec.to_dict()["data"])


WORKLOAD = Hpl()
