"""A user's own MPI program on any placement: its profile at one site replayed on the link model.

The profile (`geofed profile`, an app.profile record) holds, per rank, every pattern of
calls with the time inside them as measured at one site, and the compute between them.
On a placement rank r runs on node r // ranks-per-node (the launcher fills nodes in
order), and the run is simulated: every rank makes its calls in their order, after
the compute measured before each (scaled by the profiled site's speed over its
node's site's), each call taking its lowest measured time; a receive (blocking, or
at the wait of a non-blocking one, so the compute in between overlaps the message
as it did) ends no earlier than its message arrives (a program that waits by polling,
at its next poll: on average the mean residual of its measured intervals between polls,
sum(x^2) / (2 sum(x)), after the message arrived, where it came after the wait began): sent when its sender made the
call, plus what `network.crossing_s` adds where the two ranks sit at different sites
(the link's extra latency, a round trip per full send buffer, the excess of
serialising at the link's rate, shared by the messages of the same pattern that
cross the same way: contention; on the testbed, the emulator's store and forward of a
frame; over TCP, a connection's message larger than any it
carried before pays slow start's round trips to open its window). A collective over every rank starts when the last
rank enters it and runs its algorithm's rounds (MPICH's: `mpi.allreduce_rounds`,
binomial trees, dissemination, pairwise exchange; communicator creation as MPICH makes it,
an allgather of colours and keys for a split, allreduces agreeing on a context id),
a message of a round leaving when
its sender is there, the round's crossing messages sharing the link. The iteration
is simulated SIMULATED times, the rest extrapolated from the second half of them. What the
simulation does not explain at the profiled site (the calls' spread, noise, ranks waiting
for ranks that waited for a core) is kept in proportion to the share of the run the
site's work still has (simulated at the site over simulated on the placement). Parts:
compute (the slowest rank's), inside-site communication (the simulation without the link), the link's latency and bandwidth (with latency only,
then all of it). The prediction interval is the profile's own spread: 1.96 standard
deviations of the time inside the calls (calls taken as independent), at least the
profiled ranks' spread of total time.

Without a calibration file the federation file alone describes the link; with one
(the testbed's), the host's crossing costs are added as for the other models: its
one-way crossing time, and the host CPU its link emulator takes from computing ranks
for the bytes and the messages that cross (`Calibration.crossing_cpu_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from geofed import records
from geofed.errors import UserError
from geofed.model import Model, Prediction, prediction
from geofed.model.calibration import Calibration
from geofed.model.mpi import allreduce_rounds
from geofed.model.network import crossing_s, route, slow_start_rounds
from geofed.records.app import NONBLOCKING, AppParams

RECEIVES = ("recv", "irecv", "sendrecv")
SENDS = ("send", "isend")
WAITS = ("wait", "waitall", "waitany", "waitsome")
Z_95 = 1.96
# iterations simulated before the rest is extrapolated from the second half of them: the
# first absorb the ranks' different starts (a late rank's skew takes several to settle)
SIMULATED = 30
# Communicator creation (MPICH's MPIR_Comm_split_impl, MPIR_Get_contextid_sparse): a split
# gathers every rank's colour and key, then every kind agrees on a context id by allreduces
# of the context mask (MPIR_MAX_CONTEXT_MASK 32-bit words): two of them, as measured (a split
# of 3 ranks across icm-task's link, first or later in the program: 2 round trips;
# docs/profile.md, "Communicator creation").
CREATION = ("comm_split", "comm_dup", "comm_create", "cart_create")
COLOUR_KEY_BYTES = 8
CONTEXT_MASK_BYTES = 64 * 4
CONTEXT_ID_ALLREDUCES = 2
LINK = {"latency": 1.0, "bandwidth": 1.0}
LATENCY_ONLY = {"latency": 1.0, "bandwidth": 0.0}
NO_LINK = {"latency": 0.0, "bandwidth": 0.0}


@lru_cache(maxsize=8)
def _read(path: str, mtime: float):
    rec = records.read(path)
    if rec.kind != "app.profile":
        raise UserError(f"{path}: a {rec.kind} record, not a profile (app.profile, from `geofed profile`)")
    return rec


def load(path: str):
    """The app.profile record at `path`, read once while it is unchanged."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{path}: no such profile; make one with `geofed profile -f FED -p SITE_NODES -- PROGRAM`")
    try:
        return _read(str(p.resolve()), p.stat().st_mtime)
    except records.RecordError as e:
        raise UserError(f"{path}: {e}") from None


def fits(data, nodes: int) -> None:
    """Refuse a placement of `nodes` nodes that cannot hold the profile's ranks as they ran."""
    if nodes * data.ranks_per_node != len(data.ranks):
        need = len(data.ranks) // data.ranks_per_node
        raise UserError(f"the profile has {len(data.ranks)} ranks ({data.ranks_per_node} per node): the placement "
                        f"must have {need} node{'s' if need != 1 else ''}, not {nodes}")


def rounds(kind: str, p: int, nbytes: float, root: int) -> list[tuple[list[tuple[int, int]], float]]:
    """A collective over ranks 0..p-1 as rounds of (messages (from, to), bytes each), MPICH's algorithms.
    A non-blocking one (ibcast, ...) as its blocking form, all ranks meeting at its post: its
    overlap with the compute before its wait is not modelled."""
    kind = kind[1:] if kind in NONBLOCKING else kind
    def rel(i):
        return (i + max(root, 0)) % p
    steps = [1 << k for k in range(max(0, math.ceil(math.log2(p))))] if p > 1 else []
    if kind == "allreduce":
        return allreduce_rounds(p, nbytes)
    if kind in CREATION:
        agree = allreduce_rounds(p, CONTEXT_MASK_BYTES) * CONTEXT_ID_ALLREDUCES
        return rounds("allgather", p, COLOUR_KEY_BYTES, -1) + agree if kind == "comm_split" else agree
    if kind == "barrier":  # dissemination
        return [([(i, (i + s) % p) for i in range(p)], 0) for s in steps]
    if kind in ("bcast", "scatter"):  # binomial tree from the root; a scatter's subtrees shrink
        out = [([(rel(i), rel(i + s)) for i in range(s) if i + s < p], nbytes) for s in steps]
        return out if kind == "bcast" else [(pairs, nbytes * (p >> (k + 1) or 1)) for k, (pairs, _) in enumerate(out)]
    if kind in ("reduce", "gather"):  # binomial tree to the root; a gather's subtrees grow
        out = [([(rel(i + s), rel(i)) for i in range(0, p, 2 * s) if i + s < p], nbytes * (s if kind == "gather" else 1))
               for s in steps]
        return out
    if kind == "scan":
        return [([(i, i + s) for i in range(p - s)], nbytes) for s in steps]
    if kind == "allgather" and p & (p - 1) == 0:  # recursive doubling
        return [([(i, i ^ s) for i in range(p)], nbytes * s) for s in steps]
    if kind == "allgather":  # ring
        return [([(i, (i + 1) % p) for i in range(p)], nbytes)] * (p - 1)
    # alltoall, reduce_scatter_block: pairwise exchange
    return [([(i, (i + k) % p) for i in range(p)], nbytes) for k in range(1, p)]


class Replay:
    """One profile on one placement: the link's share of every rank's calls."""

    def __init__(self, prof, fed, cal: Calibration, nodes):
        # the testbed emulator's store and forward of a frame, priced here at the profiled site's
        # rate (network.crossing_s prices it by a local MPI curve, which a profile does not need)
        self.frame_bytes = cal.crossing_frame_bytes
        cal = replace(cal, crossing_frame_bytes=0)
        self.prof, self.fed, self.cal = prof, fed, cal
        data = prof.data
        self.ranks = len(data.ranks)
        fits(data, len(nodes))
        self.site = [nodes[r // data.ranks_per_node].site for r in range(self.ranks)]
        local = fed.site(data.site).local.bandwidth_gbps if data.site in [s.code for s in fed.sites] else None
        self.local_rate = local * 1e9 / 8 if local else None  # the profiled site's fabric
        # messages of one pattern crossing each way: (kind, bytes, from site, to site) -> how many ranks
        self.flows: dict[tuple, int] = {}
        for r, rank in enumerate(data.ranks):
            for p in rank["patterns"]:
                src = self._sender(r, p)
                if src is not None and self.site[src] != self.site[r]:
                    key = (p["kind"], p["bytes"], self.site[src], self.site[r])
                    self.flows[key] = self.flows.get(key, 0) + 1

    def _sender(self, r: int, p: dict) -> int | None:
        """The rank whose message this receiving pattern of rank r waits for."""
        peer = p["source"] if p["kind"] == "sendrecv" else p["peer"]
        return peer if p["kind"] in RECEIVES and 0 <= peer < self.ranks else None

    def crossing(self, a: str, b: str, nbytes: float, flows: int = 1) -> tuple[float, float]:
        """What the link adds to a message of `nbytes` from site a to b: (latency, bandwidth).
        On the testbed a frame of up to `frame_bytes` of it crosses the local path whole
        before the emulator serialises it on the link: its first frame's local
        serialisation is latency (the next frames' overlap the link's)."""
        serial = nbytes / self.local_rate if self.local_rate else 0.0
        lat, bw = crossing_s(self.fed, self.cal, a, b, nbytes, serial, flows)
        stored = min(nbytes, self.frame_bytes) / self.local_rate if self.local_rate else 0.0
        return lat + stored, bw

    def message(self, src: int, dst: int, p: dict, scale: dict) -> tuple[float, float, float]:
        """What the link adds to a message of pattern `p` from rank src to rank dst: (latency,
        bandwidth, and how long of the latency the sender is held). A connection opening its
        window holds the sender too: its socket's buffer, sized by the window, takes the
        message only as the window opens (HPL's root on icm-task, the first 1 MB panel to
        each rank across: 58.7 and 46.7 ms in MPI_Send, 54 ms of slow start)."""
        a, b = self.site[src], self.site[dst]
        if a == b:
            return 0.0, 0.0, 0.0
        flows = self.flows.get((p["kind"], p["bytes"], a, b), 1)
        lat, bw = self.crossing(a, b, p["bytes"], flows)
        warm = self.warm_up(src, dst, p["bytes"], flows)
        return (lat + warm) * scale["latency"], bw * scale["bandwidth"], warm * scale["latency"]

    def warm_up(self, src: int, dst: int, nbytes: float, flows: int) -> float:
        """Over TCP, the round trips a connection across the link spends opening its window
        to carry a message larger than any it carried before (slow start from 10
        segments; testbed nodes keep an open window when idle, as the HPL model assumes)."""
        if self.cal.transport != "tcp" or nbytes <= self.grown.get((src, dst), 0.0):
            return 0.0
        r = route(self.fed, self.site[src], self.site[dst], self.cal)
        bdp = (r.share_Bps(flows) or 0.0) * r.rtt_s
        rounds = slow_start_rounds(nbytes, bdp) - slow_start_rounds(self.grown.get((src, dst), 0.0), bdp)
        self.grown[(src, dst)] = nbytes
        return rounds * r.rtt_s

    def collective_exit(self, p: dict, entry: list[float], scale: dict) -> list[float]:
        """Every rank's time out of a collective entered at `entry`: its algorithm's rounds,
        a message of each round leaving its sender when the sender is there."""
        t = list(entry)
        for pairs, nbytes in rounds(p["kind"], self.ranks, p["bytes"], p["peer"]):
            ways: dict[tuple[str, str], int] = {}
            for x, y in pairs:
                if self.site[x] != self.site[y]:
                    ways[(self.site[x], self.site[y])] = ways.get((self.site[x], self.site[y]), 0) + 1
            after = list(t)
            for x, y in pairs:
                extra = 0.0
                if self.site[x] != self.site[y]:
                    flows = ways[(self.site[x], self.site[y])]
                    lat, bw = self.crossing(self.site[x], self.site[y], nbytes, flows)
                    extra = (lat + self.warm_up(x, y, nbytes, flows)) * scale["latency"] + bw * scale["bandwidth"]
                after[y] = max(after[y], t[x] + extra)
            t = after
        return t

    def simulate(self, scale: dict, speeds: dict[str, float]) -> list[float]:
        """Every rank's time from MPI_Init to MPI_Finalize: its calls in order, each at its
        lowest measured cost, a receive no earlier than its message's arrival, a collective
        by its rounds. The iteration is simulated SIMULATED times and extrapolated from the second half."""
        data = self.prof.data
        n = self.ranks
        self.grown: dict[tuple[int, int], float] = {}  # every connection starts cold
        k = [min(r["iterations"], SIMULATED) for r in data.ranks]
        seqs = [r["prefix"] + r["iteration"] * k[i] + r["suffix"] for i, r in enumerate(data.ranks)]
        ends = [[len(r["prefix"]) + len(r["iteration"]) * j for j in range(k[i] + 1)] for i, r in enumerate(data.ranks)]
        marks: list[dict[int, float]] = [{} for _ in range(n)]
        pos, clock = [0] * n, [0.0] * n
        sent: dict[tuple[int, int], list[float]] = {}
        taken: dict[tuple[int, int], int] = {}
        pending: list[list] = [[] for _ in range(n)]  # outstanding requests: (source, index), ("sent", time)
        entries: dict[int, dict[int, float]] = {}
        collectives = [0] * n
        posted = [False] * n  # the current call's message has left
        released = [0.0] * n  # when the current call's send may return

        def arrival(src: int, dst: int, i: int, force: bool) -> float | None:
            times = sent.get((src, dst), [])
            if i < len(times):
                return times[i]
            return clock[dst] if force else None

        def step(r: int, force: bool) -> bool:
            """Make rank r's next call if it can; whether it did."""
            p = data.ranks[r]["patterns"][seqs[r][pos[r]]]
            kind, gap = p["kind"], p["gap_s"] / p["count"] * speeds[r]
            at = clock[r] + gap
            if p["size"] and kind not in WAITS and p["size"] == n:
                i = collectives[r]
                entries.setdefault(i, {})[r] = at
                if len(entries[i]) < n:
                    if force:  # given up on: the others meet without it
                        del entries[i][r]
                        collectives[r] += 1
                    return False
                out = self.collective_exit(p, [entries[i][x] for x in range(n)], scale)
                for x in range(n):
                    q = data.ranks[x]["patterns"][seqs[x][pos[x]]]
                    clock[x] = out[x] + q["min_s"]
                    collectives[x] += 1
                    advance(x)
                del entries[i]
                return True
            done = at
            if (kind in SENDS or kind == "sendrecv") and 0 <= p["peer"] < n:
                # its message leaves once, even if the call's receive must wait; MPI moves it only while
                # the sender is in a call, so the sender waits until the link has taken all of it
                if not posted[r]:
                    lat, bw, held = self.message(r, p["peer"], p, scale)
                    sent.setdefault((r, p["peer"]), []).append(at + lat + bw)
                    released[r] = at + bw + held  # when the send may return
                    posted[r] = True
                    if kind == "isend":
                        pending[r].append(("sent", released[r]))
                if kind != "isend":
                    done = released[r]
            src = self._sender(r, p)
            came = at  # when the last message the call waits for arrived
            if kind in WAITS:
                count = min(len(pending[r]), p["size"] if kind == "waitall" else 1)
                for req in pending[r][:count]:
                    got = req[1] if req[0] == "sent" else arrival(req[0], r, req[1], force)
                    if got is None:
                        return False
                    came = max(came, got)
                del pending[r][:count]
            elif src is not None and kind != "irecv":
                got = arrival(src, r, taken.get((src, r), 0), force)
                if got is None:
                    return False
                taken[(src, r)] = taken.get((src, r), 0) + 1
                came = max(came, got)
            elif kind == "irecv" and src is not None:
                pending[r].append((src, taken.get((src, r), 0)))
                taken[(src, r)] = taken.get((src, r), 0) + 1
            # a polling wait sees a late message at its next poll; one that came while the wait
            # still spun before its first sleep (profiles since the profiler told spin from sleep), at once
            if came > at + p.get("spin_s", 0.0) / max(1, p.get("slept", 0)) and p.get("poll_s"):
                came += p["poll_sq"] / (2 * p["poll_s"])
            done = max(done, came)
            clock[r] = done + p["min_s"]
            advance(r)
            return True

        def advance(r: int) -> None:
            pos[r] += 1
            posted[r] = False
            if pos[r] in ends[r]:
                marks[r][ends[r].index(pos[r])] = clock[r]

        for r in range(n):
            if 0 in ends[r]:
                marks[r][0] = 0.0
        while True:
            moved = False
            for r in range(n):
                while pos[r] < len(seqs[r]) and step(r, False):
                    moved = True
            if all(pos[r] >= len(seqs[r]) for r in range(n)):
                break
            if not moved:  # ranks wait on each other (a pattern the profile could not order): the earliest goes on
                r = min((x for x in range(n) if pos[x] < len(seqs[x])), key=lambda x: clock[x])
                if not step(r, True):
                    clock[r] += data.ranks[r]["patterns"][seqs[r][pos[r]]]["min_s"]
                    advance(r)
        out = []
        for r, rank in enumerate(data.ranks):
            half = k[r] // 2
            per_iteration = (marks[r][k[r]] - marks[r][half]) / (k[r] - half) if k[r] else 0.0
            tail = rank["compute_s"] - sum(p["gap_s"] for p in rank["patterns"])
            out.append(clock[r] + (rank["iterations"] - k[r]) * per_iteration + tail * speeds[r])
        return out

    def _speed(self, site: str) -> float:
        return self.fed.site(site).speed if site in [s.code for s in self.fed.sites] else 1.0


class App(Model, name="app", measured_unit="s", Params=AppParams, needs_calibration=False):
    """A user's own MPI program from its profile at one site (`geofed profile`): compute, communication inside sites and over the link"""

    def add_arguments(self, ap) -> None:
        ap.add_argument("profile", help="an app.profile record written by `geofed profile`")

    def nodes(self, params) -> int:
        data = load(params.profile).data
        return len(data.ranks) // data.ranks_per_node

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        prof = load(params.profile)
        replay = Replay(prof, fed, cal, nodes)
        data = prof.data
        speeds = [replay._speed(data.site) / replay._speed(replay.site[r]) for r in range(replay.ranks)]
        at_site = [1.0] * replay.ranks
        # What the simulation leaves out at the profiled site (noise, the calls' spread: mostly
        # ranks waiting for ranks that waited for a core, three ranks on the testbed's two) is
        # kept, in the share of the run the site's work still has: where the link stretches an
        # iteration from S to L, the ranks' compute, which overlapped in S, overlaps in L about
        # S / L as often (icm-task's 2-D Jacobi: +7 % with all of it kept, -2 % so; docs/profile.md).
        at_profiled = max(replay.simulate(NO_LINK, at_site))
        inside = max(replay.simulate(NO_LINK, speeds))
        latency = max(replay.simulate(LATENCY_ONLY, speeds))
        linked = max(replay.simulate(LINK, speeds))
        unexplained = (data.total_s - at_profiled) * min(1.0, at_profiled / linked) if linked > 0 else 0.0
        total = linked + unexplained
        compute = max(r["compute_s"] * speeds[i] for i, r in enumerate(data.ranks))
        variance = max(sum(p["count"] * p["sd_s"] ** 2 for p in r["patterns"]) for r in data.ranks)
        measured = [r["total_s"] for r in data.ranks]
        half = max(Z_95 * math.sqrt(variance), (max(measured) - min(measured)) / 2)
        crossing = [p for r, rank in enumerate(data.ranks) for p in rank["patterns"]
                    if (src := replay._sender(r, p)) is not None and replay.site[src] != replay.site[r]]
        link_bytes = sum(p["count"] * p["bytes"] for p in crossing)
        # the testbed's link emulator takes host CPU from computing ranks (none on a real federation)
        forwarding = cal.crossing_cpu_s(link_bytes, replay.ranks, compute, total, sum(p["count"] for p in crossing))
        notes = [f"the link: {(latency - inside) * 1e3:.3f} ms of latency, {(total - unexplained - latency) * 1e3:.3f} "
                 f"ms of bandwidth" + (f", {forwarding * 1e3:.3f} ms of the emulator's host CPU" if forwarding else ""),
                 f"profiled at site {data.site} of {prof.federation}"]
        total += forwarding
        subs = sorted({p["size"] for r in data.ranks for p in r["patterns"]
                       if p["size"] and p["kind"] not in WAITS and p["size"] != replay.ranks})
        if subs:
            notes.append(f"collectives over {', '.join(map(str, subs))} of {replay.ranks} ranks: not synchronised "
                         f"by the simulation, their link part not modelled")
        return prediction(self.name, placement, compute=compute,
                          local_comm=max(0.0, inside + unexplained - compute), link_comm=total - unexplained - inside,
                          link_bytes=link_bytes, notes=notes, interval=(max(0.0, total - half), total + half))


MODELS = (App(),)


@dataclass(frozen=True)
class SpanDecision:
    """Whether a job whose profile is `profile` may span the sites of `placement` (`geofed submit --profile`)."""

    spans: bool
    slowdown_percent: float  # what the link adds to the run on the placement, over the rest of it
    predicted_s: float
    comment: str  # the job's comment: the decision and its reason, which the job_submit rule reads


def span_decision(fed, cal, placement: str, nodes, profile: str) -> SpanDecision:
    """The federation's scheduling rule for a placement across sites: span when the link is
    predicted to slow the run by less than [scheduler] max_span_slowdown_percent, else keep
    the job at one site. The slowdown is rounded as the comment writes it, so the job_submit
    rule, which reads the comment, decides the same."""
    pred = MODELS[0].predict(fed, cal, placement, nodes, AppParams(profile=profile))
    link = pred.parts["link_comm"]
    slowdown = round(100 * link / max(pred.total_s - link, 1e-12), 2)
    limit = fed.max_span_slowdown * 100
    spans = slowdown < limit
    comment = (f"geofed: {'span' if spans else 'one site'}, predicted slowdown {slowdown:.2f} % "
               f"{'<' if spans else '>='} {limit:g} % on {placement} ({pred.total_s:.4g} s predicted, "
               f"{link:.4g} s of it on the link; profile {Path(profile).name})")
    return SpanDecision(spans, slowdown, pred.total_s, comment)
