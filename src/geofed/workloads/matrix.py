"""Latency and bandwidth between every pair of a placement's nodes (bench.matrix): `geofed
bench matrix` and each round of `geofed monitor run`."""

from __future__ import annotations

from geofed import validate
from geofed.errors import UserError
from geofed.params import Params, param
from geofed.workloads import Context, RankWorkload


class MatrixParams(Params):
    pairs: str | None = param(None, "only these node pairs, like W1-G1,W1-W2 (default: every pair)", type=str)
    latency_size: str = param("1", "latency message size")
    bw_size: str = param("1M", "bandwidth message size")
    budget: float = param(0.3, "seconds per measurement")


class Matrix(RankWorkload, kind="bench.matrix", Params=MatrixParams, command="bench matrix"):
    """latency and bandwidth between every pair of nodes (heat map in the report)"""
    echo = True  # each pair's row as it is measured

    def check(self, ctx: Context, params: MatrixParams) -> None:
        validate.parse_size(params.latency_size, "--latency-size")
        validate.parse_size(params.bw_size, "--bw-size")
        if ctx.placement.node_count < 2:
            raise UserError(f"bench matrix: placement {ctx.placement.code} has {ctx.placement.node_count} node; "
                            f"it needs 2 or more")

    def rank(self, comm, params: MatrixParams) -> dict | None:
        from geofed.bench import matrix
        return matrix.measure(comm, params.pairs, validate.parse_size(params.latency_size),
                              validate.parse_size(params.bw_size), params.budget)


WORKLOAD = Matrix()
