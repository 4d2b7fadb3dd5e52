"""Record kinds of bulk transfers (seed 004) and the typed parameters of their model."""

from __future__ import annotations

from dataclasses import dataclass

from geofed.params import param
from geofed.records import doc, kind
from geofed.validate import size


@dataclass(frozen=True)
class TransferParams:
    """A bulk transfer over parallel TCP streams."""
    bytes: int = param(1 << 30, "bytes to move: 10G, 1.5T, 512M", type=size)
    streams: int = param(4, "parallel TCP streams")


@kind
class OpsTransfer:
    """`geofed transfer`, `geofed demo`: one bulk transfer between nodes."""
    KIND = "ops.transfer"
    VERSION = 2
    source: str = doc("source node:path")
    destination: str = doc("destination node:path")
    bytes: int = doc("bytes of the data set (holes of sparse files not counted)")
    moved_bytes: int = doc("bytes sent")
    held_bytes: int = doc("bytes already there (not sent)")
    seconds: float = doc("transfer time")
    rate_mbps: float = doc("rate of the bytes sent")
    streams: int = doc("parallel streams")
    buffer_bytes: int = doc("socket buffer")
    chunk_bytes: int = doc("chunk size (the unit checked and resent)")
    resent_chunks: int = doc("chunks sent again")
    corrupt_found: int = doc("damaged chunks found and sent again")
    sender_cpu_s_per_gb: float = doc("sender CPU per GB")
    receiver_cpu_s_per_gb: float = doc("receiver CPU per GB")
    link: dict = doc("src_site, dst_site, rtt_ms, bandwidth_gbps, bdp_bytes")
    tree: dict = doc("the source's entries by kind (file, dir, link, hardlink), and how many were deleted "
                     "at the destination (--delete) and not sent (devices, FIFOs, sockets)")

    @classmethod
    def upgrade(cls, version: int, data: dict) -> dict:
        """Version 1 sent files only: no count of entries."""
        return data | {"tree": {}}


@kind
class BenchTransfer:
    """`geofed bench transfer`: geofed transfer beside iperf3, GridFTP and xrootd per stream count and loss."""
    KIND = "bench.transfer"
    VERSION = 1
    link: dict = doc("rtt_ms, bandwidth_gbps of the link")
    auto_streams: int = doc("the stream count geofed chooses on this link")
    rows: list = doc("per loss and stream count: geofed_mbps, iperf3_mbps, <peer>_mbps, CPU per GB, runs")
    peers: list = doc("peer tools beside iperf3 (gridftp, xrootd)", factory=list)
