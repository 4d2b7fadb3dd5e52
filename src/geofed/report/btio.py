"""Report section: BT-I/O over MPI-IO, simple against full, the I/O share of the run (seed 002)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from geofed.records import Record
from geofed.report import esc, figure, section, table


@section("bench.btio", "BT-I/O: NPB's BT access pattern over MPI-IO (seed 002)", order=66)
def btio(records: list[Record], outdir: Path) -> str:
    out, bars = [], []
    for r in records:
        d = r.data
        out.append(f"<p class='meta'>{esc(r.meta.get('federation', ''))}: class {d.cls} ({d.n}^3, "
                   f"{d.steps} steps) on {esc(d.placement)}, file in {esc(d.path)}; simple and full files "
                   f"identical: {'yes' if d.files_identical else 'NO'} · {esc(r.created)}</p>")
        out.append(table(["subtype", "ranks", "MB", "total s", "I/O s", "I/O share", "MB/s", "MFlop/s", "read back"],
                         [[x["subtype"], x["ranks"], f"{x['bytes'] / 1e6:.1f}", f"{x['total_s']:.2f}",
                           f"{x['io_s']:.2f}", f"{x['io_fraction']:.1%}", f"{x['mb_per_s']:.1f}", f"{x['mflops']:.0f}",
                           "ok" if x["wrong_doubles"] == 0 and x["file_size_ok"] else "WRONG"] for x in d.runs]))
        bars += [(f"{d.cls} {x['subtype']}\n{d.placement} {Path(d.path).name or d.path}",
                  x["io_s"], x["total_s"] - x["io_s"]) for x in d.runs]
    if bars:
        fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(bars)), 3.2))
        xs = range(len(bars))
        ax.bar(xs, [b[2] for b in bars], label="compute and the rest")
        ax.bar(xs, [b[1] for b in bars], bottom=[b[2] for b in bars], label="I/O")
        ax.set_xticks(list(xs), [b[0] for b in bars], fontsize=7)
        ax.set_ylabel("seconds")
        ax.legend(fontsize=8)
        out.append(figure(fig, outdir, "btio.png", "BT-I/O run time split into I/O and the rest"))
    return "\n".join(out)
