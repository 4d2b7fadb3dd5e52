"""The Gray-Scott workflow (seed 000): a simulation streaming its fields over SST to consumers.

Per simulation step: the stencil (the one-site time per step at this L, interpolated
in L^3 and scaled by ranks), plus, every plotgap steps, the writer's local staging
(gather to rank 0 and handing the step to SST: the one-site time per MB) and any wait
for the consumers. Each full-field consumer pulls the step across the link (a request
round trip, then the bytes at the link's rate) through the writer's one data-plane
thread, so consumers take turns; the writer waits when that takes longer than the
simulation needs for plotgap steps.
"""

from __future__ import annotations

from geofed.model import Model, Prediction, interpolate, prediction
from geofed.model.network import route, serialisation_s
from geofed.records.grayscott import GrayScottParams

FIELDS = 2  # U and V, float64


def step_bytes(L: int) -> int:
    return FIELDS * L ** 3 * 8


class GrayScott(Model, name="grayscott", measured_unit="ms/step", Params=GrayScottParams):
    """Gray-Scott simulation at the placement's first site streaming to consumers at its last (per step)"""

    def predict(self, fed, cal, placement, nodes, params) -> Prediction:
        sim, analysis = nodes[0].site, nodes[-1].site
        xs = cal.value(sim, "grayscott_L", "Gray-Scott stencil time")
        ys = cal.value(sim, "grayscott_compute_ms", "Gray-Scott stencil time")
        ranks0 = cal.value(sim, "grayscott_ranks", "Gray-Scott stencil time")
        # the stencil's work grows with L^3
        compute = interpolate([x ** 3 for x in xs], ys, params.L ** 3) / 1e3 * ranks0 / params.sim_ranks
        nbytes = step_bytes(params.L)
        local = cal.value(sim, "grayscott_stage_ms_per_mb", "Gray-Scott staging inside a site") * nbytes / 1e6 / 1e3
        r = route(fed, sim, analysis, cal, transport="tcp")  # SST's EVPath sockets
        delivery = params.consumers * (r.rtt_s + serialisation_s(nbytes, r.rate_Bps))
        wait = max(0.0, delivery - params.plotgap * compute)
        return prediction(self.name, placement, compute=compute, staging=local / params.plotgap,
                          link_comm=wait / params.plotgap,
                          link_bytes=params.consumers * nbytes / params.plotgap if r.crosses_link else 0.0)


MODELS = (GrayScott(),)
