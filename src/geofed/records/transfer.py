"""Record kinds of bulk transfers (seed 004) and the typed parameters of their model."""

from __future__ import annotations

from dataclasses import field

from geofed.params import Params, param
from geofed.records import kind
from geofed.validate import size


class TransferParams(Params):
    """A bulk transfer over parallel TCP streams."""
    bytes: int = param(1 << 30, "bytes to move: 10G, 1.5T, 512M", type=size)
    streams: int = param(4, "parallel TCP streams")


@kind("ops.transfer", version=3,
      added={"tree": {}, "congestion": {}, "limit": {}, "started_from": "host"})
class OpsTransfer:
    """`geofed transfer`, `geofed demo`: one bulk transfer between nodes.

    Attributes:
        source: source node:path
        destination: destination node:path
        bytes: bytes of the data set (holes of sparse files not counted)
        moved_bytes: bytes sent
        held_bytes: bytes already there (not sent)
        seconds: transfer time
        rate_mbps: rate of the bytes sent
        streams: parallel streams
        buffer_bytes: socket buffer
        chunk_bytes: chunk size (the unit checked and resent)
        resent_chunks: chunks sent again
        corrupt_found: damaged chunks found and sent again
        sender_cpu_s_per_gb: sender CPU per GB
        receiver_cpu_s_per_gb: receiver CPU per GB
        link: src_site, dst_site, rtt_ms, bandwidth_gbps, bdp_bytes
        tree: the source's entries by kind (file, dir, link, hardlink), and how many were deleted at
            the destination (--delete) and not sent (devices, FIFOs, sockets); empty in version 1
        phases: seconds at the sender: plan_s (connecting, walking the source, the plan, the
            receiver's answer), connect_s (the data connections, side by side; in data_s before it),
            data_s (= seconds: from the data connections' first byte), finish_s (the receiver's links,
            deletions and directories' metadata); empty in records made before it
        started_from: the node the ends were started from over ssh (a third-party transfer when at
            neither end's site), or host (the testbed's host, in the nodes' namespaces)
        congestion: the data streams' TCP congestion control: asked (auto, cubic, bbr), algorithm
            (what ran), reason, sockets (what the kernel reported on the streams), retransmitted
            (share of the bytes sent again), probe (the share measured after slow start, whether it
            switched to bbr); empty before version 3
        limit: the narrower end: narrower (sender disk, receiver disk, sender CPU, receiver CPU,
            network), busy (each end's share of the data phase reading, writing, on CPU), network (the
            rate against the link's TCP goodput), goodput_mbps, rate_mbps, waiting (the share of the
            streams' time the sender was blocked sending, the receiver waiting for bytes),
            receiver_window (the share of the sender's sending time the receiver's window held it),
            receiver_behind (the share of the bytes already waiting in the receiver's sockets when it
            read them), waiting_for_cpu (per end, the share of its streams' time they were ready to run
            and waited for a CPU; these three not in records made before them); empty before version 3
    """
    source: str
    destination: str
    bytes: int
    moved_bytes: int
    held_bytes: int
    seconds: float
    rate_mbps: float
    streams: int
    buffer_bytes: int
    chunk_bytes: int
    resent_chunks: int
    corrupt_found: int
    sender_cpu_s_per_gb: float
    receiver_cpu_s_per_gb: float
    link: dict
    tree: dict
    phases: dict = field(default_factory=dict)
    started_from: str = "host"
    congestion: dict = field(default_factory=dict)
    limit: dict = field(default_factory=dict)


@kind("bench.transfer", version=2, added={"auto": {}})
class BenchTransfer:
    """`geofed bench transfer`: geofed transfer beside iperf3, GridFTP and xrootd per stream count and loss.

    Attributes:
        link: rtt_ms, bandwidth_gbps of the link, path_gbps (its narrowest hop, nodes' interfaces included;
            not in records made before it)
        auto_streams: the stream count geofed chooses on this link
        rows: per loss and stream count: geofed_mbps, iperf3_mbps, <peer>_mbps, CPU per GB, runs
        peers: peer tools beside iperf3 (gridftp, xrootd)
        auto: per loss, geofed's own choice on the link: streams, congestion, reason; empty in version 1
    """
    link: dict
    auto_streams: int
    rows: list
    peers: list = field(default_factory=list)
    auto: dict = field(default_factory=dict)
