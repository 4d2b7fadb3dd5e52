"""The MDFS job across nodes and sites: the `mdfs` workload's ranks (one per node).

1. Staging: the data set lives at the federation's storage site. The first rank
   there reads it; every other site's first rank receives it across the long-haul
   link, then shares it inside its site. Timed apart from the analysis.
2. Every rank prepares the same contrast variables and work units (deterministic).
3. The units are split into contiguous shares in proportion to each rank's speed:
   `speed` from the federation file (node cores x site speed), `calibrate` measured
   by counting a small sample, or `even`.
4. Each rank counts its share with the native kernel; rank 0 merges the maxima.
   The merge keeps the earliest tuple on equal IG, so no split changes the result.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np

from geofed import runtime
from geofed.apps.mdfs import core
from geofed.apps.mdfs.output import jsonable
from geofed.progress import Bar

SPLITS = ("speed", "calibrate", "even")  # how the tuples are shared among the ranks (step 3)
CALIBRATION_TUPLES = 30_000  # ~0.1 s of 2-D counting on one host core at n = 2000


def stage(comm, where: list[dict], storage: str | None, path: str) -> tuple[bytes, dict]:
    """The data file's bytes on every rank, moved site to site as in seed 000."""
    rank = comm.Get_rank()
    sites = list(dict.fromkeys(w["site"] for w in where))
    leaders = {s: min(w["rank"] for w in where if w["site"] == s) for s in sites}
    source = leaders.get(storage, 0)  # no rank at the storage site: rank 0 reads it
    t0 = time.perf_counter()
    blob = None
    if rank == source:
        with open(path, "rb") as f:
            blob = f.read()
        for s, lead in leaders.items():
            if lead != source:
                comm.send(len(blob), dest=lead, tag=11)
                comm.Send(np.frombuffer(blob, dtype=np.uint8), dest=lead, tag=12)
    elif rank in leaders.values():
        size = comm.recv(source=source, tag=11)
        buf = np.empty(size, dtype=np.uint8)
        comm.Recv(buf, source=source, tag=12)
        blob = buf.tobytes()
    t_link = time.perf_counter() - t0
    site_comm = comm.Split(sites.index(where[rank]["site"]), rank)
    blob = site_comm.bcast(blob, root=0)
    site_comm.Free()
    return blob, {"source_rank": source, "bytes": len(blob), "link_s": t_link,
                  "staging_s": time.perf_counter() - t0, "crossed_link": where[rank]["site"] != where[source]["site"]}


def node_speed(fed, node: str | None, ranks_on_node: int) -> float:
    """Cores x speed of the rank's node, shared by the ranks on it."""
    if fed is None or node is None:
        return 1.0
    site = fed.site(node[0])
    return site.cores_per_node * site.speed / ranks_on_node


def calibrate(prep: core.Prepared, params: core.Params, threads: int) -> float:
    """Tuples per second of this rank on the first units (a throwaway counter)."""
    sample, w = [], 0
    for u in prep.units:
        sample.append(u)
        w += u[3]
        if w >= CALIBRATION_TUPLES:
            break
    counter = core.Counter(prep, params)
    return w / counter.run(sample, threads)


def analyse(comm, data: str, params: core.Params, split: str, threads: int, progress: bool) -> dict | None:
    """Every rank's part of the analysis of the npz file at `data`; rank 0 returns the
    merged result, arrays as lists (core.from_json makes them arrays again), the others None."""
    rank = comm.Get_rank()
    where = runtime.rank_map(comm)
    fed = runtime.federation()
    blob, staging = stage(comm, where, fed.storage if fed else None, data)
    with np.load(io.BytesIO(blob)) as z:
        x, y = z["x"], z["y"]
    prep = core.prepare(x, y, params)

    ranks_here = sum(1 for w in where if w["node"] == where[rank]["node"])
    threads = threads or max(1, round(fed.site(where[rank]["node"][0]).cores_per_node / ranks_here)
                             if fed and where[rank]["node"] else 1)
    if split == "even":
        mine = 1.0
    elif split == "speed":
        mine = node_speed(fed, where[rank]["node"], ranks_here)
    else:
        runtime.quiet_barrier(comm)
        mine = calibrate(prep, params, threads)
    weights = comm.allgather(mine)
    share = core.split(prep.units, weights)[rank]

    counter = core.Counter(prep, params)
    runtime.quiet_barrier(comm)  # everyone staged and prepared: the analysis starts now
    t0 = time.perf_counter()

    bar = Bar("mdfs rank 0: its share of the tuples") if progress and rank == 0 else None
    count_s = counter.run(share, threads, bar)
    mine_out = {"rank": rank, "node": where[rank]["node"], "site": where[rank]["site"], "weight": mine,
                "threads": threads, "tuples": int(sum(u[3] for u in share)), "units": len(share),
                "count_s": count_s, "staging": staging, "result": counter.results()}
    runtime.quiet_barrier(comm)
    compute_s = time.perf_counter() - t0
    parts = comm.gather(mine_out, root=0)
    if rank != 0:
        return None
    merged = core.merge([p.pop("result") for p in parts])
    result = core.finish(prep, merged, params, {"compute_s": compute_s,
                                                "staging_s": max(p["staging"]["staging_s"] for p in parts)})
    return jsonable({**result, "ranks": parts, "split": split})


def run_on_placement(fed, placement, data: Path, params: core.Params, split: str = "speed", threads: int = 0,
                     timeout: float | None = None, progress: bool = False, hostfile: str | None = None) -> dict:
    """One MDFS job on `placement` (the testbed, or a real cluster's hostfile) with the data
    set's npz file at `data`; the merged result with per-rank timings. A failed job raises JobFailed."""
    from geofed.launch import runner
    result = runner.run_ranks(fed, placement, "mdfs", {"data": str(data), "analysis": params.as_dict(), "split": split,
                                                       "threads": threads, "progress": progress},
                              hostfile=hostfile, timeout=timeout, what=f"mdfs on {placement.code}",
                              cpu_limit=True)  # under the nodes' CPU quota: the sites' speeds are what is split
    return core.from_json(result)
