"""The rank side of `geofed bench matrix` (and of each `geofed monitor` sample).

One rank per node. For every pair of nodes (or the pairs named with --pairs), the
two ranks run the latency and bw kernels of `geofed.bench.mpi` at one size each,
with the same planning, budget and data check; every other rank waits in a barrier
that sleeps. Rank 0 returns the data of a `bench.matrix` record: per pair its class,
latency (min and median, us), bandwidth (MB/s) and the link model. Its ranks run under
geofed's one entry point as the `matrix` workload.
"""

from __future__ import annotations

from datetime import datetime, timezone
from itertools import combinations

from mpi4py import MPI

from geofed import runtime
from geofed.bench import model, mpi, suite
from geofed.errors import UserError


def pair_indices(nodes: list[str], wanted: str | None) -> list[tuple[int, int]]:
    """Rank pairs to measure: every pair, or those named like 'W1-G1,W1-W2'."""
    if not wanted:
        return list(combinations(range(len(nodes)), 2))
    out = []
    for item in wanted.split(","):
        ends = item.strip().split("-")
        if len(ends) != 2 or any(e not in nodes for e in ends) or ends[0] == ends[1]:
            raise UserError(f"--pairs {item!r}: expected two different nodes of the job like W1-G1 "
                            f"(the job has {', '.join(nodes)})")
        out.append((nodes.index(ends[0]), nodes.index(ends[1])))
    return out


def measure(world, pairs_wanted: str | None, latency_size: int, bw_size: int, budget: float) -> dict | None:
    """Every rank takes part; rank 0 prints each pair's row as it is measured and returns
    the bench.matrix data, the other ranks None."""
    if world.Get_rank() == 0:
        print(HEADER, flush=True)
    if world.Get_size() < 2:
        raise UserError(f"the matrix needs at least 2 nodes; this job has {world.Get_size()} rank")
    where = runtime.rank_map(world)
    nodes = [w["node"] or w["host"] for w in where]
    if len(set(nodes)) != len(nodes):
        raise UserError("the matrix runs one rank per node; this job has several ranks on one node")
    fed = runtime.federation()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    pairs = []
    opts = suite.Measure(budget=budget)
    for i, j in pair_indices(nodes, pairs_wanted):
        rows = mpi.measure_between(world, i, j, [("latency", latency_size), ("bw", bw_size)], opts)
        row = None
        if rows:
            lat, bw = rows["latency"], rows["bw"]
            row = {"latency_us": lat["stats"]["p50"], "latency_min_us": lat["stats"]["min"],
                   "latency_mean_us": lat["value"], "bw_MBps": bw["value"],
                   "iterations": [lat["iterations"], bw["iterations"]], "wrong": lat["wrong"] + bw["wrong"]}
        # The measuring rank i hands its row to rank 0, which writes the record.
        if world.Get_rank() == i and i != 0:
            world.send(row, dest=0, tag=7)
        elif world.Get_rank() == 0 and i != 0:
            row = world.recv(source=i, tag=7)
        if world.Get_rank() == 0:
            a, b = where[i], where[j]
            pclass = runtime.pair_class(nodes[i], nodes[j])
            pm = model.pair_model(fed, a["site"], b["site"]) if pclass != "intra-node" else None
            row.update(a=nodes[i], b=nodes[j], **{"class": pclass}, model=pm,
                       model_latency_us=model.expected("latency", latency_size, pm, suite.WINDOW),
                       model_bw_MBps=model.expected("bw", bw_size, pm, suite.WINDOW))
            pairs.append(row)
            print(format_row(row), flush=True)
    if world.Get_rank() != 0:
        return None
    return {"placement": runtime.placement(), "nodes": nodes, "latency_size": latency_size, "bw_size": bw_size,
            "window": suite.WINDOW, "budget_s": budget, "started": started,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "mpi_library": MPI.Get_library_version().splitlines()[0].strip(), "pairs": pairs}


def format_row(p: dict) -> str:
    def ratio(x, m):
        return f"{x / m:>6.3f}" if m else f"{'-':>6}"
    return (f"{p['a']:>4} {p['b']:>4} {p['class']:<10} {p['latency_us']:>10.2f} {p['model_latency_us'] or 0:>10.2f} "
            f"{ratio(p['latency_us'], p['model_latency_us'])} {p['bw_MBps']:>9.1f} {p['model_bw_MBps'] or 0:>9.1f} "
            f"{ratio(p['bw_MBps'], p['model_bw_MBps'])}{'  DATA WRONG' if p['wrong'] else ''}")


HEADER = (f"{'a':>4} {'b':>4} {'class':<10} {'lat [us]':>10} {'model':>10} {'ratio':>6} "
          f"{'bw [MB/s]':>9} {'model':>9} {'ratio':>6}")
