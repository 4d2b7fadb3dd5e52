"""Rank 0's round trips with every other rank of a placement (job.pingpong)."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.workloads import RankWorkload


class PingpongParams(Params):
    size: int = param(1, "message size in bytes")
    warmup: int = param(5, "untimed round trips per pair")
    iterations: int = param(100, "most timed round trips per pair")
    seconds: float = param(2.0, "time budget per pair")


class Pingpong(RankWorkload, kind="job.pingpong", Params=PingpongParams, min_nodes=2):
    """rank 0's round trips with every other rank, each pair labelled and beside the model's RTT"""

    def rank(self, comm, params: PingpongParams) -> dict | None:
        from geofed.bench import pingpong
        return pingpong.measure(comm, params.size, params.warmup, params.iterations, params.seconds)

    def table(self, rec) -> str:
        from geofed.bench import pingpong
        return pingpong.table(rec.to_dict()["data"])


WORKLOAD = Pingpong()
