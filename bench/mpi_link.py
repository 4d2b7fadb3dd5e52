#!/usr/bin/env python3
"""Each MPI across each federation's link, side by side in one run: 1-byte latency against
the fibre and 4 MiB bandwidth against the link.

For every federation (default icm-task and ma-hd) a copy under its own name is brought up;
between the first nodes of the link's two sites, each MPI in turn (GEOFED_MPI: MPICH, Open
MPI), round after round so both see the same machine:

  latency    1-byte ping-pong, one-way, in interleaved blocks with the emulator holding the
             fibre and holding only the floor's fixed hold (geofed.bench.floor, as `bench link`
             states it): link = median - floor, err = link / fibre - 1 (the target: 5 %)
  bandwidth  OSU's bw at 4 MiB (window 64) from the first site to the second: the median MB/s
             over the link's rate (the target: within 10 %), over the model's value for
             the window (the round trip that ends each window), and over plain TCP's
             ceiling between the same nodes in the same round (one iperf3 stream): where
             this host cannot carry the link's rate, the ceiling is what the MPIs are held to

    sudo .venv/bin/python bench/mpi_link.py [--federations icm-task,ma-hd] [--mpis mpich,openmpi]
                                            [--rounds 3] [--out DIR]

Prints the table (medians over the rounds; latency minima too) and the host's load, and
writes mpi_link.json with every round's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from geofed import federation
from geofed.bench import floor, model
from geofed.launch import mpi, runner
from geofed.launch.placement import parse
from geofed.ops import transfer_bench
from geofed.testbed import core
from geofed.testbed.plan import make_plan

SIZE = 4 << 20
WINDOW = 64
TCP_SECONDS = 2.0  # an iperf3 run long enough to leave slow start far behind


def use(choice: str) -> mpi.Mpi:
    """Make `choice` the MPI of the jobs this process starts from now on."""
    os.environ[mpi.ENV] = choice
    mpi.current.cache_clear()
    return mpi.current()


def bandwidth(fed, a: str, b: str, iterations: int) -> dict:
    data = runner.run_ranks(fed, parse(f"{a}1{b}1", fed), "mpi",
                            {"benchmarks": "bw", "sizes": str(SIZE), "window": WINDOW, "iterations": iterations,
                             "warmup": 2, "budget": 30}, what="MPI bandwidth")
    (row,) = data["results"][0]["sizes"]
    return {"median_MBps": row["stats"]["p50"], "library": data["mpi_library"]}


def measure(fed, mpis: list[str], rounds: int, count: int, iterations: int) -> dict:
    link = fed.links[0]
    pmodel = model.pair_model(fed, link.a, link.b)
    out = {m: {"latency": [], "bandwidth": []} for m in mpis}
    plan = make_plan(fed)
    a, b = plan.node(f"{link.a}1"), plan.node(f"{link.b}1")
    tcp = []
    tcp_bytes = int(pmodel["bandwidth_MBps"] * 1e6 * TCP_SECONDS)
    with transfer_bench.peer_servers(plan, a.node.name, b.node.name, peers=(), source=None):
        for r in range(rounds):
            tcp.append(transfer_bench.iperf3(plan, a.node.name, b.node.name, 1, tcp_bytes)["rate_mbps"] / 8)
            for m in mpis:
                out[m]["name"] = use(m).name
                print(f"round {r + 1}/{rounds}: {fed.name}, {out[m]['name']}", flush=True)
                out[m]["latency"].append(floor.measure_link(fed, a, b, count)["mpi"])
                out[m]["bandwidth"].append(bandwidth(fed, link.a, link.b, iterations))
    return {"link": link.name, "propagation_us": link.propagation_ms * 1e3, "rate_MBps": pmodel["bandwidth_MBps"],
            "model_bw_MBps": model.expected("bw", SIZE, pmodel, WINDOW), "tcp_MBps": tcp, "mpis": out}


def rows(fed_name: str, d: dict) -> list[str]:
    lines = []
    for m, x in d["mpis"].items():
        lat, bw = x["latency"], x["bandwidth"]
        contribution = statistics.median(v["contribution_us"] for v in lat)
        mbps = statistics.median(v["median_MBps"] for v in bw)
        lines.append(
            f"| {fed_name} | {x['name']} | {d['propagation_us']:.1f} | {min(v['min_one_way_us'] for v in lat):.1f} | "
            f"{statistics.median(v['median_one_way_us'] for v in lat):.1f} | "
            f"{statistics.median(v['floor_one_way_us'] for v in lat):.1f} | {contribution:.1f} | "
            f"{contribution / d['propagation_us'] - 1:+.1%} | {mbps:.1f} | {d['rate_MBps']:.0f} | "
            f"{mbps / d['rate_MBps']:.3f} | {mbps / d['model_bw_MBps']:.3f} | "
            f"{statistics.median(d['tcp_MBps']):.1f} | {mbps / statistics.median(d['tcp_MBps']):.3f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--federations", default="icm-task,ma-hd")
    ap.add_argument("--mpis", default="mpich,openmpi")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=300, help="1-byte round trips per latency measurement")
    ap.add_argument("--iterations", type=int, default=5, help="timed windows of the 4 MiB bandwidth")
    ap.add_argument("--out", default="geofed-out/bench")
    args = ap.parse_args()
    core.require_root("bench/mpi_link.py")
    mpis = args.mpis.split(",")
    for m in mpis:
        use(m)  # an MPI that is not installed is refused before any testbed comes up
    load_before = os.getloadavg()
    results = {}
    for name in args.federations.split(","):
        shipped = federation.load(name)
        with core.owned_copy(shipped, "gfmpilink") as fed:
            results[name] = measure(fed, mpis, args.rounds, args.count, args.iterations)
    load_after = os.getloadavg()
    lines = ["| federation | MPI | fibre | min | median | floor | link | err | 4 MiB MB/s | link MB/s | of link | of model "
             "| TCP MB/s | of TCP |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, d in results.items():
        lines += rows(name, d)
    print("one-way us: link = median - floor, err = link / fibre - 1; medians over rounds, min the minimum")
    print("\n".join(lines))
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "mpi_link.json").write_text(json.dumps(
        {"results": results, "load_before": load_before, "load_after": load_after}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
