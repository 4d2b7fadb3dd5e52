"""Predict before you run: a performance model of each workload on any placement.

Every model has the same shape. Inputs: the federation (sites, nodes, links: the
only source of inter-site behaviour), a placement, the workload's parameters and the
per-node constants of a `Calibration` (fitted from one-site runs). Output: a
`Prediction`, the time and its parts (compute, local communication, link
communication, staging/I/O), so a user sees where the time goes before spending an
allocation.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from geofed.params import Declared, add_options, from_args

PARTS = ("compute", "local_comm", "link_comm", "staging")


@dataclass(frozen=True)
class Prediction:
    workload: str
    placement: str
    parts: dict[str, float]  # seconds, keys from PARTS
    link_bytes: float = 0.0  # bytes the link carries in the run (both directions)
    notes: tuple[str, ...] = field(default_factory=tuple)
    interval: tuple[float, float] | None = None  # seconds, low and high, where the model knows its spread

    @property
    def total_s(self) -> float:
        return sum(self.parts.values())

    def as_dict(self) -> dict:
        return {"workload": self.workload, "placement": self.placement, "total_s": self.total_s,
                "parts": dict(self.parts), "link_bytes": self.link_bytes, "notes": list(self.notes)} \
            | ({"interval_s": list(self.interval)} if self.interval else {})


class Model(Declared):
    """A workload's model: `predict(fed, cal, placement, nodes, params)` with `params` an
    instance of its `Params` (a dataclass of geofed.records, the same the workload's
    records hold). Declared in its class line: `name`, `measured_unit`, `Params`."""
    name: str = ""
    measured_unit: str = ""
    Params: type = type(None)
    # False: it predicts without a calibration (its input carries what it measured), and
    # uses one where there is one (the testbed's crossing costs)
    needs_calibration: bool = True

    def nodes(self, params) -> int | None:
        """The nodes its workload needs, when its parameters say (advise's --nodes otherwise)."""
        return None

    def add_arguments(self, ap) -> None:
        """Its options, one per field of its Params."""
        add_options(ap, self.Params)

    def params(self, args) -> object:
        """The typed parameters from those options."""
        return from_args(self.Params, args)


def prediction(workload: str, placement: str, *, compute=0.0, local_comm=0.0, link_comm=0.0, staging=0.0,
               link_bytes=0.0, notes=(), interval=None) -> Prediction:
    parts = {"compute": compute, "local_comm": local_comm, "link_comm": link_comm, "staging": staging}
    return Prediction(workload, placement, parts, link_bytes, tuple(notes), interval)


def interpolate(xs: list[float], ys: list[float], x: float, *, beyond: str = "proportional") -> float:
    """y at x from a measured curve: linear between points, proportional to x below the first;
    above the last, proportional to x, or (`beyond="linear"`) along the last segment."""
    if x <= xs[0]:
        return ys[0] * x / xs[0]
    if x >= xs[-1]:
        if beyond == "linear" and len(xs) > 1:
            return ys[-1] + (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) * (x - xs[-1])
        return ys[-1] * x / xs[-1] if beyond == "proportional" else ys[-1]
    i = bisect.bisect_left(xs, x)
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - xs[i - 1]) / (xs[i] - xs[i - 1])
