"""geofed transfer beside iperf3, GridFTP and xrootd on a private copy of the federation,
per link loss and stream count (ops.transfer_bench, bench.transfer)."""

from __future__ import annotations

import argparse

from geofed import validate
from geofed.errors import UserError
from geofed.ops import transfer_bench
from geofed.params import Params, param
from geofed.validate import choices, nonnegative_float, positive_int_list, probability
from geofed.workloads import Context, Workload


def losses(text: str) -> list[float]:
    """Frame loss probabilities separated by commas."""
    values = [probability(x) for x in text.split(",") if x.strip()]
    if not values or any(v >= 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected losses below 1 separated by commas, like 0,0.01, got {text!r}")
    return values


class TransferParams(Params):
    streams: str = param("1,2,4,8", "stream counts", type=lambda t: ",".join(map(str, positive_int_list(t))))
    loss: str = param("0,0.01", "link losses", type=lambda t: ",".join(map(str, losses(t))))
    size: str = param("1G", "bytes per run")
    lossy_size: str = param("64M", "bytes per run on a lossy link")
    repeat: int = param(3, "runs per cell; medians")
    rtt_ms: float = param(0.0, "the link's round trip in ms (0: the federation's)", type=nonnegative_float)
    bandwidth_gbps: float = param(0.0, "the link's rate in Gb/s (0: the federation's)", type=nonnegative_float)
    peers: str = param(",".join(transfer_bench.PEERS),
                       "bulk tools beside iperf3: gridftp,xrootd ('none' for iperf3 alone)",
                       type=lambda t: ",".join(choices(transfer_bench.PEERS, none=True)(t)))


class Transfer(Workload, kind="bench.transfer", Params=TransferParams, needs_placement=False):
    """geofed transfer beside iperf3: rate and CPU per stream count and loss (root)"""

    def check(self, ctx: Context, params: TransferParams) -> None:
        if len(ctx.fed.sites) < 2:
            raise UserError(f"{ctx.fed.path}: one site only; a transfer between sites needs two")
        validate.parse_size(params.size, "--size")
        validate.parse_size(params.lossy_size, "--lossy-size")

    def run(self, ctx: Context, params: TransferParams):
        data = transfer_bench.run(ctx.fed, positive_int_list(params.streams), losses(params.loss),
                                  validate.parse_size(params.size, "--size"), params.repeat,
                                  validate.parse_size(params.lossy_size, "--lossy-size"),
                                  [p for p in params.peers.split(",") if p],
                                  **{k: v for k, v in (("rtt_ms", params.rtt_ms),
                                                       ("bandwidth_gbps", params.bandwidth_gbps)) if v})
        return self.record(ctx, params, data)

    def table(self, rec) -> str:
        return transfer_bench.table(rec.to_dict()["data"])


WORKLOAD = Transfer()
