"""`geofed bench link`: how faithfully the link emulator reproduces a configured link.

For each configured RTT a two-site testbed is brought up and measured with the UDP
probe (round trips) and with MPI (1-byte ping-pong, one-way), each beside its floor
(the same path with the emulator holding nothing but a short fixed hold, measured by
`up` and bench.floor), so the link's own contribution (measured - floor) is held
against the fibre's propagation; for each configured rate, TCP throughput with 1 and
4 streams.
The testbeds are described by federation files like any other (written to a
temporary directory), so the emulator is driven exactly as `testbed up` drives it.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from pathlib import Path
from typing import Callable

from geofed import federation, records
from geofed.stats import percentile
from geofed.bench import floor
from geofed.testbed import core, live, probe
from geofed.testbed.plan import make_plan

BENCH_NAME = "bench-link"


def two_site_toml(rtt_ms: float, gbps: float, name: str = BENCH_NAME, a_nodes: int = 1,
                  local_latency_us: float = 0.0) -> str:
    """Sites A and B joined by one link. The benchmark's own default has no local
    latency or local shaping: what is measured is the link alone."""
    return f"""
name = "{name}"
description = "two sites joined by one emulated link"
[local]
latency_us = {local_latency_us}
[[site]]
code = "A"
nodes = {a_nodes}
[[site]]
code = "B"
nodes = 1
[[link]]
sites = ["A", "B"]
rtt_ms = {rtt_ms}
bandwidth_gbps = {gbps}
"""


def _with_testbed(toml: str, measure: Callable, progress) -> object:
    """measure(fed, a, b) on a fresh testbed of the federation `toml` (named BENCH_NAME)."""
    with tempfile.TemporaryDirectory(prefix="geofed-") as tmp:
        path = Path(tmp) / f"{BENCH_NAME}.toml"
        path.write_text(toml)
        fed = federation.load(path)
        with core.owned(fed, progress) as plan:
            a, b = plan.nodes
            return measure(fed, a, b)


def rtt_row(fed, a, b, count: int) -> dict:
    """Probe and MPI on one link: measured, floor, the link's contribution, against the fibre."""
    link = fed.links[0]
    samples, lost = probe.rtt_samples_ms(a, b, count=count)
    med, p99 = statistics.median(samples), percentile(samples, 99)
    return {
        "configured_ms": link.rtt_ms, "propagation_us": link.propagation_ms * 1e3, "samples": len(samples),
        "lost": lost, "min_ms": min(samples), "median_ms": med, "p99_ms": p99,
        "median_error": med / link.rtt_ms - 1, "p99_error": p99 / link.rtt_ms - 1,
        **floor.measure_link(fed, a, b, count),
    }


def ways_toml(name: str, forward: dict, back: dict) -> str:
    """Sites A and B joined by one link whose two directions differ: `forward` (A to B)
    and `back` hold fibre_km, bandwidth_gbps and optionally jitter_us and loss."""
    def keys(d: dict) -> str:
        return "\n".join(f"{k} = {v!r}" for k, v in d.items())
    return f"""
name = "{name}"
description = "two sites joined by one asymmetric emulated link"
[local]
latency_us = 0.0
[[site]]
code = "A"
nodes = 1
[[site]]
code = "B"
nodes = 1
[[link]]
sites = ["A", "B"]
{keys(forward)}
[link.back]
{keys(back)}
"""


# Measured by `geofed bench link` and tests/testbed/test_link_ways.py: one link whose
# directions differ in every respect, and one whose directions differ in delay and rate
# without loss, so TCP can show each way's rate.
DISTRIBUTIONS = ({"fibre_km": 200.0, "bandwidth_gbps": 1.0, "jitter_us": 200.0, "loss": 0.01},
                 {"fibre_km": 200.0, "bandwidth_gbps": 1.0, "jitter_us": 400.0, "loss": 0.02})
ASYMMETRIC = ({"fibre_km": 100.0, "bandwidth_gbps": 1.0}, {"fibre_km": 300.0, "bandwidth_gbps": 0.25})
# The emulator's counters of frames it did not pass on.
EMULATOR_DROPS = ("dropped_queue", "dropped_loss", "dropped_down", "credit_wait_overflow", "send_errors")


def ways_rows(fed, a, b, count: int, seconds: float = 0.0) -> dict:
    """Each direction of the link delivered against its configuration: one-way delays
    (the probe's round trips split at the echo), the jitter's distribution (uniform in
    [0, jitter]: mean and median jitter/2, sd jitter/sqrt(12), interquartile range
    jitter/2), round trips lost against the two ways' loss, and with `seconds` TCP
    goodput each way (4 streams)."""
    link = fed.links[0]
    state = core.read_state(make_plan(fed))
    floor_one_way_ms = state["emulators"][link.name]["floor"]["probe_rtt_ms"]["median"] / 2
    # A round trip that takes 4 times the configured one, jitter included, is given up on:
    # late if its echo still comes, lost if not.
    timeout_ms = math.ceil(4 * (link.rtt_ms + (link.way(link.a).jitter_us + link.way(link.b).jitter_us) / 1e3)) + 10
    before = live.counters(fed, link.name)
    trips = probe.round_trips(a, b, count=count, timeout_ms=timeout_ms)
    after = live.counters(fed, link.name)
    rows = []
    for src, (dst_node, samples) in ((link.a, (b, trips.forward)), (link.b, (a, trips.back))):
        way = link.way(src)
        prop, jitter = way.propagation_ms * 1e3, way.jitter_us
        us = [x * 1e3 for x in samples]
        extra = [x - prop - floor_one_way_ms * 1e3 for x in us]
        contribution = statistics.median(us) - floor_one_way_ms * 1e3
        row = {"from": src, "propagation_us": prop, "jitter_us": jitter, "loss": way.loss,
               "bandwidth_gbps": way.bandwidth_gbps, "samples": len(us), "floor_one_way_us": floor_one_way_ms * 1e3,
               "min_us": min(us), "median_us": statistics.median(us),
               "contribution_us": contribution, "contribution_error": contribution / (prop + jitter / 2) - 1,
               "jitter_mean_us": statistics.fmean(extra), "jitter_expected_mean_us": jitter / 2,
               "jitter_sd_us": statistics.stdev(extra), "jitter_expected_sd_us": jitter / math.sqrt(12),
               # Robust to the host's scheduling outliers, which move the mean and sd
               "jitter_median_us": statistics.median(extra), "jitter_iqr_us": percentile(extra, 75) - percentile(extra, 25),
               "jitter_expected_iqr_us": jitter / 2}
        if seconds:
            src_node = a if src == link.a else b
            mbps = probe.throughput_mbps(src_node, dst_node, streams=4, seconds=seconds, warmup=1.0)
            row.update(measured_gbps=mbps / 1e3, rate_ratio=mbps / 1e3 / way.bandwidth_gbps)
        rows.append(row)
    sent = count + probe.ARP_WARMUP
    p_trip = 1 - (1 - link.way(link.a).loss) * (1 - link.way(link.b).loss)
    # Frames the emulator itself did not pass on while the round trips ran, per way.
    dropped = {way: sum(after[way][k] - before[way][k] for k in EMULATOR_DROPS) for way in after}
    return {"ways": rows, "round_trips": sent, "lost": trips.lost, "late": trips.late,
            "emulator_dropped": dropped, "lost_fraction": trips.lost / sent,
            "expected_lost_fraction": p_trip, "lost_sd": math.sqrt(p_trip * (1 - p_trip) / sent)}


def run(rtts_ms: list[float], rates_gbps: list[float], streams: list[int], throughput_rtt_ms: float = 9.0,
        seconds: float = 5.0, progress: Callable[[str], None] = lambda m: None, ways: bool = True) -> dict:
    core.require_root("bench link")
    rtt_rows = []
    for rtt in rtts_ms:
        # Enough samples for a p99, at most ~6 s of round trips per point (one per ms).
        count = int(min(1000, max(200, 6000 / (rtt + 1))))
        progress(f"RTT {rtt:g} ms: {count} round trips")
        rtt_rows.append(_with_testbed(two_site_toml(rtt, max(rates_gbps or [1.0])),
                                      lambda fed, a, b: rtt_row(fed, a, b, count), progress))
    tput_rows = []
    for gbps in rates_gbps:
        def measure(a, b):
            return [probe.throughput_mbps(a, b, streams=n, seconds=seconds, warmup=2.0) for n in streams]
        progress(f"{gbps:g} Gb/s at {throughput_rtt_ms:g} ms RTT: {', '.join(map(str, streams))} streams")
        measured = _with_testbed(two_site_toml(throughput_rtt_ms, gbps), lambda fed, a, b: measure(a, b), progress)
        for n, mbps in zip(streams, measured):
            tput_rows.append({"configured_gbps": gbps, "rtt_ms": throughput_rtt_ms, "streams": n,
                              "measured_gbps": mbps / 1000, "ratio": mbps / 1000 / gbps})
    data = {"rtt": rtt_rows, "throughput": tput_rows}
    if ways:
        progress("each way of a link with jitter and loss: 3000 round trips")
        data["distributions"] = _with_testbed(ways_toml(BENCH_NAME, *DISTRIBUTIONS),
                                           lambda fed, a, b: ways_rows(fed, a, b, 3000), progress)
        progress(f"each way of an asymmetric link: 1000 round trips, TCP {seconds:g} s each way")
        data["asymmetric"] = _with_testbed(ways_toml(BENCH_NAME, *ASYMMETRIC),
                                        lambda fed, a, b: ways_rows(fed, a, b, 1000, seconds), progress)
    return records.make("bench.link", data)


def format_table(rec: records.Record) -> str:
    d = rec.data
    lines = ["# one-way [us]: fibre = propagation; link = median - floor; err = link / fibre - 1",
             "# RTT [ms]    fibre | probe: min  median  floor   link    err | MPI: min  median  floor   link    err"]
    for x in d.rtt:
        p, m = x["probe"], x["mpi"]
        lines.append(f"{x['configured_ms']:>10g} {x['propagation_us']:>8.1f} |"
                     f" {p['min_one_way_us']:>10.1f} {p['median_one_way_us']:>7.1f} {p['floor_one_way_us']:>6.1f}"
                     f" {p['contribution_us']:>6.1f} {p['contribution_us'] / x['propagation_us'] - 1:>+6.1%} |"
                     f" {m['min_one_way_us']:>8.1f} {m['median_one_way_us']:>7.1f} {m['floor_one_way_us']:>6.1f}"
                     f" {m['contribution_us']:>6.1f} {m['contribution_us'] / x['propagation_us'] - 1:>+6.1%}")
    lines.append("# configured [Gb/s]   RTT [ms]   streams   measured [Gb/s]   ratio")
    for x in d.throughput:
        lines.append(f"{x['configured_gbps']:>19g} {x['rtt_ms']:>10g} {x['streams']:>9} "
                     f"{x['measured_gbps']:>17.3f} {x['ratio']:>7.1%}")
    for key, ways in (("distributions", d.distributions), ("asymmetric", d.asymmetric)):
        if ways is not None:
            lines += format_ways(key, ways)
    return "\n".join(lines)


def late_and_dropped(w: dict) -> str:
    """The echoes that came after the timeout and the emulator's own drops per way, for
    records that have them (made since the probe told late from lost)."""
    if "late" not in w:
        return ""
    drops = ", ".join(f"{way} {n}" for way, n in w["emulator_dropped"].items())
    return f"; late (the host stalled past the timeout) {w['late']}; emulator dropped {drops}"


def format_ways(title: str, w: dict) -> list[str]:
    lines = [f"# {title}, one-way [us]: link = median - floor/2, held against fibre + jitter/2; jitter: "
             "median and interquartile range of one-way - fibre - floor/2 against uniform [0, jitter]",
             "# from  fibre  jitter  loss |    min  median   link    err | median (exp)   IQR (exp)   | Gb/s (of conf.)"]
    for x in w["ways"]:
        rate = f" {x['measured_gbps']:.3f} ({x['rate_ratio']:.1%})" if "measured_gbps" in x else ""
        lines.append(f"{x['from']:>6} {x['propagation_us']:>6.1f} {x['jitter_us']:>7g} {x['loss']:>5g} |"
                     f" {x['min_us']:>6.1f} {x['median_us']:>7.1f} {x['contribution_us']:>6.1f}"
                     f" {x['contribution_error']:>+6.1%} | {x['jitter_median_us']:>6.1f} ({x['jitter_expected_mean_us']:>5.1f})"
                     f" {x['jitter_iqr_us']:>6.1f} ({x['jitter_expected_iqr_us']:>5.1f}) |{rate}")
    lines.append(f"# round trips lost: {w['lost']} of {w['round_trips']} ({w['lost_fraction']:.2%}; expected "
                 f"{w['expected_lost_fraction']:.2%} +- {w['lost_sd']:.2%}){late_and_dropped(w)}")
    return lines

