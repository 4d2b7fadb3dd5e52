"""The obstacle problem (seed 003): synchronous and asynchronous peers, and MPI Jacobi.

Synchronous schemes (P2PSAP sync, MPI) iterate in lock step: every iteration costs
the slowest peer's compute, the one-site communication measured per iteration, and
across a link one halo exchange plus one residual reduction: two one-way trips.
The iteration count does not change with the placement.

Asynchronous peers never wait: each iterates at its own compute pace; the peer
across the link works with halos one link delay old, which costs extra iterations,
and convergence detection crosses the link six times (fresh halo, vote, snapshot
start, snapshot faces, residual, stop: docs/p2psap.md). The model counts the stale
halos' cost as one extra iteration for every iteration the link delay spans, on
each side of the interface; docs/model.md shows how far that holds.
"""

from __future__ import annotations

import math

from geofed.model import Model, Prediction, prediction
from geofed.model.network import route, serialisation_s
from geofed.records.obstacle import ObstacleParams

TERMINATION_TRIPS = 6
CALIBRATED_PEERS = 2  # the one-site calibration run (`geofed bench obstacle`, W2)


class Obstacle(Model, name="obstacle", measured_unit="s", Params=ObstacleParams):
    """3-D obstacle problem (seed 003): P2PSAP sync/async peers or MPI Jacobi"""

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        sites = [n.site for n in nodes]
        n0 = cal.value(sites[0], "obstacle_n", "obstacle grid size")
        n = params.n or n0
        # work per iteration grows with n^3 / peers, Jacobi's iteration count with n^2
        work = (n / n0) ** 3 * CALIBRATED_PEERS / len(sites)
        sweeps = (n / n0) ** 2
        compute_iter = max(cal.value(s, "obstacle_iter_s", "obstacle cost per iteration") for s in sites) * work
        crossing = [route(fed, a, b, cal) for a, b in zip(sites, sites[1:]) if a != b]
        halo_bytes = 8 * n * n
        if params.scheme == "async":
            iterations = cal.value(sites[0], "obstacle_async_iterations", "obstacle async iterations") * sweeps
            link = 0.0
            if crossing:
                delay = max(r.extra_one_way_s for r in crossing)
                iterations += 2 * math.ceil(delay / compute_iter)  # both sides of the interface lag
                link = TERMINATION_TRIPS * delay
            return prediction(self.name, placement, compute=iterations * compute_iter, link_comm=link,
                              link_bytes=iterations * halo_bytes * 2 * len(crossing))
        iterations = cal.value(sites[0], f"obstacle_{params.scheme}_iterations", "obstacle iterations") * sweeps
        local = iterations * cal.value(sites[0], f"obstacle_{params.scheme}_comm_s", "obstacle communication")
        link = 0.0
        if crossing:
            worst = max(crossing, key=lambda r: r.extra_one_way_s)
            link = iterations * (2 * worst.extra_one_way_s + serialisation_s(halo_bytes, worst.rate_Bps))
        return prediction(self.name, placement, compute=iterations * compute_iter, local_comm=local, link_comm=link,
                          link_bytes=iterations * halo_bytes * 2 * len(crossing))


MODELS = (Obstacle(),)
