"""The MDFS job across nodes and sites: run under `geofed run` (one rank per node).

    geofed run -f FED -p G1W1 -- python -m geofed.apps.mdfs.dist --data D.npz --params P.json --out R.pkl

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

import argparse
import io
import json
import pickle
import sys
import time

import numpy as np
from mpi4py import MPI

from geofed import runtime
from geofed.apps.mdfs import core
from geofed.progress import Bar

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="geofed.apps.mdfs.dist", description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="npz with x, y (the copy at the storage site)")
    ap.add_argument("--params", required=True, help="JSON of core.Params")
    ap.add_argument("--split", choices=["speed", "calibrate", "even"], default="speed")
    ap.add_argument("--threads", type=int, default=0, help="per rank (default: its node's cores / ranks there)")
    ap.add_argument("--out", required=True, help="rank 0 writes the merged result here (pickle)")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    where = runtime.rank_map(comm)
    fed = runtime.federation()
    blob, staging = stage(comm, where, fed.storage if fed else None, args.data)
    with np.load(io.BytesIO(blob)) as z:
        x, y = z["x"], z["y"]
    params = core.Params(**json.loads(open(args.params).read()))
    prep = core.prepare(x, y, params)

    ranks_here = sum(1 for w in where if w["node"] == where[rank]["node"])
    threads = args.threads or max(1, round(fed.site(where[rank]["node"][0]).cores_per_node / ranks_here)
                                  if fed and where[rank]["node"] else 1)
    if args.split == "even":
        mine = 1.0
    elif args.split == "speed":
        mine = node_speed(fed, where[rank]["node"], ranks_here)
    else:
        runtime.quiet_barrier(comm)
        mine = calibrate(prep, params, threads)
    weights = comm.allgather(mine)
    share = core.split(prep.units, weights)[rank]

    counter = core.Counter(prep, params)
    runtime.quiet_barrier(comm)  # everyone staged and prepared: the analysis starts now
    t0 = time.perf_counter()

    bar = Bar("mdfs rank 0: its share of the tuples") if args.progress and rank == 0 else None
    count_s = counter.run(share, threads, bar)
    mine_out = {"rank": rank, "node": where[rank]["node"], "site": where[rank]["site"], "weight": mine,
                "threads": threads, "tuples": int(sum(u[3] for u in share)), "units": len(share),
                "count_s": count_s, "staging": staging, "result": counter.results()}
    runtime.quiet_barrier(comm)
    compute_s = time.perf_counter() - t0
    parts = comm.gather(mine_out, root=0)
    if rank == 0:
        merged = core.merge([p.pop("result") for p in parts])
        result = core.finish(prep, merged, params, {"compute_s": compute_s,
                                                    "staging_s": max(p["staging"]["staging_s"] for p in parts)})
        result["ranks"] = parts
        result["split"] = args.split
        with open(args.out, "wb") as f:
            pickle.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
