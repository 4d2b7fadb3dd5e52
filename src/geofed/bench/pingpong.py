"""Rank 0 ping-pongs with every other rank and writes a `job.pingpong` record.

Run it under `geofed run`: every pair is labelled intra-node, intra-site or
inter-site from the placement and shown beside the federation's model RTT.
The round trips are the `latency` benchmark of the suite (geofed.bench.mpi): its C
kernel, time budget and data check.

    geofed run --no-cpu-limit --placement W2G1 -- python -m geofed.bench.pingpong --out rec.json

Ranks that are not in the pair being measured wait in a barrier that sleeps, so
they do not take the CPU from the two that are.
"""

from __future__ import annotations

import argparse
import sys

from mpi4py import MPI

from geofed import records, runtime
from geofed.bench import mpi, suite


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="geofed.bench.pingpong", description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1, help="message size in bytes (default 1)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=2.0, help="time budget per pair (timed iterations)")
    ap.add_argument("--out", help="write the record here (rank 0)")
    args = ap.parse_args(argv)

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print("geofed.bench.pingpong: needs at least 2 ranks", file=sys.stderr)
        return 2
    data = measure(comm, args.size, args.warmup, args.iterations, args.seconds)
    if data is None:
        return 0
    fed = runtime.federation()
    rec = records.make("job.pingpong", data, **(records.federation_meta(fed) if fed else {}))
    if args.out:
        with open(args.out, "w") as f:
            f.write(records.dumps(rec))
    print(table(data))
    return 0


def measure(comm, size: int, warmup: int, iterations: int, seconds: float) -> dict | None:
    """Rank 0's round trips with every other rank: the job.pingpong data on rank 0, None elsewhere."""
    where = runtime.rank_map(comm)
    fed = runtime.federation()
    opts = suite.Measure(iterations=iterations, warmup=warmup, budget=seconds)
    pairs = []
    for peer in range(1, comm.Get_size()):
        rows = mpi.measure_between(comm, 0, peer, [("latency", max(size, 1))], opts)
        if comm.Get_rank() == 0:
            row = rows["latency"]
            if row["wrong"]:
                # abort the job: the other ranks wait for the next pair and would hang until the timeout
                runtime.refuse("geofed.bench.pingpong", RuntimeError(f"rank {peer} returned corrupted data"), 1)
            st = {k: 2 * row["stats"][k] / 1e3 for k in ("min", "p50", "p99")}  # RTT/2 in us -> RTT in ms
            a, b = where[0], where[peer]
            model = fed.rtt_ms(a["site"], b["site"]) if fed and a["site"] and b["site"] else None
            pairs.append({
                "a": f"0@{a['node']}", "b": f"{peer}@{b['node']}",
                "class": runtime.pair_class(a["node"] or a["host"], b["node"] or b["host"]),
                "model_rtt_ms": model,
                "min_ms": st["min"], "median_ms": st["p50"], "p99_ms": st["p99"], "iterations": row["iterations"],
            })
    if comm.Get_rank() != 0:
        return None
    return {"placement": runtime.placement(), "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
            "message_bytes": size, "ranks": where, "pairs": pairs}


def table(data: dict) -> str:
    return "\n".join(f"{p['a']:>8} {p['b']:>8} {p['class']:>10} median {p['median_ms']:.4f} ms"
                     f" (model {p['model_rtt_ms'] or 0:.4f})" for p in data["pairs"])


if __name__ == "__main__":
    sys.exit(main())
