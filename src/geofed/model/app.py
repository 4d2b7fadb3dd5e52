"""A user's own MPI program on any placement: its profile at one site replayed on the link model.

The profile (`geofed profile`, an app.profile record) holds, per rank, every pattern of
calls with the time inside them as measured at one site, and the compute between them.
On a placement rank r runs on node r // ranks-per-node (the launcher fills nodes in
order). Each rank's time is
- compute: as measured, scaled by the profiled site's speed over its node's site's;
- inside-site communication: the time inside the calls as measured (every message
  has a local path, at the profiled site as anywhere);
- the link: what `network.crossing_s` adds to each message whose two ranks sit at
  different sites, paid by the rank that receives it (a sender is free once its data
  is buffered, except for a round trip per full send buffer). Messages of the same
  pattern that cross in the same direction share the link's rate (contention). A
  non-blocking receive pays the link at its wait, less the time the message had
  between its post and that wait (overlap, as measured); the latencies of the
  requests one wait completes overlap each other. A collective pays, in every rank of
  its communicator, the sum over its algorithm's rounds (MPICH's: `mpi.allreduce_rounds`,
  binomial trees, dissemination, pairwise exchange) of the slowest crossing message
  of the round, with the round's crossing messages sharing the link.
The run takes its slowest rank's time. The prediction interval is the profile's own
spread: 1.96 standard deviations of the time inside the calls (each call's spread as
measured, calls taken as independent) around the prediction, and at least the profiled
ranks' spread of total time.

Without a calibration file the federation file alone describes the link; with one
(the testbed's), the host's crossing costs are added as for the other models.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from geofed import records
from geofed.errors import UserError
from geofed.model import Model, Prediction, prediction
from geofed.model.calibration import Calibration
from geofed.model.mpi import allreduce_rounds
from geofed.model.network import crossing_s, route
from geofed.records.app import AppParams

RECEIVES = ("recv", "irecv", "sendrecv")
SENDS = ("send", "isend")
WAITS = ("wait", "waitall", "waitany", "waitsome")
Z_95 = 1.96


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


def rounds(kind: str, p: int, nbytes: float, root: int) -> list[tuple[list[tuple[int, int]], float]]:
    """A collective over ranks 0..p-1 as rounds of (messages (from, to), bytes each), MPICH's algorithms."""
    def rel(i):
        return (i + max(root, 0)) % p
    steps = [1 << k for k in range(max(0, math.ceil(math.log2(p))))] if p > 1 else []
    if kind == "allreduce":
        return allreduce_rounds(p, nbytes)
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
        self.prof, self.fed, self.cal = prof, fed, cal
        data = prof.data
        self.ranks = len(data.ranks)
        if len(nodes) * data.ranks_per_node != self.ranks:
            raise UserError(f"the profile has {self.ranks} ranks ({data.ranks_per_node} per node): the placement "
                            f"must have {self.ranks // data.ranks_per_node} nodes, not {len(nodes)}")
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
        serial = nbytes / self.local_rate if self.local_rate else 0.0
        return crossing_s(self.fed, self.cal, a, b, nbytes, serial, flows)

    def collective(self, p: dict) -> tuple[float, float]:
        """(latency, bandwidth) the link adds to one call of a collective over every rank."""
        lat = bw = 0.0
        for pairs, nbytes in rounds(p["kind"], self.ranks, p["bytes"], p["peer"]):
            ways: dict[tuple[str, str], int] = {}
            for x, y in pairs:
                if self.site[x] != self.site[y]:
                    ways[(self.site[x], self.site[y])] = ways.get((self.site[x], self.site[y]), 0) + 1
            worst = max((self.crossing(a, b, nbytes, n) for (a, b), n in ways.items()), key=sum, default=(0.0, 0.0))
            lat, bw = lat + worst[0], bw + worst[1]
        return lat, bw

    def rank(self, r: int) -> dict:
        """Rank r's compute, local and link (latency, bandwidth) seconds, and the variance of its calls."""
        data = self.prof.data
        rank = data.ranks[r]
        waits = [p for p in rank["patterns"] if p["kind"] in WAITS]
        per_wait = max(1.0, sum(p["size"] * p["count"] for p in waits) / max(1, sum(p["count"] for p in waits)))
        lat = bw = 0.0
        notes = set()
        for p in rank["patterns"]:
            if p["size"] and p["kind"] not in WAITS:
                if p["size"] != self.ranks:
                    notes.add(f"a {p['kind']} over {p['size']} of {self.ranks} ranks: its link part is not modelled")
                    continue
                l, b = self.collective(p)
            elif p["kind"] in SENDS and 0 <= p["peer"] < self.ranks and self.site[p["peer"]] != self.site[r]:
                l, b = self._windows(self.site[r], self.site[p["peer"]], p["bytes"]), 0.0
            elif (src := self._sender(r, p)) is not None and self.site[src] != self.site[r]:
                a = self.site[src]
                l, b = self.crossing(a, self.site[r], p["bytes"], self.flows[(p["kind"], p["bytes"], a, self.site[r])])
                if p["kind"] == "irecv":
                    overlap = p["overlap_s"] / p["overlapped"] if p["overlapped"] else 0.0
                    l /= per_wait
                    hidden = min(l + b, overlap)
                    l, b = l - min(l, hidden), b - max(0.0, hidden - l)
            else:
                continue
            lat += p["count"] * l
            bw += p["count"] * b
        speed = self._speed(data.site) / self._speed(self.site[r])
        return {"compute": rank["compute_s"] * speed, "local": rank["comm_s"], "latency": lat, "bandwidth": bw,
                "variance": sum(p["count"] * p["sd_s"] ** 2 for p in rank["patterns"]), "notes": notes}

    def _windows(self, a: str, b: str, nbytes: float) -> float:
        """A blocking sender's wait on the link: a round trip per full send buffer."""
        if self.cal.transport != "tcp":
            return 0.0
        return 2 * route(self.fed, a, b, self.cal).extra_one_way_s * (nbytes // self.cal.tcp_window_bytes)

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
        per_rank = [replay.rank(r) for r in range(replay.ranks)]
        times = [x["compute"] + x["local"] + x["latency"] + x["bandwidth"] for x in per_rank]
        slowest = per_rank[max(range(len(times)), key=times.__getitem__)]
        total = max(times)
        measured = [r["total_s"] for r in prof.data.ranks]
        half = max(Z_95 * math.sqrt(slowest["variance"]), (max(measured) - min(measured)) / 2)
        link_bytes = sum(p["count"] * p["bytes"] for r, rank in enumerate(prof.data.ranks) for p in rank["patterns"]
                         if (src := replay._sender(r, p)) is not None and replay.site[src] != replay.site[r])
        notes = [f"the link: {slowest['latency'] * 1e3:.3f} ms of latency, {slowest['bandwidth'] * 1e3:.3f} ms "
                 f"of bandwidth", f"profiled at site {prof.data.site} of {prof.federation}"]
        notes += sorted(set().union(*(x["notes"] for x in per_rank)))
        return prediction(self.name, placement, compute=slowest["compute"], local_comm=slowest["local"],
                          link_comm=slowest["latency"] + slowest["bandwidth"], link_bytes=link_bytes,
                          notes=notes, interval=(max(0.0, total - half), total + half))


MODELS = (App(),)
