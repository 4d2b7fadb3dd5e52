"""`geofed bench schedule`: seed 001's utilisation experiment on the testbed's real Slurm.

Seed 001 (slide 15): Mannheim and Heidelberg kept jobs on one side of the 28 km link,
yet federating paid off, because idle nodes on one side took jobs queued at the other.
Here one reproducible job stream (its seed in the record) runs three times on a private
copy of the federation: with every site its own Slurm cluster (a job waits for its home
site's nodes); with the same clusters joined in Slurm's own federation (slurmdbd: a job
is copied to every sibling cluster and runs at the first that can start it, never
across two); and with the sites as one cluster, where a job still runs at one site (the
site-confinement rule, which lets a job span only when it asks) but at either. The stream has seed 001's shape:
the larger site submits mostly single-node jobs, the smaller site MPI jobs over all of
its nodes, and the smaller site is overloaded. Jobs sleep for their length, so the run
takes minutes. Wait times and node use come from Slurm's own job completion log
(jobcomp/filetxt): SubmitTime, StartTime, EndTime, NodeList.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import datetime

from geofed.errors import UserError
from geofed.testbed import slurm, slurm_federation
from geofed.progress import progress
from geofed.stats import percentile

SINGLE_S = (2.0, 10.0)  # single-node job lengths, uniform
MPI_S = (5.0, 15.0)  # MPI job lengths, uniform
DRAIN_TIMEOUT_S = 900.0
MODES = ("separate", "slurm-federation", "federated")


@dataclass(frozen=True)
class Job:
    name: str
    site: str  # where it is submitted (its users' home)
    nodes: int
    seconds: float
    arrival_s: float


def job_stream(fed, seed: int, window_s: float, single_load: float, mpi_load: float) -> list[Job]:
    """Poisson arrivals over `window_s`: at the larger site single-node jobs offering
    `single_load` of its nodes, at the smaller MPI jobs over all its nodes (at most 4)
    offering `mpi_load` of them."""
    if len(fed.sites) != 2:
        raise UserError(f"{fed.path}: the schedule experiment needs two sites, {fed.name} has {len(fed.sites)}")
    big, small = sorted(fed.sites, key=lambda s: (-s.nodes, s.code))
    rng = random.Random(seed)
    mpi_nodes = min(small.nodes, 4)
    streams = [(big, 1, SINGLE_S, single_load * big.nodes), (small, mpi_nodes, MPI_S, mpi_load * small.nodes / mpi_nodes)]
    jobs = []
    for site, nodes, (lo, hi), concurrent in streams:
        rate = concurrent / ((lo + hi) / 2)  # arrivals per second that keep `concurrent` jobs busy
        t = rng.expovariate(rate)
        while t < window_s:
            jobs.append(Job(f"gf-{site.code}{len([j for j in jobs if j.site == site.code]) + 1}", site.code, nodes,
                            round(rng.uniform(lo, hi), 1), round(t, 2)))
            t += rng.expovariate(rate)
    return sorted(jobs, key=lambda j: j.arrival_s)


def parse_jobcomp(text: str) -> list[dict]:
    """Slurm's filetxt completion records: one line of Key=Value per job."""
    out = []
    for line in text.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "JobId" in fields:
            out.append(fields)
    return out


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def expand_nodes(nodelist: str) -> list[str]:
    """W[1-3],G2 -> W1 W2 W3 G2 (the forms Slurm writes for the testbed's node names)."""
    out = []
    for part in _split_top(nodelist):
        if "[" not in part:
            out.append(part)
            continue
        stem, ranges = part[:part.index("[")], part[part.index("[") + 1:-1]
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            out += [f"{stem}{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur] if cur else parts


def measure(fed, jobs: list[Job], records: list[dict]) -> dict:
    """Wait times and node use of one run from its completion records."""
    by_name = {j.name: j for j in jobs}
    site_of = {n.name: n.site for n in fed.nodes()}
    rows = []
    busy = {s.code: 0.0 for s in fed.sites}  # node-seconds held per site
    # In a Slurm federation every cluster logs its copy of a job: the one that ran has
    # nodes; the job was submitted when its first copy was.
    submitted = {}
    for r in records:
        submitted[r.get("Name")] = min(submitted.get(r.get("Name"), r["SubmitTime"]), r["SubmitTime"])
    for r in records:
        job = by_name.get(r.get("Name", ""))
        if job is None or r["NodeList"] == "(null)":
            continue
        nodes = expand_nodes(r["NodeList"])
        start, end = _stamp(r["StartTime"]), _stamp(r["EndTime"])
        for n in nodes:
            busy[site_of[n]] += end - start
        rows.append({"name": job.name, "home": job.site, "ran_at": sorted({site_of[n] for n in nodes}),
                     "nodes": len(nodes), "submit": _stamp(submitted[job.name]), "start": start, "end": end,
                     "state": r.get("JobState")})
    if len(rows) != len(jobs):
        raise RuntimeError(f"{len(jobs) - len(rows)} of {len(jobs)} jobs are missing from Slurm's completion log")
    t0, t1 = min(r["submit"] for r in rows), max(r["end"] for r in rows)
    waits = [r["start"] - r["submit"] for r in rows]
    window = max(t1 - t0, 1e-9)
    out = {"jobs": rows, "makespan_s": window, "mean_wait_s": statistics.fmean(waits), "p90_wait_s": percentile(waits, 90),
           "utilisation": sum(busy.values()) / (window * sum(s.nodes for s in fed.sites)),
           "site_utilisation": {s.code: busy[s.code] / (window * s.nodes) for s in fed.sites},
           "spilled": sum(1 for r in rows if r["ran_at"] != [r["home"]])}
    for s in fed.sites:
        w = [r["start"] - r["submit"] for r in rows if r["home"] == s.code]
        out[f"mean_wait_s_{s.code}"] = statistics.fmean(w) if w else 0.0
    return out


def play(fed, plan, clusters: dict[str, slurm.Cluster], jobs: list[Job], mode: str) -> None:
    """Submit every job at its arrival time to its home site's cluster, then wait for all."""
    start = time.monotonic()
    for k, job in enumerate(jobs, start=1):
        delay = job.arrival_s - (time.monotonic() - start)
        if delay > 0:
            time.sleep(delay)  # the stream's own clock: a job arrives at its time
        c = clusters[job.site]
        res = slurm.run_client(plan, c, ["sbatch", "--parsable", f"--nodes={job.nodes}", f"--job-name={job.name}",
                                         "--time=5", "--output=/dev/null", f"--wrap=sleep {job.seconds}"])
        if res.returncode != 0:
            raise RuntimeError(f"sbatch {job.name} at {c.name}: {res.stderr.strip()}")
        if k % 5 == 0 or k == len(jobs):
            progress(f"schedule {mode}: {k}/{len(jobs)} jobs submitted at {time.monotonic() - start:.0f} s")
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    for c in {c.name: c for c in clusters.values()}.values():
        while True:
            res = slurm.run_client(plan, c, ["squeue", "-h", "-o", "%i"])
            left = len(res.stdout.split())
            if res.returncode == 0 and left == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"schedule {mode}: {left} jobs still queued at {c.name} after {DRAIN_TIMEOUT_S:g} s")
            time.sleep(0.5)  # polling the queue until it drains
    progress(f"schedule {mode}: every job done after {time.monotonic() - start:.0f} s")


def run(base, seed: int, window_s: float, single_load: float, mpi_load: float) -> dict:
    from geofed.testbed import core
    core.require_root("bench schedule")
    slurm.require_tools()
    jobs = job_stream(base, seed, window_s, single_load, mpi_load)
    data = {"seed": seed, "window_s": window_s, "single_load": single_load, "mpi_load": mpi_load,
            "sites": {s.code: s.nodes for s in base.sites}, "stream": [asdict(j) for j in jobs], "modes": {}}
    with core.owned_copy(base, "gfsched", progress) as fed:
        plan = core.make_plan(fed)
        for mode in MODES:
            clusters = start(fed, mode)
            try:
                home = {s.code: next(c for c in clusters if s.code in c.sites()) for s in fed.sites}
                play(fed, plan, home, jobs, mode)
                recs = [r for c in clusters
                        for r in parse_jobcomp((slurm.cluster_dir(plan, c) / "jobcomp.txt").read_text())]
                data["modes"][mode] = measure(fed, jobs, recs)
            finally:
                slurm_federation.down(fed.name)
    return data


def start(fed, mode: str) -> list[slurm.Cluster]:
    """The clusters of one regime: every site its own, the same joined in Slurm's
    federation (a job goes to every sibling and runs at one), or one cluster whose
    confinement rule keeps a job at one site, but at either."""
    if mode == "separate":
        return slurm.up(fed, slurm.separate(fed), progress)
    if mode == "slurm-federation":
        return slurm_federation.up(fed, f"{fed.name}-fed", progress)
    return slurm.up(fed, [slurm.federated(fed)], progress)


def table(data: dict) -> str:
    sites = list(data["sites"])
    lines = [f"job stream: seed {data['seed']}, {len(data['stream'])} jobs over {data['window_s']:g} s "
             f"({', '.join(f'{s}: {n} nodes' for s, n in data['sites'].items())})",
             f"{'mode':<16} {'mean wait s':>11} {'p90 wait s':>10} " + " ".join(f"{'wait ' + s + ' s':>9}" for s in sites)
             + f" {'utilisation':>11} " + " ".join(f"{'use ' + s:>7}" for s in sites) + f" {'makespan s':>10} {'other site':>10}"]
    for mode, m in data["modes"].items():
        lines.append(f"{mode:<16} {m['mean_wait_s']:>11.1f} {m['p90_wait_s']:>10.1f} "
                     + " ".join(f"{m['mean_wait_s_' + s]:>9.1f}" for s in sites)
                     + f" {m['utilisation']:>11.1%} " + " ".join(f"{m['site_utilisation'][s]:>7.1%}" for s in sites)
                     + f" {m['makespan_s']:>10.0f} {m['spilled']:>10}")
    return "\n".join(lines)
