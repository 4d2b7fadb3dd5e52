"""Record kinds of MDFS (seed 000) and the typed parameters of its model."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.records import Sanity, doc, kind


class MdfsSplitParams(Params):
    """How MDFS shares its tuples among the nodes of a placement: what its model's time depends on."""
    split: str = param("speed", "how tuples are shared: by cores x site speed, or evenly", choices=("speed", "even"))


@kind("mdfs.run")
class MdfsRun:
    """`geofed mdfs run`: one feature selection, locally or on a placement."""
    params: dict = doc("MDFS's parameters (apps.mdfs.core.Params)")
    range: float = doc("discretisation range used")
    n_objects: int = doc("objects (rows) of the data")
    n_variables: int = doc("variables (columns)")
    n_contrast: int = doc("contrast variables added")
    tuples_scored: int = doc("variable tuples scored")
    timing: dict = doc("seconds per phase (prepare_s, count_s or compute_s, staging_s)")
    source: str = doc("the data set")
    placement: str | None = doc("placement code; null: run locally")
    files: dict = doc("output files written")
    relevant: list = doc("names of the relevant variables")
    max_ig: list = doc("maximum information gain per variable")
    alpha: float | None = doc("the p-value fit's scale")
    fit_mode: str = doc("how p-values come from chi-square ones: raw, lin or exp")
    split: str | None = doc("how tuples were shared among nodes (on a placement)", None)
    ranks: list | None = doc("per rank: node, tuples, timings (on a placement)", None)


@kind("bench.mdfs")
class BenchMdfs:
    """`geofed bench mdfs`: geofed's MDFS against the reference library on the same machine, data and parameters."""
    n_objects: int = doc("objects of the data")
    n_variables: int = doc("variables")
    data: str = doc("the data set")
    repeat: int = doc("runs per case and side; medians")
    host_cpus: int = doc("the host's CPUs")
    rows: list = doc("per case and side: case, side, cpu_s, wall_s, samples, relevant, speedup_wall, "
                     "speedup_cpu, same_relevant")

    def sanity(self) -> Sanity:
        """geofed found the reference's relevant set in every case."""
        bad = sorted({r["case"] for r in self.rows if not r["same_relevant"]})
        return Sanity(not bad, f"relevant set differs from the reference in {', '.join(map(str, bad))}" if bad
                      else "same relevant set as the reference in every case")


@kind("mdfs.sweep")
class MdfsSweep:
    """`geofed mdfs sweep`, `geofed demo`: MDFS across placements and splits (seed 000's Tables 1 and 2)."""
    params: dict = doc("MDFS's parameters (apps.mdfs.core.Params)")
    data: str = doc("the data set")
    repeat: int = doc("runs per placement and split; medians")
    storage: str = doc("the site holding the data")
    rows: list = doc("per placement and split: placement, split, nodes, sites, compute_s, staging_s, staging_bytes, "
                     "shares, relevant, speedup, ideal_s, vs_ideal, location_effect")

    def sanity(self) -> Sanity:
        """every placement and split found the same relevant variables."""
        sets = {tuple(r["relevant"]) for r in self.rows}
        return Sanity(len(sets) <= 1, "the same relevant set on every placement" if len(sets) <= 1
                      else f"{len(sets)} different relevant sets among the placements")
