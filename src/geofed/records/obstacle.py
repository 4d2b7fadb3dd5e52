"""Record kinds of the obstacle problem over P2PSAP (seed 003) and the typed parameters of its model."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.records import Sanity, doc, kind
from geofed.validate import positive_int


class ObstacleParams(Params):
    """The obstacle problem solved by P2PSAP peers (sync or async) or MPI Jacobi."""
    scheme: str = param("async", "P2PSAP sync or async peers, or MPI Jacobi", choices=("sync", "async", "mpi"))
    n: int | None = param(None, "grid points per dimension (default: the calibrated n)", type=positive_int)


@kind("obstacle.run")
class ObstacleRun:
    """`geofed obstacle`: one solve on a placement."""
    n: int = doc("grid points per dimension")
    c: float = doc("the problem's constant c")
    delta: float = doc("the problem's delta")
    tol: float = doc("certified residual asked for")
    scheme: str = doc("sync, async or mpi")
    network: str = doc("the P2PSAP network")
    placement: str = doc("placement code")
    peers: list = doc("per peer: rank, node, site, lo, hi, iterations, seconds, halos_received, snapshots")
    certified_residual: float = doc("residual certified at termination")
    recomputed_residual: float = doc("residual recomputed from the solution")
    error_bound: float = doc("bound on the solution's error")
    time_to_solution_s: float = doc("the slowest peer's time")
    residual_history: list = doc("(seconds, certified residual) seen by peer 0")
    files: dict = doc("solution, history and peers files")

    def sanity(self) -> Sanity:
        """the certified residual is within the tolerance asked for."""
        ok = self.certified_residual <= self.tol
        return Sanity(ok, f"residual {self.recomputed_residual:.3g} (certified {self.certified_residual:.3g}) "
                          f"{'<=' if ok else '>'} {self.tol:g}")


@kind("bench.obstacle")
class BenchObstacle:
    """`geofed bench obstacle`, `geofed demo`: seed 003's Table III and the reliable stack against TCP."""
    n: int = doc("grid points per dimension")
    tol: float = doc("certified residual asked for")
    repeat: int = doc("runs per cell; medians")
    link_rtt_ms: float = doc("the link's RTT")
    solver: list | None = doc("per placement: placement, peers, across_link, {sync,async,mpi}_s and _iterations, "
                              "async_speedup_vs_mpi", None)
    throughput: dict | None = doc("one session across the link: pair, mbytes, runs, rows", None)
    lossy: dict | None = doc("a P2PSAP stream over a lossy link: loss, messages, delivered, extra, sender", None)

    def sanity(self) -> Sanity:
        """the stream over a lossy link delivered every message once and intact (when measured)."""
        if self.lossy is None:
            return Sanity(True, "no lossy stream measured")
        ok = self.lossy["delivered"] == self.lossy["messages"] and not self.lossy["extra"]
        return Sanity(ok, f"{self.lossy['delivered']} of {self.lossy['messages']} messages delivered intact")
