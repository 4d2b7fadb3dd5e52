"""Report sections for the testbed: verification and the link emulator's accuracy."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, num, section, table


def _meta(r: Record) -> str:
    m = r.meta
    return f"<p class='meta'>{esc(m.get('federation', ''))} · {esc(r.created)} · {esc(r.host)}</p>"


@section("testbed.verify", "Testbed verification: configured against measured", order=10)
def verify(records: list[Record], outdir: Path) -> str:
    r = records[-1]
    rows, classes = [], []
    for p in r.data.pairs:
        rtt, tp = p["rtt_ms"], p["throughput_mbps"]
        cpu = p.get("host_cpu_ms_per_MB")  # records before 2026-11-26 lack it
        rows.append([f"{p['src']} → {p['dst']}", p["class"], f"{rtt['configured']:.4f}", f"{rtt['min']:.4f}",
                     f"{rtt['median']:.4f}", f"{rtt['p99']:.4f}", num(tp["configured"], ".0f"), f"{tp['measured']:.0f}",
                     num(cpu, ".2f"), "ok" if rtt["ok"] and tp["ok"] else "FAIL"])
        classes.append("" if rtt["ok"] and tp["ok"] else "fail")
    head = ["pair", "class", "RTT configured [ms]", "min", "median", "p99",
            "throughput configured [Mb/s]", "measured", "host CPU [ms/MB]", "verdict"]
    return _meta(r) + table(head, rows, classes)


@section("bench.link", "Link emulator accuracy", order=20)
def link_accuracy(records: list[Record], outdir: Path) -> str:
    r = records[-1]
    d = r.data
    out = [_meta(r)]
    out.append(table(
        ["configured RTT [ms]", "median [ms]", "p99 [ms]", "median error", "p99 error"],
        [[f"{x['configured_ms']:g}", f"{x['median_ms']:.4f}", f"{x['p99_ms']:.4f}",
          f"{x['median_error']:+.1%}", f"{x['p99_error']:+.1%}"] for x in d.rtt]))
    out.append(table(
        ["configured [Gb/s]", "streams", "measured [Gb/s]", "ratio"],
        [[f"{x['configured_gbps']:g}", x["streams"], f"{x['measured_gbps']:.3f}", f"{x['ratio']:.1%}"]
         for x in d.throughput]))
    for ways, title in ((d.distributions, "each way with jitter and loss"), (d.asymmetric, "an asymmetric link")):
        if ways is not None:
            out.append(_ways(ways, title))
    if d.rtt:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        conf = [x["configured_ms"] for x in d.rtt]
        ax.loglog(conf, conf, "k--", label="configured")
        ax.loglog(conf, [x["median_ms"] for x in d.rtt], "o", label="median")
        ax.loglog(conf, [x["p99_ms"] for x in d.rtt], "x", label="p99")
        ax.set_xlabel("configured RTT [ms]")
        ax.set_ylabel("measured RTT [ms]")
        ax.legend()
        out.append(figure(fig, outdir, "link-rtt.png", "measured against configured RTT"))
    return "\n".join(out)


def _ways(w: dict, title: str) -> str:
    """One row per direction: delivered against configured (one-way delay, jitter, rate), and the loss."""
    rows = [[f"from {x['from']}", f"{x['propagation_us']:.1f}", f"{x['jitter_us']:g}", f"{x['loss']:g}",
             f"{x['min_us']:.1f}", f"{x['median_us']:.1f}", f"{x['contribution_error']:+.1%}",
             f"{x['jitter_median_us']:.1f} ({x['jitter_expected_mean_us']:.1f})",
             f"{x['jitter_iqr_us']:.1f} ({x['jitter_expected_iqr_us']:.1f})",
             f"{x['jitter_mean_us']:.1f} / {x['jitter_sd_us']:.1f}",
             f"{x['measured_gbps']:.3f} of {x['bandwidth_gbps']:g}" if "measured_gbps" in x else "-"]
            for x in w["ways"]]
    head = ["way", "fibre [us]", "jitter [us]", "loss", "min [us]", "median [us]", "link error",
            "jitter median (uniform's)", "IQR (uniform's)", "mean / sd", "TCP [Gb/s]"]
    # Records made since the probe told late echoes from lost ones carry both.
    late_and_dropped = "" if "late" not in w else (
        f"; late (the host stalled past the timeout) {w['late']}; emulator dropped "
        + ", ".join(f"{esc(way)} {n}" for way, n in w["emulator_dropped"].items()))
    lost = (f"<p>{esc(title)}: round trips lost {w['lost']} of {w['round_trips']} ({w['lost_fraction']:.2%}; "
            f"expected {w['expected_lost_fraction']:.2%} ± {w['lost_sd']:.2%}){late_and_dropped}</p>")
    return lost + table(head, rows)
