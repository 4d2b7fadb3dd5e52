"""P2PDC: one peer of a distributed projected Richardson solve over P2PSAP.

The grid is split into slabs along the first axis, one per peer; neighbours
exchange one halo plane per side on the data channel (tag HALO), everything
else (votes, snapshots, residuals, stop) goes on the control channel.

Schemes, per pair of peers: `sync` (blocking receive of every halo, FIFO,
exactly once), `async` (newest halo wins, never wait), `hybrid` (sync inside a
site, async across), `auto` (async as soon as a pair crosses sites).

Termination. All pairs sync: an allreduce, through peer 0, of the max update
|F(u) - u| of each iteration; consistent halos make it the exact fixed-point
residual. Otherwise the snapshot residual of the spec: peers vote after L
relaxations below eps with a fresh halo from each neighbour; peer 0 then starts
snapshot s; each peer copies its block, sends the copy's faces to its
neighbours over the control channel and keeps iterating; with its neighbours'
snapshot faces it computes max |u~ - F(u~)| of its copy; peer 0 stops everyone
when the maximum is <= eps, and every peer returns its copy u~.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

import numpy as np

from geofed.apps.obstacle.problem import Problem, Slab, split

HALO = 1
ROOT = 0
VOTE_AFTER = 5  # L: relaxations below eps before a vote


@dataclass
class Result:
    peer: int
    lo: int
    hi: int
    u: np.ndarray
    iterations: int
    seconds: float
    residual: float          # certified global residual at the stop
    snapshots: int = 0
    halos_received: int = 0
    history: list = field(default_factory=list)  # (seconds, global residual) seen by this peer


def pair_scheme(scheme: str, site_a: str, site_b: str) -> str:
    inter = site_a != site_b
    if scheme in ("sync", "async"):
        return scheme
    if scheme == "hybrid":
        return "async" if inter else "sync"
    return "async" if inter else "sync"  # auto: stale halos are only worth it on a long link


def connect_all(ep, me: int, addrs: list[str], sites: list[str], scheme: str, network: str, timeout: float = 30.0) -> dict[int, str]:
    """Full mesh of sessions: the lower id dials. Returns each neighbour's pair scheme."""
    for j in range(me + 1, len(addrs)):
        ep.connect(j, addrs[j], pair_scheme(scheme, sites[me], sites[j]), "inter" if sites[me] != sites[j] else "intra", network)
    for j in range(me):
        ep.wait_peer(j, timeout)
    return {j: pair_scheme(scheme, sites[me], sites[j]) for j in (me - 1, me + 1) if 0 <= j < len(addrs)}


class Peer:
    def __init__(self, ep, me: int, npeers: int, problem: Problem, schemes: dict[int, str], eps: float, all_sync: bool):
        self.ep, self.me, self.npeers, self.p, self.eps = ep, me, npeers, problem, eps
        self.all_sync = all_sync  # every pair sync: every peer must pick the same termination
        self.lo, self.hi = split(problem.n, npeers)[me]
        self.slab = Slab(problem, self.lo, self.hi)
        self.nbrs = schemes  # neighbour id -> "sync" | "async"
        self.local: list[tuple[int, bytes]] = []  # control messages peer 0 sends itself
        self.t0 = time.perf_counter()
        self.history: list[tuple[float, float]] = []
        self.halos = 0

    def side(self, nbr: int) -> int:
        return -1 if nbr < self.me else 1

    def plane_shape(self):
        return self.slab.face(-1).shape

    def to_root(self, body: bytes) -> None:
        if self.me == ROOT:
            self.local.append((ROOT, body))
        else:
            self.ep.control_send(ROOT, body)

    def to_all(self, body: bytes) -> None:
        for j in range(1, self.npeers):
            self.ep.control_send(j, body)
        self.local.append((ROOT, body))

    def control(self, timeout: float | None = None):
        if self.local:
            return self.local.pop(0)
        got = self.ep.control_receive(timeout)
        return (got[0], bytes(got[1])) if got else None

    def send_faces(self) -> None:
        for j in self.nbrs:
            face = self.slab.face(self.side(j))
            self.ep.send(j, HALO, np.ascontiguousarray(face).tobytes())

    def take_halo(self, j: int, blocking: bool) -> bool:
        got = self.ep.receive(j, HALO, None)  # sync: waits for the next one; async: never waits
        if got is None:
            return False
        self.slab.set_halo(self.side(j), np.frombuffer(got[1], dtype=float).reshape(self.plane_shape()))
        self.halos += 1
        return True

    def run(self) -> Result:
        return self.run_sync() if self.all_sync else self.run_async()

    def result(self, u, iterations, residual, snapshots=0) -> Result:
        return Result(self.me, self.lo, self.hi, u, iterations, time.perf_counter() - self.t0, residual,
                      snapshots, self.halos, self.history)

    # ---------------------------------------------------------------- synchronous

    def run_sync(self) -> Result:
        it = 0
        while True:
            self.send_faces()
            for j in self.nbrs:
                self.take_halo(j, blocking=True)
            diff = self.slab.relax()
            it += 1
            self.to_root(b"D" + struct.pack("<qd", it, diff))
            if self.me == ROOT:
                worst, seen = 0.0, 0
                while seen < self.npeers:
                    _, m = self.control(None if self.local else 60.0) or (None, None)
                    if m is None:
                        raise RuntimeError("peer 0: a peer stopped answering")
                    k, d = struct.unpack("<qd", m[1:])
                    if m[:1] != b"D" or k != it:
                        raise RuntimeError(f"peer 0: expected the update of iteration {it}, got {m[:1]!r} {k}")
                    worst, seen = max(worst, d), seen + 1
                self.to_all(b"G" + struct.pack("<qd", it, worst))
            while True:
                got = self.control(60.0)
                if got is None:
                    raise RuntimeError(f"peer {self.me}: no word from peer 0")
                if got[1][:1] == b"G":
                    break
            k, worst = struct.unpack("<qd", got[1][1:])
            self.history.append((time.perf_counter() - self.t0, worst))
            if worst <= self.eps:
                return self.result(self.slab.u.copy(), it, worst)

    # ---------------------------------------------------------------- asynchronous

    def run_async(self) -> Result:
        self.it, self.below, self.voted = 0, 0, False
        self.fresh = {j: False for j in self.nbrs}
        self.snaps: dict[int, np.ndarray] = {}             # s -> padded copy of our block
        self.planes: dict[int, dict[int, np.ndarray]] = {}  # s -> side -> neighbour's snapshot face
        self.sent_residual: set[int] = set()
        self.votes: set[int] = set()                        # peer 0 only, as are the next three
        self.current, self.residuals, self.in_progress = 0, {}, False
        while True:
            self.send_faces()  # first, so that sync pairs never both wait
            for j, s in self.nbrs.items():
                # A sync pair still waits for each halo (hybrid runs), but keeps
                # serving the control channel meanwhile, so a stop is never missed.
                while s == "sync" and not self.ep.wait(j, HALO, 0.01):
                    if (done := self.serve_control()) is not None:
                        return done
                if self.take_halo(j, blocking=False):
                    self.fresh[j] = True
            diff = self.slab.relax()
            self.it += 1
            self.below = self.below + 1 if diff <= self.eps else 0
            if not self.voted and self.below >= VOTE_AFTER and all(self.fresh.values()):
                self.to_root(b"V")
                self.voted = True
            if (done := self.serve_control()) is not None:
                return done
            self.certify_snapshots()
            if self.me == ROOT:
                self.supervise()

    def serve_control(self) -> Result | None:
        """Handle every control message that is in; the Result when told to stop."""
        while (got := self.control(0.0)) is not None:
            src, m = got
            kind = m[:1]
            if kind == b"S":
                (s,) = struct.unpack("<q", m[1:])
                self.snaps[s] = self.slab.padded.copy()
                for j in self.nbrs:
                    face = self.snaps[s][self.slab.inner][0 if self.side(j) < 0 else -1]
                    self.ep.control_send(j, b"P" + struct.pack("<q", s) + np.ascontiguousarray(face).tobytes())
                self.voted, self.below = False, 0
                self.fresh = {j: False for j in self.nbrs}
            elif kind == b"P":
                (s,) = struct.unpack("<q", m[1:9])
                plane = np.frombuffer(m[9:], dtype=float).reshape(self.plane_shape())
                self.planes.setdefault(s, {})[self.side(src)] = plane
            elif kind == b"X":
                s, r = struct.unpack("<qd", m[1:])
                self.history.append((time.perf_counter() - self.t0, r))
                return self.result(self.snaps[s][self.slab.inner].copy(), self.it, r, s)
            elif kind == b"V":
                self.votes.add(src)
            elif kind == b"R":
                s, r = struct.unpack("<qd", m[1:])
                self.residuals.setdefault(s, []).append(r)
        return None

    def certify_snapshots(self) -> None:
        """A copy whose neighbours' snapshot faces are all in: its residual is exact."""
        for s, copy in list(self.snaps.items()):
            got = self.planes.get(s, {})
            if s in self.sent_residual or len(got) < len(self.nbrs):
                continue
            P = copy.copy()
            for side, plane in got.items():
                P[(0 if side < 0 else -1,) + self.slab.inner[1:]] = plane
            r = float(np.max(np.abs(self.slab.image(P) - P[self.slab.inner])))
            self.to_root(b"R" + struct.pack("<qd", s, r))
            self.sent_residual.add(s)
            for old in [k for k in self.snaps if k < s]:
                self.snaps.pop(old)
                self.planes.pop(old, None)

    def supervise(self) -> None:
        """Peer 0: start a snapshot once all voted; stop all when one certifies eps."""
        if self.in_progress and len(self.residuals.get(self.current, ())) == self.npeers:
            r = max(self.residuals.pop(self.current))
            self.history.append((time.perf_counter() - self.t0, r))
            if r <= self.eps:
                self.to_all(b"X" + struct.pack("<qd", self.current, r))
                return
            self.in_progress = False
        if not self.in_progress and len(self.votes) == self.npeers:
            self.current += 1
            self.in_progress = True
            self.votes.clear()
            self.to_all(b"S" + struct.pack("<q", self.current))
