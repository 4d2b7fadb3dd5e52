#!/usr/bin/env python3
"""Where the staging's link time goes: one SST writer fanning a step out to two readers across the link.

The Gray-Scott workflow's consumers together reach about half of the link (docs/grayscott.md).
This isolates the fan-out from the simulation and the analysis: a writer at a node of site
G publishes U and V (2 x L^3 doubles) every --gap seconds; two readers at two nodes of site
W each read the whole step. Per step and reader, the delivery (publication to data in the
reader's memory, on the host's common clock), and both readers' bytes over the time until
the later one had the step ("together"). Variants, side by side in one run:

  one stream      one SST stream with two readers (the workflow's layout)
  two streams     a stream per reader, both written by the same process
  two writers     a stream per reader, each written by its own process (same node)
  preload         SST's SpeculativePreloadMode ON (the writer pushes the step unasked)
  tcp             the same bytes over plain TCP sockets, a connection per reader, sent
                  when the reader asks: the network's ceiling for this pattern

    sudo .venv/bin/python bench/grayscott_fanout.py [--L 128] [--steps 8] [--out DIR]

Prints a table and writes fanout.json. The testbed is a copy of icm-task under its own name,
always taken down.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VARIANTS = {  # name -> (writer processes, streams per writer, preload)
    "one stream": (1, 1, "OFF"),
    "two streams": (1, 2, "OFF"),
    "two writers": (2, 1, "OFF"),
    "one stream, preload": (1, 1, "ON"),
    "two writers, preload": (2, 1, "ON"),
}


def fields(L: int):
    rng = np.random.default_rng(0)
    return {"U": rng.random((L, L, L)), "V": rng.random((L, L, L))}


# ---------------------------------------------------------------- the two roles


def at_slot(a, k: int) -> None:
    """Every writer process of a variant publishes a step at the same instant, as after one gather."""
    from geofed.apps.grayscott import ceiling
    ceiling.at_slot(a.start, a.gap, k)


def sst_writer(a) -> None:
    from geofed.apps.grayscott import stream
    names = [f"s{a.index + i}" for i in range(a.streams)]
    writers = [stream.Writer(f"{a.dir}/{n}", "SST", 2 // (a.streams * a.writers), {"U": (a.L,) * 3, "V": (a.L,) * 3}, 60,
                             params={"SpeculativePreloadMode": a.preload}) for n in names]
    data, published = fields(a.L), []
    for k in range(a.steps):
        at_slot(a, k)  # the simulation's compute between outputs; writers publish together
        published.append([w.write(k, data).published for w in writers])
    for w in writers:
        w.close()
    Path(a.dir, f"writer{a.index}.json").write_text(json.dumps(published))


def sst_reader(a) -> None:
    from geofed.apps.grayscott import stream
    name = "s0" if a.streams * a.writers == 1 else f"s{a.index}"
    r = stream.Reader(f"{a.dir}/{name}", "SST", ["U", "V"], 60, params={"SpeculativePreloadMode": a.preload})
    rows = [(x.step, x.arrived, x.bytes) for x in r.steps()]
    r.close()
    Path(a.dir, f"reader{a.index}.json").write_text(json.dumps(rows))


def tcp_writer(a) -> None:
    from geofed.apps.grayscott import ceiling
    published = ceiling.writer(a.address, 2, 2 * a.L ** 3 * 8, a.steps, a.gap, a.start)
    Path(a.dir, "writer0.json").write_text(json.dumps([[t, t] for t in published]))


def tcp_reader(a) -> None:
    from geofed.apps.grayscott import ceiling
    Path(a.dir, f"reader{a.index}.json").write_text(json.dumps(ceiling.reader(a.address, 2 * a.L ** 3 * 8, a.steps)))


# ---------------------------------------------------------------- the driver


def run_variant(plan, name: str, args, workdir: Path) -> dict:
    from geofed.apps.grayscott import stream
    from geofed.testbed import host
    d = workdir / name.replace(" ", "-").replace(",", "")
    d.mkdir()
    writer_node, readers = plan["writer"], plan["readers"]
    writers, streams, preload = VARIANTS.get(name, (1, 1, "OFF"))
    role = "tcp" if name == "tcp" else "sst"
    common = ["--dir", str(d), "--L", str(args.L), "--steps", str(args.steps), "--gap", str(args.gap),
              "--writers", str(writers), "--streams", str(streams), "--preload", preload,
              "--start", str(time.time() + 5),  # after every part has connected
              "--address", writer_node["address"]]
    me = [sys.executable, __file__]
    env = ["env", "GEOFED_STREAM_INTERFACE=eth0", f"PYTHONPATH={os.pathsep.join(sys.path)}"]
    pre = stream.preload_argv() if role == "sst" else []
    procs = [subprocess.Popen(host.in_netns(writer_node["netns"], [*pre, *env, *me, "--role", f"{role}-writer",
                                                                   "--index", str(i), *common]))
             for i in range(writers)]
    for i, node in enumerate(readers):
        procs.append(subprocess.Popen(host.in_netns(node["netns"], [*pre, *env, *me, "--role", f"{role}-reader",
                                                                    "--index", str(i), *common])))
    try:
        codes = [p.wait(timeout=120 + args.steps * (args.gap + 5)) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(codes):
        raise SystemExit(f"{name}: a part failed (exit statuses {codes}); logs above")
    # published[step]: the publication time of each stream, in reader order
    per_writer = [json.loads((d / f"writer{i}.json").read_text()) for i in range(writers)]
    published = [sum((w[k] for w in per_writer), []) for k in range(args.steps)]
    got = [json.loads((d / f"reader{i}.json").read_text()) for i in range(2)]
    deliveries = [[arrived - published[step][i if len(published[step]) > 1 else 0] for step, arrived, _ in rows]
                  for i, rows in enumerate(got)]
    together = []
    for (s, a0, n0), (_, a1, n1) in zip(*got):
        together.append((n0 + n1) * 8 / (max(a0, a1) - min(published[s])) / 1e6)
    # the first step pays the connections' slow start: medians over the rest
    return {"variant": name, "delivery_ms": [[round(x * 1e3, 1) for x in dl] for dl in deliveries],
            "median_delivery_ms": [statistics.median(dl[1:]) * 1e3 for dl in deliveries],
            "together_mbps": together, "median_together_mbps": statistics.median(together[1:]),
            "bytes_per_reader": got[0][0][2]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--writers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--streams", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--preload", default="OFF", help=argparse.SUPPRESS)
    ap.add_argument("--address", help=argparse.SUPPRESS)
    ap.add_argument("--L", type=int, default=128, help="cells per side: a step is 2 L^3 doubles (default 128: 33.6 MB)")
    ap.add_argument("--steps", type=int, default=8, help="steps per variant (default 8)")
    ap.add_argument("--gap", type=float, default=0.6, help="seconds between steps (default 0.6)")
    ap.add_argument("--variants", default=",".join([*VARIANTS, "tcp"]).replace(", ", "+"),
                    help="comma-separated, '+' for ', ' (default: all)")
    ap.add_argument("--out", default="geofed-out/fanout", help="directory for fanout.json")
    args = ap.parse_args()
    roles = {"sst-writer": sst_writer, "sst-reader": sst_reader, "tcp-writer": tcp_writer, "tcp-reader": tcp_reader}
    if args.role:
        roles[args.role](args)
        return 0

    from geofed import federation
    from geofed.testbed import core
    variants = [v.replace("+", ", ") for v in args.variants.split(",")]
    with tempfile.TemporaryDirectory(prefix="geofed-fanout-") as tmp:
        fed = federation.load(federation.derive(federation.load("icm-task"), tmp, "fanout"))
        plan = core.up(fed)
        try:
            nodes = {n.node.name: {"netns": n.netns, "address": n.address} for n in plan.nodes}
            roles_nodes = {"writer": nodes["G1"], "readers": [nodes["W1"], nodes["W2"]]}
            rows = []
            for v in variants:
                print(f"fanout: {v} ...", flush=True)
                rows.append(run_variant(roles_nodes, v, args, Path(tmp)))
        finally:
            core.down(fed.name)
    link = fed.links[0]
    print(f"\n{2 * args.L ** 3 * 8 / 1e6:.1f} MB per reader per step, {args.steps} steps every {args.gap:g} s, "
          f"link {link.rtt_ms:.4g} ms RTT, {link.bandwidth_gbps * 1000:.0f} Mb/s; medians without the first step")
    print(f"{'variant':24} {'delivery ms (reader 0 / 1)':>28} {'together Mb/s':>14} {'of link':>8}")
    for r in rows:
        d0, d1 = r["median_delivery_ms"]
        print(f"{r['variant']:24} {d0:>13.1f} / {d1:<12.1f} {r['median_together_mbps']:>14.0f} "
              f"{r['median_together_mbps'] / (link.bandwidth_gbps * 1000):>8.1%}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fanout.json").write_text(json.dumps({"L": args.L, "steps": args.steps, "gap_s": args.gap,
                                                 "link": {"rtt_ms": link.rtt_ms, "bandwidth_gbps": link.bandwidth_gbps},
                                                 "rows": rows}, indent=1))
    print(f"written: {out / 'fanout.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
