"""Record kinds of MDFS (seed 000) and the typed parameters of its model."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.records import Sanity, kind


class MdfsSplitParams(Params):
    """How MDFS shares its tuples among the nodes of a placement: what its model's time depends on."""
    split: str = param("speed", "how tuples are shared: by cores x site speed, or evenly", choices=("speed", "even"))


@kind("mdfs.run")
class MdfsRun:
    """`geofed mdfs run`: one feature selection, locally or on a placement.

    Attributes:
        params: MDFS's parameters (apps.mdfs.core.Params)
        range: discretisation range used
        n_objects: objects (rows) of the data
        n_variables: variables (columns)
        n_contrast: contrast variables added
        tuples_scored: variable tuples scored
        timing: seconds per phase (prepare_s, count_s or compute_s, staging_s)
        source: the data set
        placement: placement code; null: run locally
        files: output files written
        relevant: names of the relevant variables
        max_ig: maximum information gain per variable
        alpha: the p-value fit's scale
        fit_mode: how p-values come from chi-square ones: raw, lin or exp
        split: how tuples were shared among nodes (on a placement)
        ranks: per rank: node, tuples, timings (on a placement)
    """
    params: dict
    range: float
    n_objects: int
    n_variables: int
    n_contrast: int
    tuples_scored: int
    timing: dict
    source: str
    placement: str | None
    files: dict
    relevant: list
    max_ig: list
    alpha: float | None
    fit_mode: str
    split: str | None = None
    ranks: list | None = None


@kind("bench.mdfs")
class BenchMdfs:
    """`geofed bench mdfs`: geofed's MDFS against the reference library on the same machine, data and parameters.

    Attributes:
        n_objects: objects of the data
        n_variables: variables
        data: the data set
        repeat: runs per case and side; medians
        host_cpus: the host's CPUs
        rows: per case and side: case, side, cpu_s, wall_s, samples, relevant, speedup_wall, speedup_cpu,
            same_relevant
    """
    n_objects: int
    n_variables: int
    data: str
    repeat: int
    host_cpus: int
    rows: list

    def sanity(self) -> Sanity:
        """geofed found the reference's relevant set in every case."""
        bad = sorted({r["case"] for r in self.rows if not r["same_relevant"]})
        return Sanity(not bad, f"relevant set differs from the reference in {', '.join(map(str, bad))}" if bad
                      else "same relevant set as the reference in every case")


@kind("mdfs.sweep")
class MdfsSweep:
    """`geofed mdfs sweep`, `geofed demo`: MDFS across placements and splits (seed 000's Tables 1 and 2).

    Attributes:
        params: MDFS's parameters (apps.mdfs.core.Params)
        data: the data set
        repeat: runs per placement and split; medians
        storage: the site holding the data
        rows: per placement and split: placement, split, nodes, sites, compute_s, staging_s, staging_bytes,
            shares, relevant, speedup, ideal_s, vs_ideal, location_effect
    """
    params: dict
    data: str
    repeat: int
    storage: str
    rows: list

    def sanity(self) -> Sanity:
        """every placement and split found the same relevant variables."""
        sets = {tuple(r["relevant"]) for r in self.rows}
        return Sanity(len(sets) <= 1, "the same relevant set on every placement" if len(sets) <= 1
                      else f"{len(sets)} different relevant sets among the placements")
