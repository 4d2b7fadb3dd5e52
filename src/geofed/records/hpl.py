"""Record kinds of HPL (seeds 001 and 002) and the typed parameters of a run."""

from __future__ import annotations

import math
from dataclasses import dataclass

from geofed.errors import UserError
from geofed.records import Sanity, kind

# HPL's codes for the panel broadcast: increasing ring (1rg), its modified form
# (1rM), two rings (2rg, 2rM), long (Lng, LnM: bandwidth reducing, for slow links).
BCASTS = {"1rg": 0, "1rM": 1, "2rg": 2, "2rM": 3, "Lng": 4, "LnM": 5}


def grid(ranks: int) -> tuple[int, int]:
    """P x Q for `ranks`: as square as possible with P <= Q (HPL's tuning advice: a
    flat grid suits Ethernet-like networks, and P = 1 is allowed)."""
    p = max(d for d in range(1, math.isqrt(ranks) + 1) if ranks % d == 0)
    return p, ranks // p


def parse_grid(text: str) -> tuple[int, int]:
    """--grid PxQ."""
    try:
        p, q = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise UserError(f"--grid {text!r}: expected P x Q like 2x4") from None
    if p < 1 or q < 1:
        raise UserError(f"--grid {text!r}: P and Q must be at least 1")
    return p, q


def flops(n: int) -> float:
    """HPL's operation count, the one its GFLOPS are reported against."""
    return 2 / 3 * n**3 + 3 / 2 * n**2


@dataclass(frozen=True)
class HplParams:
    """One HPL run: it solves every order of `ns` in turn with one NB, one P x Q grid and one broadcast variant."""
    ns: tuple[int, ...]  # matrix orders N, solved in this order over the same connections
    nb: int = 80  # block size NB
    p: int = 0  # process grid rows; 0 (with q 0): as square as the rank count allows
    q: int = 0
    bcast: str = "1rM"  # panel broadcast variant (BCASTS)
    depth: int = 1  # lookahead depth: 0 none, 1 or 2 overlap the next panel's broadcast
    ranks_per_node: int = 1

    def on(self, nodes: int, where: str) -> HplParams:
        """These parameters for a placement of `nodes` nodes, the grid chosen if not given;
        every mistake HPL itself would only report after the ranks started."""
        ranks = nodes * self.ranks_per_node
        p, q = (self.p, self.q) if self.p or self.q else grid(ranks)
        if self.bcast not in BCASTS:
            raise UserError(f"--bcast {self.bcast!r}: unknown variant (known: {', '.join(BCASTS)})")
        if self.nb < 1:
            raise UserError(f"--nb {self.nb}: must be at least 1")
        for n in self.ns:
            if n < self.nb:
                raise UserError(f"--n {n}: smaller than the block size NB = {self.nb}")
        if p * q != ranks:
            raise UserError(f"--grid {p}x{q}: {p * q} processes, but {where} has {ranks} ranks")
        if self.depth < 0:
            raise UserError(f"--depth {self.depth}: must be 0 or more")
        return HplParams(tuple(self.ns), self.nb, p, q, self.bcast, self.depth, self.ranks_per_node)

    @property
    def ranks(self) -> int:
        return self.p * self.q


@kind("bench.hpl", version=2)
class BenchHpl:
    """`geofed bench hpl`, `geofed demo`: one HPL run on a placement, its time, GFLOPS and residual check per N.

    Attributes:
        placement: placement code
        nodes: node names
        ranks_per_node: ranks per node
        ranks: ranks in all
        ranks_per_site: site -> ranks there
        where: testbed, or hostfile (a real cluster)
        cpu_limit: whether the ranks ran under their node's CPU quota
        params: the run's parameters
        link: the link between the two sites: sites, rtt_ms, bandwidth_gbps; null on one site
        rows: per N: n, nb, p, q, time_s, gflops, residual, passed
        passed: every N passed HPL's residual check
    """
    placement: str
    nodes: list
    ranks_per_node: int
    ranks: int
    ranks_per_site: dict
    where: str
    cpu_limit: bool
    params: HplParams
    link: dict | None
    rows: list
    passed: bool

    @classmethod
    def upgrade(cls, version: int, data: dict) -> dict:
        """Version 1 kept the ranks per node outside the run's parameters."""
        return data | {"params": {**data.get("params", {}), "ranks_per_node": data.get("ranks_per_node", 1)}}

    def sanity(self) -> Sanity:
        """every order N passed HPL's residual check."""
        bad = [str(r["n"]) for r in self.rows if not r["passed"]]
        return Sanity(self.passed and not bad and bool(self.rows),
                      f"residual check FAILED at N = {', '.join(bad)}" if bad else
                      f"residual check passed at {len(self.rows)} order(s)" if self.rows else "no order solved")


@kind("bench.hpl.sweep")
class BenchHplSweep:
    """`geofed bench hpl-sweep`: seed 002's tables T, S, SP and SPF over placements and N.

    Attributes:
        placements: placement codes, the first of one node (the speed-up's base)
        ns: matrix orders, solved in this order in every run
        nb: block size NB
        repeat: runs per placement; medians
        peaks_gflops: site -> peak GFLOPS of one node
        peak_source: how the peaks were found
        link: the federation's link: name, rtt_ms, bandwidth_gbps
        rows: per placement and N: placement, nodes, sites, n, nb, p, q, time_s, speedup, gflops, peak_gflops,
            spf (peer_time_s, testbed_over_peer with --peer)
    """
    placements: list
    ns: list
    nb: int
    repeat: int
    peaks_gflops: dict
    peak_source: str
    link: dict | None
    rows: list


@kind("model.hpl.scaling")
class ModelHplScaling:
    """`geofed model hpl`: HPL's predicted speed-up against p in one site and across the link (seed 001).

    Attributes:
        n: matrix order N
        nb: block size NB
        ranks_per_node: ranks per node
        sites: the two sites: one site is the first, two sites both evenly
        varies: changed links compared (--vary)
        rows: per p: ranks, kruse_bound, one_site, two_sites {placement, time_s, speedup, parts, link_bytes},
            variants
        seed_001_bandwidth_gains: what seed 001's Kruse model gave for faster links
        calibration: the calibration's source records
    """
    n: int
    nb: int
    ranks_per_node: int
    sites: list
    varies: list
    rows: list
    seed_001_bandwidth_gains: dict
    calibration: list
