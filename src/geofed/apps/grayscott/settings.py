"""Settings of a Gray-Scott run, in a JSON file of the same shape as the ADIOS2 tutorial's.

    {"L": 64, "Du": 0.2, "Dv": 0.1, "F": 0.01, "k": 0.05, "dt": 2.0,
     "plotgap": 10, "steps": 1000, "noise": 1e-7, "output": "gs.bp"}

geofed adds "engine" (SST, BP5 or none) and "seed". Tutorial keys geofed does not act
on (adios_config, mesh_type, adios_span, adios_memory_selection, checkpoint_freq,
checkpoint_output, restart_input) are accepted and ignored, so a tutorial file loads
as it is; checkpoint and restart set to true are refused rather than silently skipped.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from geofed.errors import UserError
from geofed.validate import read_text

ENGINES = ("SST", "BP5", "none")
IGNORED = {"adios_config", "mesh_type", "adios_span", "adios_memory_selection", "checkpoint_freq",
           "checkpoint_output", "restart_input"}
REFUSED = {"checkpoint", "restart"}


@dataclass(frozen=True)
class Settings:
    L: int = 64
    Du: float = 0.2
    Dv: float = 0.1
    F: float = 0.01
    k: float = 0.05
    dt: float = 2.0
    plotgap: int = 10
    steps: int = 1000
    noise: float = 1e-7
    output: str = "gs.bp"
    engine: str = "SST"
    seed: int = 42

    def to_json(self) -> dict:
        return asdict(self)

    def output_steps(self) -> list[int]:
        """Simulation steps after which the fields are written: every plotgap-th."""
        return list(range(self.plotgap, self.steps + 1, self.plotgap))

    def stability_margin(self) -> float:
        """dt times the fastest decay rate, which explicit Euler needs at most 2.

        The 7-point Laplacian divided by 6 has eigenvalues in [-2, 0]; the linear
        reaction terms add -F (u) and -(F + k) (v). Euler's amplification factor
        1 + dt * lambda stays within [-1, 1] while dt * (2 D + F + k) <= 2.
        """
        return self.dt * (2 * max(self.Du, self.Dv) + self.F + self.k)

    def warnings(self) -> list[str]:
        out = []
        if self.stability_margin() > 2:
            limit = 2 / (2 * max(self.Du, self.Dv) + self.F + self.k)
            out.append(f"dt = {self.dt:g} is above the explicit-Euler stability limit {limit:.3g} "
                       f"for Du = {self.Du:g}, Dv = {self.Dv:g}, F = {self.F:g}, k = {self.k:g}: the fields will blow up")
        if self.output_steps() == []:
            out.append(f"steps = {self.steps} < plotgap = {self.plotgap}: no step will be written")
        return out


def _check(where: str, key: str, value, kind: type, minimum=None, positive=False):
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise UserError(f"{where}: {key} must be {'an integer' if kind is int else 'a number' if kind is float else 'a string'}, got {value!r}")
    if kind is float and not math.isfinite(value):
        raise UserError(f"{where}: {key} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise UserError(f"{where}: {key} must be positive, got {value!r}")
    if minimum is not None and value < minimum:
        raise UserError(f"{where}: {key} must be at least {minimum}, got {value!r}")
    return value


def from_dict(doc: dict, where: str = "settings") -> Settings:
    if not isinstance(doc, dict):
        raise UserError(f"{where}: expected a JSON object of settings, got {type(doc).__name__}")
    known = {f.name: f for f in fields(Settings)}
    values = {}
    for key, value in doc.items():
        if key in IGNORED:
            continue
        if key in REFUSED:
            if value:
                raise UserError(f"{where}: {key} = true is not supported by geofed's Gray-Scott (set it to false)")
            continue
        if key not in known:
            raise UserError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        values[key] = value
    s = Settings()
    checked = {}
    for key, value in values.items():
        if key in ("L", "plotgap"):
            checked[key] = _check(where, key, value, int, positive=True)
        elif key in ("steps", "seed"):
            checked[key] = _check(where, key, value, int, minimum=0)
        elif key == "dt":
            checked[key] = _check(where, key, value, float, positive=True)
        elif key in ("output", "engine"):
            checked[key] = _check(where, key, value, str)
        else:
            checked[key] = _check(where, key, value, float, minimum=0.0)
    if "engine" in checked:
        by_lower = {e.lower(): e for e in ENGINES}
        if checked["engine"].lower() not in by_lower:
            raise UserError(f"{where}: unknown engine {checked['engine']!r} (use {', '.join(ENGINES)})")
        checked["engine"] = by_lower[checked["engine"].lower()]
    return Settings(**{**s.to_json(), **checked})


def load(path: str | Path) -> Settings:
    path = Path(path)
    try:
        doc = json.loads(read_text(path, "settings"))
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    return from_dict(doc, str(path))


def with_overrides(path: str | None, **overrides) -> Settings:
    """The settings of a file (none: the tutorial's defaults) with the values given (not
    None) in their place: `--settings gs.json --L 128`."""
    base = load(path).to_json() if path else {}
    given = {k: v for k, v in overrides.items() if v is not None}
    return from_dict({**base, **given}, path or "parameters")
