"""`geofed profile`: an unmodified MPI program run at one site under geofed's PMPI library.

The library (pmpi.c, built by setup.sh with the venv's mpicc into
`<venv>/lib/libgeofed_profile.so`) is put before the program with LD_PRELOAD, so its
MPI_* functions come before libmpi's for every caller: a C, C++ or Fortran program
linked against libmpi, and mpi4py too, whose extension module is loaded with dlopen
after the preload (the dynamic linker looks a symbol up in the preloaded libraries
first, whoever asks). mpi4py calls MPI-4's large-count functions (MPI_Send_c, ...)
where libmpi has them, and the library wraps both forms. Each rank writes its counts
at MPI_Finalize to `rank-N.txt` in $GEOFED_PROFILE_DIR; `merge` reads them into one
app.profile record, finding each rank's repeating iteration in the order of its calls.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from geofed import native
from geofed.errors import JobFailed, UserError
from geofed.launch import mpi

LIBRARY = "libgeofed_profile.so"  # libgeofed_profile.openmpi.so for Open MPI (geofed.launch.mpi)
SOURCE = Path(__file__).with_name("pmpi.c")
MAX_PERIOD = 2048  # the longest iteration looked for, in calls
PATTERN_FIELDS = ("kind", "peer", "source", "bytes", "size", "count", "inside_s", "inside_sq", "min_s", "max_s",
                  "gap_s", "overlap_s", "overlapped", "poll_s", "poll_sq", "gap_cpu_s", "slept", "spin_s", "sleeps",
                  "sleep_s")


def preload(directory: Path) -> list[str]:
    """What goes before the program so that its ranks are profiled into `directory`."""
    library = native.library(mpi.program(LIBRARY), SOURCE)
    return ["env", f"LD_PRELOAD={library}", f"GEOFED_PROFILE_DIR={directory}"]


def read_rank(path: Path) -> dict:
    """One rank's file as the library wrote it: its header values, patterns by table slot, call order."""
    out: dict = {"patterns": {}, "order": []}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(" ")
        if key == "pattern":
            slot, *values = rest.split()
            out["patterns"][int(slot)] = {f: (v if f == "kind" else float(v) if "." in v or "e" in v else int(v))
                                          for f, v in zip(PATTERN_FIELDS, values)}
        elif key == "order":
            out["order"] = [int(x) for x in rest.split()]
        elif key in ("rank", "ranks", "calls", "patterns_full"):
            out[key] = int(rest)
        elif key in ("total_s", "tail_s", "tail_cpu_s"):
            out[key] = float(rest)
        elif key == "host":
            out[key] = rest
    return out


def iteration(order: list[int], calls: int) -> tuple[list[int], list[int], int, list[int]]:
    """(prefix, iteration, iterations, suffix): the shortest period that covers most of the
    recorded calls. Calls beyond those recorded are taken to continue the period."""
    seq = np.asarray(order)
    n = len(seq)
    if n < 2:
        return list(order), [], 0, []
    best = (n, 0, 0)  # (calls not covered, period, start)
    for period in range(1, min(MAX_PERIOD, n // 2) + 1):
        same = np.concatenate(([False], seq[period:] == seq[:-period], [False]))
        edges = np.flatnonzero(np.diff(same.astype(np.int8)))
        if not len(edges):
            continue
        runs = edges[1::2] - edges[::2]
        longest = int(np.argmax(runs))
        start, covered = int(edges[2 * longest]), int(runs[longest]) + period
        if covered // period >= 2 and n - covered < best[0]:
            best = (n - covered, period, start)
        if best[0] == 0:
            break
    uncovered, period, start = best
    if not period:
        return list(order), [], 0, []
    covered = n - uncovered
    after = list(order[start + covered:])
    if calls > n and not after:  # the period runs to the end of what was kept, and beyond
        covered = calls - start
    iterations, rest = divmod(covered, period)
    pattern = list(order[start:start + period])
    return list(order[:start]), pattern, iterations, pattern[:rest] + after


def merge(directory: Path, ranks: int, nodes: list[str]) -> tuple[list[dict], int]:
    """Every rank's profile with its patterns as a list and its order as indexes into it;
    and the calls no pattern described."""
    out, untracked = [], 0
    for rank in range(ranks):
        path = directory / f"rank-{rank}.txt"
        if not path.exists():
            raise JobFailed(f"profile: rank {rank} wrote no profile ({path.name}); did the program call MPI_Finalize?")
        raw = read_rank(path)
        slots = sorted(raw["patterns"])
        index = {slot: i for i, slot in enumerate(slots)}
        patterns = []
        for slot in slots:
            p = raw["patterns"][slot]
            mean = p["inside_s"] / p["count"]
            var = max(0.0, p["inside_sq"] / p["count"] - mean * mean)
            patterns.append({"kind": p["kind"], "peer": p["peer"], "source": p["source"], "bytes": p["bytes"],
                             "size": p["size"], "count": p["count"], "inside_s": p["inside_s"], "mean_s": mean,
                             "sd_s": var ** 0.5, "min_s": p["min_s"], "max_s": p["max_s"], "gap_s": p["gap_s"],
                             "overlap_s": p["overlap_s"], "overlapped": p["overlapped"],
                             "poll_s": p.get("poll_s", 0.0), "poll_sq": p.get("poll_sq", 0.0),
                             "gap_cpu_s": p["gap_cpu_s"], "slept": p["slept"], "spin_s": p["spin_s"],
                             "sleeps": p["sleeps"], "sleep_s": p["sleep_s"]})
        prefix, period, iterations, suffix = iteration([index[s] for s in raw["order"]], raw["calls"])
        comm = sum(p["inside_s"] for p in patterns)
        out.append({"rank": rank, "host": raw.get("host", ""), "node": nodes[rank], "total_s": raw["total_s"],
                    "compute_s": raw["total_s"] - comm, "comm_s": comm, "tail_cpu_s": raw["tail_cpu_s"],
                    "calls": raw["calls"], "patterns": patterns,
                    "prefix": prefix, "iteration": period, "iterations": iterations, "suffix": suffix})
        untracked += raw["patterns_full"]
    return out, untracked


def profile(fed, placement, program: list[str], ranks_per_node: int, *, hostfile: str | None, timeout: float | None,
            cpu_limit: bool) -> dict:
    """Run `program` on `placement` (one site) under the library; the app.profile record's data."""
    sites = placement.sites()
    if len(sites) != 1:
        raise UserError(f"placement {placement.code}: a profile is taken at one site; {placement.code} spans "
                        f"{', '.join(sites)} (predict the spanning run with `geofed predict app`)")
    return profiled(fed, placement, program, ranks_per_node, hostfile=hostfile, timeout=timeout, cpu_limit=cpu_limit)


def profiled(fed, placement, program: list[str], ranks_per_node: int, *, hostfile: str | None = None,
             timeout: float | None, cpu_limit: bool, cwd: str | Path | None = None, echo: bool = True) -> dict:
    """`program` run on any placement under the library (in `cwd`): every rank's calls and its
    time from MPI_Init to MPI_Finalize, the clock a profile and a measured run share."""
    from geofed.launch import job as launch
    from geofed.launch import runner
    with runner.work_directory("profile", hostfile) as tmp:
        job = launch.Job(fed, placement, preload(tmp) + program, ranks_per_node, cpu_limit=cpu_limit)
        runner.run(job, what=f"profile of {shlex.join(program)} on {placement.code}", hostfile=hostfile,
                   timeout=timeout, echo=echo, cwd=cwd)
        nodes = [n.name for n in job.nodes() for _ in range(ranks_per_node)]
        ranks, untracked = merge(tmp, job.ranks(), nodes)
    return {"program": program, "placement": placement.code, "site": placement.sites()[0],
            "ranks_per_node": ranks_per_node, "total_s": max(r["total_s"] for r in ranks), "ranks": ranks,
            "untracked_calls": untracked}


def describe(p: dict) -> str:
    """A pattern in a few words: `sendrecv to 1 from 3, 1024 B`, `allreduce of 4 ranks, 32 B`."""
    if p["kind"].startswith("wait"):
        return f"{p['kind']} of {p['size']} request(s)"
    if p["size"]:
        root = f", root {p['peer']}" if p["peer"] >= 0 else ""
        return f"{p['kind']} of {p['size']} ranks{root}, {p['bytes']} B"
    peer = {-1: "nobody", -2: "any", -3: "?"}.get(p["peer"], str(p["peer"]))
    way = "from" if p["kind"] in ("recv", "irecv") else "to"
    source = f" from {p['source']}" if p["kind"] == "sendrecv" else ""
    return f"{p['kind']} {way} {peer}{source}, {p['bytes']} B"


def format_table(data) -> str:
    lines = [f"profile of {shlex.join(data.program)} on {data.placement} (site {data.site}): "
             f"{data.total_s:.4f} s, {len(data.ranks)} ranks",
             f"{'rank':>4} {'node':>6} {'total [s]':>10} {'compute':>9} {'MPI':>9} {'calls':>8} {'iteration':>9} "
             f"{'times':>6}"]
    for r in data.ranks:
        lines.append(f"{r['rank']:>4} {r['node']:>6} {r['total_s']:10.4f} {r['compute_s']:9.4f} {r['comm_s']:9.4f} "
                     f"{r['calls']:>8} {len(r['iteration']):>9} {r['iterations']:>6}")
    first = data.ranks[0]
    lines.append("rank 0's calls, most time first:")
    for p in sorted(first["patterns"], key=lambda p: -p["inside_s"])[:10]:
        lines.append(f"  {describe(p):<44} x{p['count']:<7} {p['mean_s'] * 1e6:10.1f} us each "
                     f"(sd {p['sd_s'] * 1e6:.1f})")
    return "\n".join(lines)
