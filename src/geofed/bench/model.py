"""Theory beside measurement: what the federation file predicts for a benchmark.

A message of S bytes between two nodes takes the one-way latency L (fibre
propagation plus the local fabrics: seed 001's 145 = 143 + 2 us, RTT/2) plus its
serialisation S/B at the path's narrowest hop B (a node's interface on its site's
fabric, or a link: `Federation.path_between`). From that:

    latency(S) = L + S/B                       ping-pong, reported as RTT/2
    bw(S)      = W*S / (L + W*S/B + L)         a window of W messages, then a 1-byte ack back
    bibw(S)    = 2*W*S / (L + W*S/B)           both directions at once, no ack

so a window of 64 x 4 MiB reaches 98 % of a 4 Gb/s link at 9 ms RTT, and 64 x 1 KiB
reaches 1.4 %: the bandwidth-delay product (the bytes in flight to fill the link)
is what a bandwidth test at distance has to cover.
"""

from __future__ import annotations

from geofed.federation import Federation


def pair_model(fed: Federation | None, site_a: str | None, site_b: str | None) -> dict | None:
    """The model between nodes at two sites; None when nothing is known (intra-node, no file)."""
    if fed is None or not site_a or not site_b:
        return None
    try:
        path = fed.path_between(site_a, site_b)
    except KeyError:
        return None
    propagation_ms = sum(way.propagation_ms for way in path.ways)
    gbps = path.bandwidth_gbps
    bytes_per_us = None if gbps is None else gbps * 1e3 / 8
    return {
        "links": [link.name for link in fed.route(site_a, site_b)],
        "one_way_us": path.one_way_ms * 1e3,
        "propagation_us": propagation_ms * 1e3,
        "local_us": (path.one_way_ms - propagation_ms) * 1e3,
        "bandwidth_MBps": bytes_per_us,  # bytes per us = decimal MB/s, OSU's unit
        "bdp_bytes": fed.bdp_bytes(site_a, site_b),
    }


def expected(bench: str, size: int, model: dict | None, window: int) -> float | None:
    """The benchmark's value at `size` by the model (us or MB/s); None for collectives."""
    if model is None:
        return None
    lat, rate = model["one_way_us"], model["bandwidth_MBps"]
    serial = (lambda n: 0.0) if rate is None else (lambda n: n / rate)
    if bench == "latency":
        return lat + serial(size)
    if bench == "bw":
        return window * size / (2 * lat + serial(window * size))
    if bench == "bibw":
        return 2 * window * size / (lat + serial(window * size))
    return None
