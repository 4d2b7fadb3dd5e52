"""Rank 0 ping-pongs with every other rank and writes a `job.pingpong` record.

Run it under `geofed run`: every pair is labelled intra-node, intra-site or
inter-site from the placement and shown beside the federation's model RTT.
Each reply is checked to carry the bytes that were sent.

    geofed run --no-cpu-limit --placement W2G1 -- python -m geofed.bench.pingpong --out rec.json

Ranks that are not in the pair being measured wait in a barrier that sleeps, so
they do not take the CPU from the two that are.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

from geofed import records, runtime
from geofed.stats import percentile


def measure(comm, peer: int, buf: np.ndarray, warmup: int, iterations: int, budget_s: float) -> list[float]:
    """Round trips in ms between rank 0 and `peer`; the other ranks stay out of it."""
    rank = comm.Get_rank()
    recv = np.empty_like(buf)
    samples = []
    stop = np.zeros(1, dtype=np.int8)
    t_end = None
    for i in range(warmup + iterations):
        if rank == 0:
            if i == warmup:
                t_end = time.perf_counter() + budget_s
            t0 = time.perf_counter()
            comm.Send(buf, dest=peer, tag=1)
            comm.Recv(recv, source=peer, tag=2)
            dt = time.perf_counter() - t0
            if not np.array_equal(recv, buf):
                raise RuntimeError(f"rank {peer} returned corrupted data")
            if i >= warmup:
                samples.append(dt * 1e3)
            # Bounded time on a long link: stop early once the budget is spent.
            stop[0] = t_end is not None and time.perf_counter() > t_end and len(samples) >= 5
            comm.Send(stop, dest=peer, tag=3)
            if stop[0]:
                break
        elif rank == peer:
            comm.Recv(recv, source=0, tag=1)
            comm.Send(recv, dest=0, tag=2)
            comm.Recv(stop, source=0, tag=3)
            if stop[0]:
                break
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="geofed.bench.pingpong", description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1, help="message size in bytes (default 1)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=2.0, help="time budget per pair")
    ap.add_argument("--out", help="write the record here (rank 0)")
    args = ap.parse_args(argv)

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print("geofed.bench.pingpong: needs at least 2 ranks", file=sys.stderr)
        return 2
    where = runtime.rank_map(comm)
    fed = runtime.federation()
    buf = (np.arange(max(args.size, 1)) % 251).astype(np.uint8)
    pairs = []
    for peer in range(1, comm.Get_size()):
        runtime.quiet_barrier(comm)
        samples = measure(comm, peer, buf, args.warmup, args.iterations, args.seconds)
        if comm.Get_rank() == 0:
            a, b = where[0], where[peer]
            model = 2 * fed.one_way_ms(a["site"], b["site"]) if fed and a["site"] and b["site"] else None
            pairs.append({
                "a": f"0@{a['node']}", "b": f"{peer}@{b['node']}",
                "class": runtime.pair_class(a["node"] or a["host"], b["node"] or b["host"]),
                "model_rtt_ms": model,
                "min_ms": min(samples), "median_ms": statistics.median(samples),
                "p99_ms": percentile(samples, 99), "iterations": len(samples),
            })
    if comm.Get_rank() == 0:
        data = {
            "placement": runtime.placement(),
            "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
            "message_bytes": args.size,
            "ranks": where,
            "pairs": pairs,
        }
        rec = records.make("job.pingpong", data, **(records.federation_meta(fed) if fed else {}))
        text = json.dumps(rec, indent=1)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        for p in pairs:
            print(f"{p['a']:>8} {p['b']:>8} {p['class']:>10} median {p['median_ms']:.4f} ms"
                  f" (model {p['model_rtt_ms'] or 0:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
