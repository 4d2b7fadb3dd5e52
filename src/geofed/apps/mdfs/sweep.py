"""`geofed mdfs sweep`: seed 000's Tables 1 and 2 on the testbed.

The same analysis on each placement, on a private copy of the federation for the
command (its own name, brought up here and always taken down), on the testbed that is
up for the demo. Per placement and split: the median
analysis time (staging apart), speedup over one W node, and the time the combined
speed of its nodes allows, taken from the single-node runs of each site
(ideal = 1 / sum over nodes of 1/T_one_node(site)).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from geofed import records
from geofed.errors import UserError


def check(fed, placements: str, splits: str, params, on_copy: bool) -> tuple[list[str], list[str]]:
    """The placement codes and splits; refused (UserError) before anything is brought up."""
    from geofed.apps.mdfs import dist
    from geofed.launch.placement import parse
    from geofed.testbed import core as tb
    params.check()
    if on_copy:
        tb.require_root("sweep MDFS on")
    codes = [c.strip() for c in placements.split(",") if c.strip()]
    split_list = [s.strip() for s in splits.split(",") if s.strip()]
    if any(s not in dist.SPLITS for s in split_list):
        raise UserError(f"--split: expected speed, even or calibrate, got {splits!r}")
    for c in codes:
        parse(c, fed)
    return codes, split_list


def measure(fed, placements: str, splits: str, repeat: int, params, data_seed: int, private: bool,
            progress) -> records.Record:
    """The sweep on `fed`'s testbed, which is up, or on a private copy of it (`private`)."""
    from geofed.apps.mdfs import data
    from geofed.testbed import core as tb
    codes, split_list = check(fed, placements, splits, params, private)
    ds = data.madelon_like(seed=data_seed)
    if not private:
        return sweep(fed, codes, split_list, repeat, params, ds, progress)
    with tb.owned_copy(fed, "gfmdfs", progress) as copy:
        return sweep(copy, codes, split_list, repeat, params, ds, progress, record_as=fed)


def sweep(fed, codes: list[str], splits: list[str], repeat: int, params, ds, progress, record_as=None) -> dict:
    """Run the analysis on each placement of a testbed that is up; an `mdfs.sweep` record.

    `record_as` is the federation the record names (the shipped one a private copy
    was made of); by default `fed` itself.
    """
    from geofed.apps.mdfs import data, dist
    from geofed.launch.placement import parse

    rows = []
    with tempfile.TemporaryDirectory(prefix="geofed-mdfs-sweep-") as tmp:
        npz = data.save_npz(Path(tmp) / "data.npz", ds.x, ds.y)
        for code in codes:
            pl = parse(code, fed)
            one_site = len({n.site for n in pl.nodes(fed)}) == 1
            for split in (["speed"] if one_site else splits):
                times, staging, results = [], [], None
                for r in range(repeat):
                    progress(f"mdfs sweep: {code} split {split} run {r + 1}/{repeat}")
                    res = dist.run_on_placement(fed, pl, npz, params, split)
                    times.append(res["timing"]["compute_s"])
                    staging.append(res["timing"]["staging_s"])
                    results = res
                rows.append({"placement": code, "split": split, "nodes": len(pl.nodes(fed)),
                             "sites": sorted({n.site for n in pl.nodes(fed)}),
                             "compute_s": statistics.median(times), "compute_samples": times,
                             "staging_s": statistics.median(staging), "staging_samples": staging,
                             "staging_bytes": results["ranks"][0]["staging"]["bytes"],
                             "shares": [{"node": p["node"], "tuples": p["tuples"], "count_s": p["count_s"]}
                                        for p in results["ranks"]],
                             "relevant": [int(v) for v in results["relevant"]]})
    named = record_as or fed
    derive(rows, [s.code for s in named.sites])
    return records.make("mdfs.sweep", {"params": params.as_dict(), "data": ds.source, "repeat": repeat,
                                       "storage": named.storage, "rows": rows}, **records.federation_meta(named))


def derive(rows: list[dict], sites: list[str]) -> None:
    """Speedup over one node of the fastest site, and the combined-speed ideal."""
    from geofed.launch.placement import read
    single = {}
    for r in rows:
        if r["nodes"] == 1:
            single[r["sites"][0]] = r["compute_s"]
    base = min(single.values()) if single else None
    for r in rows:
        r["speedup"] = base / r["compute_s"] if base else None
        counts = {g.site: g.count for g in read(r["placement"]).groups}
        if all(s in single for s, c in counts.items() if c):
            rate = sum(c / single[s] for s, c in counts.items() if c)
            r["ideal_s"] = 1.0 / rate
            r["vs_ideal"] = r["compute_s"] / r["ideal_s"] - 1.0
        else:
            r["ideal_s"] = r["vs_ideal"] = None
    # location effect: spread of times among placements with the same node count and split
    for r in rows:
        peers = [q["compute_s"] for q in rows if q["nodes"] == r["nodes"] and q["split"] in ("speed", r["split"])]
        r["location_effect"] = max(peers) / min(peers) - 1.0 if len(peers) > 1 else None


def format_table(rec: records.Record) -> str:
    d = rec.data
    p = d.params
    lines = [f"MDFS {p['dimensions']}D, {p['discretizations']} discretizations on {d.data}; "
             f"federation {rec.meta['federation']} (data at site {d.storage}); medians of {d.repeat}",
             f"{'placement':<9} {'split':<9} {'nodes':>5} {'time [s]':>9} {'staging [s]':>11} {'speedup':>7}"
             f" {'ideal [s]':>9} {'vs ideal':>8} {'loc. effect':>11}"]
    for r in d.rows:
        f = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
        lines.append(f"{r['placement']:<9} {r['split']:<9} {r['nodes']:>5} {r['compute_s']:>9.2f} {r['staging_s']:>11.3f}"
                     f" {f(r['speedup'], '.2f'):>7} {f(r['ideal_s'], '.2f'):>9} {f(r['vs_ideal'] and 100 * r['vs_ideal'], '+.1f'):>7}%"
                     f" {f(r['location_effect'] and 100 * r['location_effect'], '.1f'):>10}%")
    return "\n".join(lines)
