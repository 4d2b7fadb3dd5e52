"""Record kinds of the obstacle problem over P2PSAP (seed 003) and the typed parameters of its model."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.records import Sanity, kind
from geofed.validate import positive_int


class ObstacleParams(Params):
    """The obstacle problem solved by P2PSAP peers (sync or async) or MPI Jacobi."""
    scheme: str = param("async", "P2PSAP sync or async peers, or MPI Jacobi", choices=("sync", "async", "mpi"))
    n: int | None = param(None, "grid points per dimension (default: the calibrated n)", type=positive_int)


@kind("obstacle.run")
class ObstacleRun:
    """`geofed obstacle`: one solve on a placement.

    Attributes:
        n: grid points per dimension
        c: the problem's constant c
        delta: the problem's delta
        tol: certified residual asked for
        scheme: sync, async or mpi
        network: the P2PSAP network
        placement: placement code
        peers: per peer: rank, node, site, lo, hi, iterations, seconds, halos_received, snapshots
        certified_residual: residual certified at termination
        recomputed_residual: residual recomputed from the solution
        error_bound: bound on the solution's error
        time_to_solution_s: the slowest peer's time
        residual_history: (seconds, certified residual) seen by peer 0
        files: solution, history and peers files
    """
    n: int
    c: float
    delta: float
    tol: float
    scheme: str
    network: str
    placement: str
    peers: list
    certified_residual: float
    recomputed_residual: float
    error_bound: float
    time_to_solution_s: float
    residual_history: list
    files: dict

    def sanity(self) -> Sanity:
        """the certified residual is within the tolerance asked for."""
        ok = self.certified_residual <= self.tol
        return Sanity(ok, f"residual {self.recomputed_residual:.3g} (certified {self.certified_residual:.3g}) "
                          f"{'<=' if ok else '>'} {self.tol:g}")


@kind("bench.obstacle")
class BenchObstacle:
    """`geofed bench obstacle`, `geofed demo`: seed 003's Table III and the reliable stack against TCP.

    Attributes:
        n: grid points per dimension
        tol: certified residual asked for
        repeat: runs per cell; medians
        link_rtt_ms: the link's RTT
        solver: per placement: placement, peers, across_link, {sync,async,mpi}_s and _iterations,
            async_speedup_vs_mpi
        throughput: one session across the link: pair, mbytes, runs, rows
        lossy: a P2PSAP stream over a lossy link: loss, messages, delivered, extra, sender
    """
    n: int
    tol: float
    repeat: int
    link_rtt_ms: float
    solver: list | None = None
    throughput: dict | None = None
    lossy: dict | None = None

    def sanity(self) -> Sanity:
        """the stream over a lossy link delivered every message once and intact (when measured)."""
        if self.lossy is None:
            return Sanity(True, "no lossy stream measured")
        ok = self.lossy["delivered"] == self.lossy["messages"] and not self.lossy["extra"]
        return Sanity(ok, f"{self.lossy['delivered']} of {self.lossy['messages']} messages delivered intact")
