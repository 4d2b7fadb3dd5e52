"""What an analysis leaves behind: a CSV per variable, a JSON result and the record
(the report renders the record; this module only writes data and the console table)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np


def _tuple_names(result: dict, names: list[str], v: int) -> str:
    return "+".join(names[i] for i in result["best_tuple"][v] if i >= 0)


def write(result: dict, names: list[str], outdir: str | Path) -> dict[str, str]:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    relevant = set(int(i) for i in result["relevant"])
    ig_csv = outdir / "mdfs-ig.csv"
    with open(ig_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variable", "index", "max_ig", "chi_squared", "p_value", "adjusted_p_value", "relevant",
                    "best_tuple", "best_discretization"])
        for v, name in enumerate(names):
            w.writerow([name, v, repr(float(result["max_ig"][v])), repr(float(result["chi_squared"][v])),
                        repr(float(result["p_value"][v])), repr(float(result["adjusted_p_value"][v])),
                        int(v in relevant), _tuple_names(result, names, v), int(result["best_discretization"][v])])
    tuples_csv = outdir / "mdfs-tuples.csv"
    with open(tuples_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variable", "ig", "discretization"] + [f"member{j + 1}" for j in range(result["best_tuple"].shape[1])])
        for v in sorted(range(len(names)), key=lambda v: -result["max_ig"][v]):
            w.writerow([names[v], repr(float(result["max_ig"][v])), int(result["best_discretization"][v])]
                       + [names[i] for i in result["best_tuple"][v]])
    js = outdir / "mdfs-result.json"
    js.write_text(json.dumps({**jsonable(result), "variables": names}, indent=1))
    return {"ig_csv": str(ig_csv), "tuples_csv": str(tuples_csv), "json": str(js)}


def jsonable(x):
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def table(result: dict, names: list[str], limit: int = 40) -> str:
    rel = sorted((int(v) for v in result["relevant"]), key=lambda v: result["adjusted_p_value"][v])
    p = result["params"]
    lines = [f"{len(rel)} relevant of {result['n_variables']} variables ({p['dimensions']}D, {p['divisions']} division(s),"
             f" {p['discretizations']} discretization(s), {result['n_contrast']} contrast variables, level {p['level']})",
             f"{'variable':<16} {'max IG':>10} {'p-value':>11} {'adj. p':>11}  best tuple"]
    for v in rel[:limit]:
        lines.append(f"{names[v]:<16} {result['max_ig'][v]:>10.4f} {result['p_value'][v]:>11.3e}"
                     f" {result['adjusted_p_value'][v]:>11.3e}  {_tuple_names(result, names, v)}")
    if len(rel) > limit:
        lines.append(f"... {len(rel) - limit} more in mdfs-ig.csv")
    return "\n".join(lines)


def summary(rec_data) -> str:
    """What a terminal shows of an `mdfs.run` record: the relevant variables (from the
    result file it names: the record keeps no p-values), the times and the files."""
    result = json.loads(Path(rec_data.files["json"]).read_text())
    files = rec_data.files
    return "\n".join([table(result, result["variables"]),
                      "time: " + ", ".join(f"{k.removesuffix('_s')} {v:.2f} s" for k, v in rec_data.timing.items()),
                      f"results: {files['ig_csv']}, {files['tuples_csv']}, {files['json']}"])


def record_data(result: dict, names: list[str], source: str, placement: str | None, files: dict) -> dict:
    keep = ("params", "range", "n_objects", "n_variables", "n_contrast", "tuples_scored", "timing", "split")
    d = {k: jsonable(result[k]) for k in keep if k in result}
    d.update(source=source, placement=placement, files=files,
             relevant=[names[int(v)] for v in result["relevant"]],
             max_ig=jsonable(result["max_ig"]), alpha=result["alpha"], fit_mode=result["fit_mode"])
    if "ranks" in result:
        d["ranks"] = jsonable(result["ranks"])
    return d
