"""`geofed bench check`: a run against per-system reference values with tolerances.

As in ReFrame, a reference is a value with a lower and an upper tolerance, given
as fractions of the value (-0.2 = 20 % below; `inf` = no bound), per system (the
federation's name, or `*` for any), pair class, benchmark and message size:

    [icm-task.inter-site.latency]
    tolerance = [-0.3, 0.3]                 # for every size of this table
    1 = 4510.0                              # us at 1 byte
    "4M" = { value = 13100.0, tolerance = [-0.3, 0.5] }

    [icm-task.inter-site.bw]
    tolerance = [-0.2, inf]
    "4M" = 490.0                            # MB/s

A reference whose size was not measured fails, so a shrunken sweep cannot pass
unnoticed.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

from geofed import records, validate
from geofed.bench import suite
from geofed.errors import UserError
from geofed.validate import read_text

CLASSES = ("intra-node", "intra-site", "inter-site", "*")
# When a table gives no tolerance: latency may not grow by more than 30 % nor bandwidth
# drop by more than 20 % (the example); the other side is as wide, because a
# result far better than the reference usually means a different path (shared
# memory instead of the link) rather than a faster network.
DEFAULT_TOLERANCE = {"us": (-0.3, 0.3), "MB/s": (-0.2, 0.2)}


def _tolerance(value, where: str) -> tuple[float, float]:
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise UserError(f"{where}: tolerance must be [lower, upper] as fractions, like [-0.2, inf]")
    lo, hi = float(value[0]), float(value[1])
    if lo > 0 or hi < 0:
        raise UserError(f"{where}: tolerance [{lo}, {hi}] must contain 0 (lower <= 0 <= upper)")
    return lo, hi


def load_references(path: str | Path) -> list[dict]:
    """Every reference of a file: system, class, benchmark, size, value, lower, upper."""
    path = Path(path)
    try:
        doc = tomllib.loads(read_text(path, "references"))
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None
    refs = []
    for system, classes in doc.items():
        for pclass, benches in _tables(classes, f"{path}: {system}"):
            if pclass not in CLASSES:
                raise UserError(f"{path}: {system}.{pclass}: unknown pair class (known: {', '.join(CLASSES)})")
            for bench, sizes in _tables(benches, f"{path}: {system}.{pclass}"):
                where = f"{path}: {system}.{pclass}.{bench}"
                if bench not in suite.BENCHMARKS:
                    raise UserError(f"{where}: unknown benchmark (known: {', '.join(suite.BENCHMARKS)})")
                default = _tolerance(sizes["tolerance"], where) if "tolerance" in sizes \
                    else DEFAULT_TOLERANCE[suite.BENCHMARKS[bench].unit]
                for key, entry in sizes.items():
                    if key == "tolerance":
                        continue
                    here = f"{where}.{key}"
                    size = validate.parse_size(key)
                    tol = default
                    if isinstance(entry, dict):
                        if set(entry) - {"value", "tolerance"} or "value" not in entry:
                            raise UserError(f"{here}: expected a number or {{ value = ..., tolerance = [lo, hi] }}")
                        tol = _tolerance(entry["tolerance"], here) if "tolerance" in entry else default
                        entry = entry["value"]
                    if isinstance(entry, bool) or not isinstance(entry, (int, float)) or entry <= 0:
                        raise UserError(f"{here}: the reference must be a positive number, got {entry!r}")
                    refs.append({"system": system, "class": pclass, "benchmark": bench, "size": size,
                                 "value": float(entry), "lower": tol[0], "upper": tol[1]})
    if not refs:
        raise UserError(f"{path}: no references in it")
    return refs


def _tables(doc, where: str):
    if not isinstance(doc, dict):
        raise UserError(f"{where}: expected a table")
    for k, v in doc.items():
        if not isinstance(v, dict):
            raise UserError(f"{where}.{k}: expected a table")
        yield k, v


def load_runs(paths: list[str]) -> list[records.Record]:
    """bench.mpi records from files and directories, oldest first."""
    recs = [r for p in map(Path, paths) for r in (records.load_dir(p) if p.is_dir() else records.load_paths([str(p)]))]
    runs = sorted((r for r in recs if r.kind == "bench.mpi"), key=lambda r: r.created)
    if not runs:
        raise UserError(f"{', '.join(paths)}: no bench.mpi records (geofed bench mpi --out DIR writes them)")
    return runs


def latest_results(runs: list[records.Record]) -> dict[tuple[str, str, str], dict]:
    """(system, class, benchmark) -> size -> value, from the newest run that has it."""
    out: dict = {}
    for rec in runs:
        system = rec.federation
        for res in rec.data.results:
            if res["sizes"]:
                out[(system, res["class"], res["benchmark"])] = {r["size"]: r["value"] for r in res["sizes"]}
    return out


def check(refs: list[dict], runs: list[records.Record]) -> list[dict]:
    results = latest_results(runs)
    systems = {k[0] for k in results}
    rows = []
    for ref in refs:
        # As in ReFrame, references of systems not measured here do not apply.
        for system in sorted(systems) if ref["system"] == "*" else [ref["system"]] if ref["system"] in systems else []:
            keys = [k for k in results if k[0] == system and k[2] == ref["benchmark"]
                    and (ref["class"] == "*" or k[1] == ref["class"])]
            measured = next((results[k][ref["size"]] for k in keys if ref["size"] in results[k]), None)
            row = dict(ref, system=system, measured=measured, low=ref["value"] * (1 + ref["lower"]),
                       high=ref["value"] * (1 + ref["upper"]))
            if measured is None:
                row.update(deviation=None, ok=False, status="not measured")
            else:
                row["deviation"] = measured / ref["value"] - 1
                row["ok"] = ref["lower"] <= row["deviation"] <= ref["upper"]
                row["status"] = "ok" if row["ok"] else ("too low" if row["deviation"] < ref["lower"] else "too high")
            rows.append(row)
    if not rows:
        raise UserError(f"no reference applies to the systems measured ({', '.join(sorted(systems))})")
    return rows


def format_table(rows: list[dict], everything: bool = False) -> str:
    shown = rows if everything else [r for r in rows if not r["ok"]]
    out = [f"{'system':<14} {'class':<10} {'bench':<9} {'size':>8} {'reference':>11} {'allowed':>23} "
           f"{'measured':>11} {'dev':>8}  status"]
    for r in shown:
        allowed = f"{r['low']:.2f}..{'inf' if math.isinf(r['high']) else format(r['high'], '.2f')}"
        meas = "-" if r["measured"] is None else f"{r['measured']:.2f}"
        dev = "-" if r["deviation"] is None else f"{r['deviation'] * 100:+.1f}%"
        out.append(f"{r['system']:<14} {r['class']:<10} {r['benchmark']:<9} {r['size']:>8} {r['value']:>11.2f} "
                   f"{allowed:>23} {meas:>11} {dev:>8}  {r['status']}")
    failed = sum(not r["ok"] for r in rows)
    out.append(f"{len(rows) - failed} of {len(rows)} references met" + (f", {failed} failed" if failed else ""))
    return "\n".join(out)


def make_references(runs: list[records.Record]) -> str:
    """A references file from the newest results, with the default tolerances."""
    out = ["# geofed bench check references, written from a run; edit values and tolerances at will"]
    for (system, pclass, bench), sizes in sorted(latest_results(runs).items()):
        lo, hi = DEFAULT_TOLERANCE[suite.BENCHMARKS[bench].unit]
        out += ["", f'["{system}".{pclass}.{bench}]', f"tolerance = [{lo}, {hi}]"]
        out += [f"{size} = {value:.4g}" for size, value in sorted(sizes.items())]
    return "\n".join(out) + "\n"
