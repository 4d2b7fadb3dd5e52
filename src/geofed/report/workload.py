"""Report section of workloads without a section of their own (records of kind
workload.result): their rows as a table, their verdict, and where the rows go by
message size, each measured column against the size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, section, table

NOT_PLOTTED = {"size", "iterations", "repeat"}


@section("workload.result", "Workloads of the registry: parameters, results, sanity and figures", order=85, each=True)
def workload_results(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    verdict = "correct" if d.verdict["ok"] else f"WRONG: {d.verdict['why']}"
    params = ", ".join(f"{k} {v}" for k, v in d.params.items())
    yield (f"<h3>{esc(d.workload)} on {esc(d.placement or 'the testbed')}</h3>"
           f"<p class='meta'>{esc(r.meta.get('federation', ''))} · {esc(params)} · {esc(verdict)} · "
           f"{esc(r.created)}</p>")
    rows = d.result.get("rows") or []
    if not rows:
        return
    columns = list(rows[0])
    yield table(columns, [[_cell(row.get(c)) for c in columns] for row in rows],
                ["" if d.verdict["ok"] else "fail"] * len(rows))
    numeric = [c for c in columns if c not in NOT_PLOTTED and all(isinstance(row.get(c), (int, float))
                                                                    and not isinstance(row.get(c), bool) for row in rows)]
    if "size" in columns and len(rows) > 1 and numeric:
        fig, axes = plt.subplots(1, len(numeric), figsize=(3.2 * len(numeric), 3), squeeze=False)
        for ax, c in zip(axes[0], numeric):
            ax.plot([row["size"] for row in rows], [row[c] for row in rows], marker="o")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size [B]")
            ax.set_title(c, fontsize=9)
        fig.tight_layout()
        yield figure(fig, outdir, f"workload-{i}.png", f"{d.workload}: every column against the size")


def _cell(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)
