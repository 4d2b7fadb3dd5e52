"""Messages between nodes: the federation's links plus the host's measured local costs.

Inter-site behaviour comes only from the federation file: the link adds its one-way
latency over the local path, and the path's narrowest hop (a node's interface on its
site's fabric, a link, a credit link's ceiling: `Federation.path_between`) caps
serialisation. A message cannot have
more than the host's TCP send buffer in flight (net.ipv4.tcp_wmem, read at
calibration): every full buffer of it waits one more round trip for
acknowledgements, and a stream of messages runs at most at buffer / RTT. (geofed's
MPICH speaks UCX over TCP; its netbench curves show no rendezvous step below that
size, docs/model.md.) Everything local (the software floor of MPI over TCP, the
local fabric's effective rate) is a measured constant from a one-site run
(`Calibration`), never fitted to inter-site runs. Two more things a calibration
says about the path, not the link: over TCP a frame carries its payload share of the
link's rate (1448 of 1514 bytes), and on the testbed a crossing costs the host's own
`crossing_us` (`testbed verify`; zero on a real federation).

A fresh TCP stream (staging a data set, a bulk copy) starts in slow start: its window
doubles every round trip from the initial 10 segments, so a transfer of B bytes over
a link of BDP bytes pays about log2(min(B, BDP) / 14.6 kB) round trips before it runs
at the link's rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from geofed.federation import TCP_PAYLOAD_PER_WIRE_BYTE, Federation
from geofed.model.calibration import Calibration

INITIAL_WINDOW_BYTES = 10 * 1460  # Linux initcwnd (RFC 6928)
MATHIS_C = math.sqrt(3 / 2)  # Mathis et al. 1997: rate = MSS / RTT * C / sqrt(loss)
MSS_BYTES = 1448


@dataclass(frozen=True)
class Route:
    """What lies between a node at site `a` and a node at site `b`."""

    a: str
    b: str
    one_way_s: float  # the federation's model: propagation plus local fabrics
    extra_one_way_s: float  # what the link adds over a path inside site a
    rate_Bps: float | None  # the narrowest hop's rate (bytes/s), node interfaces included; None: not capped
    links_rate_Bps: float | None  # the narrowest link's, which flows between other nodes share too
    loss: float  # probability a frame is lost on the way

    def share_Bps(self, flows: int) -> float | None:
        """The rate one of `flows` messages between different pairs of nodes gets: the links
        are one medium, shared; each pair's own interfaces are not."""
        shared = None if self.links_rate_Bps is None else self.links_rate_Bps / flows
        rates = [r for r in (self.rate_Bps, shared) if r]
        return min(rates) if rates else None

    @property
    def crosses_link(self) -> bool:
        return self.a != self.b

    @property
    def rtt_s(self) -> float:
        return 2 * self.one_way_s


def route(fed: Federation, a: str, b: str, cal: Calibration | None = None, transport: str | None = None) -> Route:
    """The federation's path from site a to b; with a calibration, as messages over
    `transport` (default: MPI's, the calibration's) see it: the host's crossing cost
    added, and over TCP the payload's share of the rate."""
    path = fed.path_between(a, b)
    one_way = path.one_way_ms / 1e3
    local = fed.one_way_ms(a, a) / 1e3
    one_way += cal.crossing_us / 1e6 if cal is not None and a != b else 0.0
    # over TCP a frame carries its payload's share of every hop's rate
    share = TCP_PAYLOAD_PER_WIRE_BYTE if cal is not None and a != b and (transport or cal.transport) == "tcp" else 1.0
    rate, links_rate = (None if gbps is None else gbps * 1e9 / 8 * share
                        for gbps in (path.bandwidth_gbps, path.links_gbps))
    return Route(a, b, one_way, max(0.0, one_way - local), rate, links_rate, path.loss)


def serialisation_s(nbytes: float, rate_Bps: float | None) -> float:
    return 0.0 if not rate_Bps else nbytes / rate_Bps


def mpi_message_s(fed: Federation, cal: Calibration, a: str, b: str, nbytes: float, flows: int = 1) -> float:
    """One-way time of an MPI message of `nbytes` from a rank at site a to one at site b,
    when `flows` such messages between other pairs of ranks cross the link at once.

    The local part is the one-site measurement at this size (floor and local rate
    included): every message has its own local path; the link adds `crossing_s`.
    """
    local = cal.local_latency_s(a, nbytes)
    if a == b:
        return local
    # the one-site curve already holds the local path's serialisation of this size
    latency, bandwidth = crossing_s(fed, cal, a, b, nbytes, local - cal.local_latency_s(a, 1), flows)
    return local + latency + bandwidth


def crossing_s(fed: Federation, cal: Calibration, a: str, b: str, nbytes: float, local_serial_s: float,
               flows: int = 1) -> tuple[float, float]:
    """What a link adds to a message of `nbytes` from site a to site b over its path inside
    site a, whose serialisation takes `local_serial_s`: (latency, bandwidth) in seconds.
    Latency: the link's extra one-way time and a round trip per full send buffer; bandwidth:
    the excess of serialising all `flows` messages at the link's rate (it is one medium,
    shared; each pair's own interfaces are not) over the local serialisation, and the
    emulator's store and forward."""
    r = route(fed, a, b, cal)
    if not r.crosses_link:
        return 0.0, 0.0
    excess = max(0.0, serialisation_s(nbytes, r.share_Bps(flows)) - local_serial_s)
    windows = 2 * r.extra_one_way_s * (nbytes // cal.tcp_window_bytes) if cal.transport == "tcp" else 0.0
    return r.extra_one_way_s + windows, excess + _store_and_forward_s(cal, a, nbytes)


def _store_and_forward_s(cal: Calibration, a: str, nbytes: float) -> float:
    """The testbed's emulator takes in a whole frame before the link serialises it; with
    GSO a frame is up to `crossing_frame_bytes` of the message, so that much of it crosses
    the local path and the link one after the other, not overlapped. (A real link's
    frames are a few KiB: nothing to see.)"""
    if not cal.crossing_frame_bytes:
        return 0.0
    return cal.local_latency_s(a, min(nbytes, cal.crossing_frame_bytes)) - cal.local_latency_s(a, 1)


def stream_cap_Bps(fed: Federation, cal: Calibration, a: str, b: str) -> float:
    """Rate of back-to-back messages from site a to b: the bottleneck, or one send buffer per round trip."""
    r = route(fed, a, b, cal)
    caps = [cal.local_rate_Bps(a)] + ([cal.tcp_window_bytes / r.rtt_s] if cal.transport == "tcp" else [])
    if r.rate_Bps:
        caps.append(r.rate_Bps)
    return min(caps)


def slow_start_rounds(nbytes: float, bdp: float) -> int:
    """Round trips a fresh TCP stream spends growing its window to cover min(nbytes, BDP)."""
    target = min(nbytes, bdp)
    if target <= INITIAL_WINDOW_BYTES:
        return 0
    return math.ceil(math.log2(target / INITIAL_WINDOW_BYTES + 1)) - 1


def stream_rate_Bps(r: Route, streams: int = 1) -> float | None:
    """Steady rate of `streams` TCP streams on the route: the link rate, or Mathis' loss limit."""
    if r.loss <= 0:
        return r.rate_Bps
    limit = streams * MSS_BYTES / r.rtt_s * MATHIS_C / math.sqrt(r.loss)
    return limit if r.rate_Bps is None else min(limit, r.rate_Bps)


def fresh_stream_s(fed: Federation, cal: Calibration, a: str, b: str, nbytes: float, streams: int = 1) -> float:
    """Time to move `nbytes` over new TCP connection(s): handshake, slow start, then the rate."""
    r = route(fed, a, b, cal, transport="tcp")
    rate = stream_rate_Bps(r, streams)
    bdp = (rate or 0.0) * r.rtt_s
    per_stream = nbytes / streams
    rounds = slow_start_rounds(per_stream, bdp / streams)
    # bytes already delivered while the window grew: IW + 2 IW + ... per stream
    in_slow_start = min(per_stream, INITIAL_WINDOW_BYTES * (2 ** rounds - 1)) * streams
    return r.rtt_s * (1 + rounds) + serialisation_s(nbytes - in_slow_start, rate) + r.one_way_s
