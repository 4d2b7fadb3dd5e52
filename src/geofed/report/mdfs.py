"""Report sections: MDFS runs, the side-by-side benchmark and the testbed sweep."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, num, percent_change, section, table


@section("mdfs.run", "MDFS feature selection runs", order=60)
def runs(records: list[Record], outdir: Path) -> str:
    rows = []
    for r in records:
        d = r.data
        p = d.params
        t = d.timing
        rows.append([d.source, d.placement or "local", f"{p['dimensions']}D", p["discretizations"],
                     d.n_contrast, len(d.relevant), ", ".join(d.relevant[:12]) + (" ..." if len(d.relevant) > 12 else ""),
                     f"{t.get('compute_s', t.get('count_s', 0)):.2f}", f"{t['staging_s']:.3f}" if "staging_s" in t else "-"])
    return table(["data", "placement", "dim", "discretizations", "contrasts", "relevant", "variables", "analysis [s]",
                  "staging [s]"], rows)


@section("bench.mdfs", "MDFS against the reference library (same machine, data, parameters)", order=61, each=True)
def bench(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    yield f"<p class='meta'>{esc(d.data)}, medians of {d.repeat} · {esc(r.created)}</p>"
    yield table(["case", "side", "CPU [s]", "wall [s]", "× reference (wall)", "× reference (CPU)", "same relevant set"],
                [[x["case"], x["side"], f"{x['cpu_s']:.3f}", f"{x['wall_s']:.3f}", f"{x['speedup_wall']:.1f}",
                  f"{x['speedup_cpu']:.1f}", "yes" if x["same_relevant"] else "NO"] for x in d.rows],
                ["" if x["same_relevant"] else "fail" for x in d.rows])


@section("mdfs.sweep", "MDFS across sites: seed 000's Tables 1 and 2 on the testbed", order=62, each=True)
def sweep(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    p = d.params
    yield (f"<p class='meta'>{p['dimensions']}D, {p['discretizations']} discretizations on {esc(d.data)};"
           f" federation {esc(r.meta.get('federation', ''))}, data at site {esc(d.storage)};"
           f" medians of {d.repeat} · {esc(r.created)}</p>")
    yield table(["placement", "split", "nodes", "analysis [s]", "staging [s]", "speedup", "ideal [s]",
                 "vs ideal", "location effect"],
                [[x["placement"], x["split"], x["nodes"], f"{x['compute_s']:.2f}", f"{x['staging_s']:.3f}",
                  num(x["speedup"], ".2f"), num(x["ideal_s"], ".2f"), percent_change(x["vs_ideal"]),
                  percent_change(x["location_effect"])] for x in d.rows])
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for split, colour in (("speed", "tab:blue"), ("even", "tab:orange"), ("calibrate", "tab:green")):
        xs = [x for x in d.rows if x["split"] == split]
        if xs:
            ax.bar([d.rows.index(x) for x in xs], [x["compute_s"] for x in xs], color=colour, label=f"split: {split}")
    ideal = [(j, x["ideal_s"]) for j, x in enumerate(d.rows) if x["ideal_s"]]
    ax.plot([j for j, _ in ideal], [v for _, v in ideal], "k_", markersize=18, label="combined node speed")
    ax.set_xticks(range(len(d.rows)), [x["placement"] for x in d.rows], rotation=30, fontsize=8)
    ax.set_ylabel("analysis time [s]")
    ax.legend(fontsize=8)
    yield figure(fig, outdir, f"mdfs-sweep-{i}.png", "MDFS time per placement")
