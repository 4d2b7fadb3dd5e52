"""`geofed bench check`: runs against reference values with tolerances.

As in ReFrame, a reference is a value with a lower and an upper tolerance, given
as fractions of the value (-0.2 = 20 % below; `inf` = no bound), per system (the
federation's name, or `*` for any), scope, benchmark and message size. The scope is a
pair class (`inter-site`, `intra-site`, `intra-node`, `*`), a link (two site codes,
`"W-G"`: the runs between exactly those sites) or a node pair (`"W1-G1"`); each link of
a federation has its own length, so its own references:

    [icm-task."W-G".latency]
    tolerance = [-0.3, 0.3]                 # for every size of this table
    1 = 4510.0                              # us at 1 byte
    "4M" = { value = 13100.0, tolerance = [-0.3, 0.5] }

    [icm-task.inter-site.bw]                # every inter-site run without a closer reference
    tolerance = [-0.2, inf]
    "4M" = 490.0                            # MB/s

Every run is checked, each measurement against its closest reference (node pair, then
link, then class, then `*`). A reference that no run measured fails, so a shrunken
sweep or a link left out cannot pass unnoticed.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
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


def _scope(key: str, where: str) -> str:
    if key in CLASSES or (key.count("-") == 1 and all(key.split("-"))):
        return key
    raise UserError(f"{where}: unknown scope (a pair class: {', '.join(CLASSES)}; a link like \"W-G\"; "
                    f"a node pair like \"W1-G1\")")


def load_references(path: str | Path) -> list[dict]:
    """Every reference of a file: system, scope, benchmark, size, value, lower, upper."""
    path = Path(path)
    try:
        doc = tomllib.loads(read_text(path, "references"))
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None
    refs = []
    for system, scopes in doc.items():
        for key, benches in _tables(scopes, f"{path}: {system}"):
            scope = _scope(key, f"{path}: {system}.{key}")
            for bench, sizes in _tables(benches, f"{path}: {system}.{scope}"):
                where = f"{path}: {system}.{scope}.{bench}"
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
                    refs.append({"system": system, "scope": scope, "benchmark": bench, "size": size,
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


@dataclass(frozen=True)
class Measured:
    """One benchmark of one run: where it ran and its value per size."""
    run: str
    system: str
    pclass: str
    benchmark: str
    nodes: tuple[str, ...]  # the ranks' nodes in rank order, each once
    sites: tuple[str, ...]
    sizes: dict

    @property
    def pair(self) -> str:
        return "-".join(self.nodes)

    @property
    def link(self) -> str | None:
        """The two sites it ran between, if it did."""
        return "-".join(self.sites) if len(self.sites) == 2 else None


def measurements(runs: list[records.Record]) -> list[Measured]:
    """Every benchmark of every run, oldest run first."""
    out = []
    for rec in runs:
        for res in rec.data.results:
            if not res["sizes"]:
                continue
            ranks = rec.data.ranks[:res.get("ranks") or len(rec.data.ranks)]
            nodes = tuple(dict.fromkeys(r["node"] for r in ranks))
            sites = tuple(dict.fromkeys(r["site"] for r in ranks))
            out.append(Measured(rec.path or rec.created, rec.federation, res["class"], res["benchmark"], nodes,
                                sites, {r["size"]: r["value"] for r in res["sizes"]}))
    return out


def closeness(ref: dict, m: Measured) -> int:
    """How closely a reference's scope names where m ran (0: it does not apply)."""
    if ref["system"] not in ("*", m.system) or ref["benchmark"] != m.benchmark:
        return 0
    scope = ref["scope"]
    if scope in CLASSES:
        return 2 if scope == m.pclass else 1 if scope == "*" else 0
    ends = set(scope.split("-"))
    if len(m.nodes) == 2 and ends == set(m.nodes):
        return 4
    return 3 if m.link is not None and ends == set(m.sites) else 0


def check(refs: list[dict], runs: list[records.Record]) -> list[dict]:
    measured = measurements(runs)
    systems = {m.system for m in measured}
    rows, used = [], set()
    for m in measured:
        for size, value in sorted(m.sizes.items()):
            fits = [(closeness(r, m), i) for i, r in enumerate(refs) if r["size"] == size and closeness(r, m)]
            if not fits:
                continue
            used.update(i for _, i in fits)  # a wider reference a closer one overrides is not unmeasured
            ref = refs[max(fits)[1]]
            deviation = value / ref["value"] - 1
            ok = ref["lower"] <= deviation <= ref["upper"]
            rows.append(_row(ref, m.system, run=m.run, pair=m.pair, link=m.link, measured=value, deviation=deviation,
                             ok=ok, status="ok" if ok else "too low" if deviation < ref["lower"] else "too high"))
    for i, ref in enumerate(refs):
        # As in ReFrame, references of systems not measured here do not apply.
        for system in sorted(systems) if ref["system"] == "*" else [ref["system"]] if ref["system"] in systems else []:
            if i not in used:
                rows.append(_row(ref, system, run=None, pair=None, link=None, measured=None, deviation=None, ok=False,
                                 status="not measured"))
    if not rows:
        raise UserError(f"no reference applies to the systems measured ({', '.join(sorted(systems))})")
    return rows


def _row(ref: dict, system: str, **outcome) -> dict:
    return dict(ref, system=system, low=ref["value"] * (1 + ref["lower"]), high=ref["value"] * (1 + ref["upper"]),
                **outcome)


def format_table(rows: list[dict], everything: bool = False) -> str:
    shown = rows if everything else [r for r in rows if not r["ok"]]
    out = [f"{'system':<14} {'reference for':<13} {'nodes':<9} {'bench':<9} {'size':>8} {'reference':>11} "
           f"{'allowed':>23} {'measured':>11} {'dev':>8}  status"]
    for r in shown:
        allowed = f"{r['low']:.2f}..{'inf' if math.isinf(r['high']) else format(r['high'], '.2f')}"
        meas = "-" if r["measured"] is None else f"{r['measured']:.2f}"
        dev = "-" if r["deviation"] is None else f"{r['deviation'] * 100:+.1f}%"
        out.append(f"{r['system']:<14} {r['scope']:<13} {r['pair'] or '-':<9} {r['benchmark']:<9} {r['size']:>8} "
                   f"{r['value']:>11.2f} {allowed:>23} {meas:>11} {dev:>8}  {r['status']}")
    failed = sum(not r["ok"] for r in rows)
    out.append(f"{len(rows) - failed} of {len(rows)} references met" + (f", {failed} failed" if failed else ""))
    return "\n".join(out)


def make_references(runs: list[records.Record]) -> str:
    """A references file from the newest result per link (per class within a site), with the default tolerances."""
    newest: dict[tuple[str, str, str], dict] = {}
    for m in measurements(runs):
        newest[(m.system, m.link or m.pclass, m.benchmark)] = m.sizes
    out = ["# geofed bench check references, written from runs; edit values and tolerances at will"]
    for (system, scope, bench), sizes in sorted(newest.items()):
        lo, hi = DEFAULT_TOLERANCE[suite.BENCHMARKS[bench].unit]
        out += ["", f'["{system}"."{scope}".{bench}]', f"tolerance = [{lo}, {hi}]"]
        out += [f"{size} = {value:.4g}" for size, value in sorted(sizes.items())]
    return "\n".join(out) + "\n"
