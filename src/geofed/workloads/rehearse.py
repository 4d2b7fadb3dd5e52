"""A profiled program's communication replayed on a placement, beside its prediction.

Every rank makes the calls its profile recorded (`geofed profile`, an app.profile
record) in their order: the calls before the program's iteration, the iteration as
many times as it ran, the calls after; each call with the same peer or root, the same
bytes, and before it the compute measured before such a call, as a spin until the rank
has used as much CPU time as the program's process did there (the rank holds its core as
a computing rank does, and a spin that waits for a core, three ranks on two cores or the
link emulator's forwarding, is held up as the program's compute is; by the wall clock it
ran on, a gap that waited for a core at the profiled site would be copied with that wait
whatever the contention of the replay's placement). A wait completes the oldest
outstanding requests, as many as the profiled one did, and as it did: blocking, or
(a program that slept between its polls, as the Gray-Scott simulation does) polling
for as long as it polled before its first sleep, then at the intervals it slept.
Communicator creation is made as the same kind of call over the world (a split into one colour, a duplicate, ...),
and freed. Collectives over a sub-communicator are not replayed (the profile names only
their size). So a centre
checks a prediction on the emulated link without the application's inputs or licence:

    geofed rehearse geofed-out/profile/app.profile-*.json -f icm-task -p W2G2
"""

from __future__ import annotations

import time
from pathlib import Path

from geofed import records, runtime
from geofed.errors import UserError
from geofed.records.app import NONBLOCKING, AppParams
from geofed.workloads import RankWorkload

TAG = 0
BLOCKED = ("gather", "scatter", "allgather", "alltoall", "reduce_scatter_block")  # bytes are one rank's block


class Compute:
    """The rank's compute between its calls, replayed by its thread's CPU time, however long
    a wait for a core makes it. Counted from the replay's start, less the CPU time inside
    the replayed calls: the replay's own work between calls (Python's, 10-20 us a call) is
    part of the compute it replays, as the program's own was part of its gaps (the obstacle
    solver makes 800 calls a rank, the Gray-Scott simulation 1,950)."""

    def __init__(self):
        self.until = time.thread_time()

    def spin(self, cpu_s: float) -> None:
        self.until += cpu_s
        while time.thread_time() < self.until:
            pass

    def call(self, make, *args) -> bool:
        """`make(*args)`, its CPU time kept out of the compute."""
        before = time.thread_time()
        made = make(*args)
        self.until += time.thread_time() - before
        return made


def compute_s(cpu_s: float, wall_s: float) -> float:
    """The CPU time a gap is replayed for: its own, but no more than its wall time (a program
    whose threads computed side by side used more CPU than time; the replay has one thread)."""
    return min(cpu_s, wall_s)


def calls(rank: dict):
    """The rank's pattern indexes in the order it made them."""
    yield from rank["prefix"]
    for _ in range(rank["iterations"]):
        yield from rank["iteration"]
    yield from rank["suffix"]


class Replayer:
    """One rank's calls on `comm`, with buffers of the largest message any rank made."""

    def __init__(self, comm, profile, np, MPI):
        self.comm, self.MPI = comm, MPI
        self.size = comm.Get_size()
        biggest = max([p["bytes"] * (self.size if p["kind"].removeprefix("i") in BLOCKED else 1)  # igather too
                       for r in profile.ranks for p in r["patterns"]] + [1])
        self.send, self.recv = np.zeros(biggest, np.uint8), np.empty(biggest, np.uint8)
        self.requests: list = []
        self.oversleep = 0.0  # a sleep's excess over what it asked for, a running mean

    def call(self, p: dict) -> bool:
        """Make the call of pattern `p`; False when it cannot be replayed."""
        comm, MPI, kind, n = self.comm, self.MPI, p["kind"], p["bytes"]
        peer = MPI.ANY_SOURCE if p["peer"] == -2 else MPI.PROC_NULL if p["peer"] == -1 else p["peer"]
        if p["peer"] == -3 or (p["size"] and kind in COLLECTIVES and p["size"] != self.size):
            return False
        out, into = self.send[:n], self.recv[:n]
        if kind == "send":
            comm.Send(out, peer, TAG)
        elif kind == "recv":
            comm.Recv(self.recv, peer, TAG)
        elif kind == "isend":
            self.requests.append(comm.Isend(out, peer, TAG))
        elif kind == "irecv":
            self.requests.append(comm.Irecv(self.recv, peer, TAG))
        elif kind == "sendrecv":
            source = MPI.ANY_SOURCE if p["source"] == -2 else MPI.PROC_NULL if p["source"] == -1 else p["source"]
            comm.Sendrecv(out, peer, TAG, self.recv, source, TAG)
        elif kind in ("wait", "waitany", "waitsome"):
            if self.requests:
                self.wait(self.requests[:1], p)
                del self.requests[:1]
        elif kind == "waitall":
            done, self.requests = self.requests[:p["size"]], self.requests[p["size"]:]
            self.wait(done, p)
        else:
            COLLECTIVES[kind](self, out, into, n, peer)
        return True

    def wait(self, requests: list, p: dict) -> None:
        """Complete `requests` as the profiled wait did: a blocking wait, or (a program that
        slept between its polls) polls for its spin, then polls at its intervals, asleep in
        between. Across a link the difference shows: the Gray-Scott simulation across ma-hd
        took +58 % sleeping between polls, +8 % polling without sleeps, and a blocking replay
        missed it. The sleep asked for is the interval less what this rank's sleeps have
        overslept so far."""
        if not p.get("slept"):
            self.MPI.Request.Waitall(requests)
            return
        interval = p["sleep_s"] / p["sleeps"]
        spun = time.perf_counter() + p["spin_s"] / p["slept"]
        while not self.MPI.Request.Testall(requests):
            before = time.perf_counter()
            if before > spun:
                ask = max(0.0, interval - self.oversleep)
                time.sleep(ask)
                self.oversleep += (time.perf_counter() - before - ask - self.oversleep) / 8


def _blocks(r: Replayer, n: int):
    return r.send[:n * r.size], r.recv[:n * r.size]


def _comm_create(r: Replayer) -> None:
    group = r.comm.Get_group()
    r.comm.Create(group).Free()
    group.Free()


# A collective over the world: its mpi4py method and that method's arguments from the
# send buffer `out`, the receive buffer `into`, the bytes `n` (one rank's block where
# blocked) and the root. Its non-blocking form (the profile's "i" kinds) is the same
# method's, its request completed by the profile's waits, asleep where the program slept (a
# quiet barrier).
WORLD = {
    "barrier": ("Barrier", lambda r, out, into, n, root: ()),
    "bcast": ("Bcast", lambda r, out, into, n, root: (out, root)),
    "reduce": ("Reduce", lambda r, out, into, n, root: (out, into, r.MPI.SUM, root)),
    "allreduce": ("Allreduce", lambda r, out, into, n, root: (out, into, r.MPI.SUM)),
    "scan": ("Scan", lambda r, out, into, n, root: (out, into, r.MPI.SUM)),
    "gather": ("Gather", lambda r, out, into, n, root: (out, _blocks(r, n)[1], root)),
    "scatter": ("Scatter", lambda r, out, into, n, root: (_blocks(r, n)[0], into, root)),
    "allgather": ("Allgather", lambda r, out, into, n, root: (out, _blocks(r, n)[1])),
    "alltoall": ("Alltoall", lambda r, out, into, n, root: _blocks(r, n)),
    "reduce_scatter_block": ("Reduce_scatter_block", lambda r, out, into, n, root: (_blocks(r, n)[0], into,
                                                                                    r.MPI.SUM)),
}


def _blocking(method: str, args):
    return lambda r, *call: getattr(r.comm, method)(*args(r, *call))


def _nonblocking(method: str, args):
    nonblocking = "I" + method[0].lower() + method[1:]  # mpi4py's Ibarrier, Iallreduce, ...
    return lambda r, *call: r.requests.append(getattr(r.comm, nonblocking)(*args(r, *call)))


COLLECTIVES = {
    **{kind: _blocking(method, args) for kind, (method, args) in WORLD.items()},
    **{kind: _nonblocking(*WORLD[kind[1:]]) for kind in NONBLOCKING},
    # communicator creation over the world, the new communicator freed (a local call in MPICH)
    "comm_split": lambda r, out, into, n, root: r.comm.Split(0, r.comm.Get_rank()).Free(),
    "comm_dup": lambda r, out, into, n, root: r.comm.Dup().Free(),
    "comm_create": lambda r, out, into, n, root: _comm_create(r),
    "cart_create": lambda r, out, into, n, root: r.comm.Create_cart([r.size]).Free(),
}


class Rehearse(RankWorkload, kind="app.rehearsal", Params=AppParams, command="rehearse"):
    """Replay a profile's communication (same peers, sizes, order; compute as timed waits) on a placement"""

    def check(self, ctx, params: AppParams) -> None:
        from geofed.model import app
        super().check(ctx, params)
        app.fits(app.load(params.profile).data, ctx.placement.node_count)

    def run(self, ctx, params: AppParams) -> records.Record:
        from geofed.launch import runner
        from geofed.model import app, calibration
        prof = app.load(params.profile)
        path = str(Path(params.profile).resolve())
        result = runner.run_ranks(ctx.fed, ctx.placement, self.name, {"profile": path},
                                  ranks_per_node=prof.data.ranks_per_node, hostfile=ctx.hostfile, timeout=ctx.timeout,
                                  cpu_limit=self.cpu_limit, what=f"rehearse on {ctx.placement.code}")
        cal = calibration.found_or_empty(str(ctx.fed.path), ctx.fed)
        pred = app.MODELS[0].predict(ctx.fed, cal, ctx.placement.code, ctx.placement.nodes(ctx.fed),
                                     AppParams(profile=path))
        measured = max(result["rank_s"])
        return records.make(self.kind, {"profile": path, "program": prof.data.program,
                                        "placement": ctx.placement.code, "measured_s": measured,
                                        "rank_s": result["rank_s"], "rank_cpu_s": result["rank_cpu_s"],
                                        "predicted_s": pred.total_s,
                                        "interval_s": list(pred.interval), "parts": pred.parts,
                                        "error": measured / pred.total_s - 1, "calls": result["calls"]},
                            **self.meta(ctx))

    def rank(self, comm, params: AppParams) -> dict | None:
        import numpy as np
        from mpi4py import MPI
        profile = records.read(params.profile).data
        if comm.Get_size() != len(profile.ranks):
            raise UserError(f"{params.profile}: {len(profile.ranks)} ranks profiled, {comm.Get_size()} started")
        me = profile.ranks[comm.Get_rank()]
        patterns = me["patterns"]
        # a profile from before the profiler read CPU time: its gaps' wall time
        gaps = [compute_s(p.get("gap_cpu_s", p["gap_s"]), p["gap_s"]) / p["count"] for p in patterns]
        tail_s = me["compute_s"] - sum(p["gap_s"] for p in patterns)
        replayer = Replayer(comm, profile, np, MPI)
        made = 0
        comm.Barrier()
        t0, cpu0 = time.perf_counter(), time.thread_time()
        compute = Compute()
        for i in calls(me):
            compute.spin(gaps[i])
            made += compute.call(replayer.call, patterns[i])
        compute.spin(compute_s(me.get("tail_cpu_s", tail_s), tail_s))  # after the last call, to MPI_Finalize
        elapsed, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
        # A rank done waits for the others off the core, as the program's ranks do in
        # MPI_Finalize (a PMI fence on a socket): a blocking gather would poll, and take a
        # core from the rank still replaying its compute after its last call (MDFS's rank 0,
        # 0.64 s alone), whose CPU-timed spin then stretches.
        mine = np.array([elapsed, made, cpu], dtype=float)
        every = np.empty((comm.Get_size(), 3)) if comm.Get_rank() == 0 else None
        runtime.quiet_wait(comm.Igather(mine, every, root=0), 0.001)
        if comm.Get_rank() != 0:
            return None
        return {"rank_s": every[:, 0].tolist(), "calls": int(every[:, 1].sum()), "rank_cpu_s": every[:, 2].tolist()}

    def table(self, rec) -> str:
        d = rec.data
        return (f"rehearsal of {' '.join(d.program)} on {d.placement}: {d.measured_s * 1e3:.3f} ms measured, "
                f"{d.predicted_s * 1e3:.3f} ms predicted (interval {d.interval_s[0] * 1e3:.3f} to "
                f"{d.interval_s[1] * 1e3:.3f}), error {d.error:+.1%}; {d.calls} calls replayed")


WORKLOAD = Rehearse()
