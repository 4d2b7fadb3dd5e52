"""Report section of the Gray-Scott workflow: per-step timing, checksums, a few frames."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

from geofed.report import esc, section, table


def _frames(paths: list[str], outdir: Path, count: int = 3) -> str:
    """A few frames (first, middle, last), copied next to the report."""
    if not paths:
        return ""
    pick = sorted({0, len(paths) // 2, len(paths) - 1})[:count]
    out = []
    for i in pick:
        src = Path(paths[i])
        if src.exists():
            dst = outdir / f"gs-{src.parent.parent.name}-{src.name}"
            if src.resolve() != dst.resolve():
                shutil.copyfile(src, dst)
            out.append(f"<img src='{esc(dst.name)}' style='max-width:32%'>")
    return "".join(out)


@section("workflow.grayscott", "Gray-Scott across sites: simulation, SST staging, analysis", order=60)
def render(recs: list[dict], outdir: Path) -> str:
    parts = []
    for rec in recs:
        d = rec["data"]
        s, v = d["settings"], d["verify"]
        steps = d["steps"]
        med = (lambda k: statistics.median(r[k] for r in steps) * 1e3) if steps else (lambda k: 0.0)
        parts.append(f"<p class='meta'>{esc(rec['meta'].get('federation'))}: simulation at site {esc(d['sim_site'])}, "
                     f"consumers at {esc(d['analysis_site'])}, link RTT {d['link']['rtt_ms']:.3g} ms, "
                     f"{d['link']['bandwidth_gbps']} Gb/s; L = {s['L']}, {s['steps']} steps, plotgap {s['plotgap']}, "
                     f"wall {d['wall_s']:.1f} s</p>")
        parts.append(table(["part", "nodes", "ranks"],
                           [[p["describe"], ",".join(p["nodes"]), p["ranks"]] for p in d["parts"]]))
        parts.append(table(["median per output step", "ms"],
                           [["simulation compute (plotgap steps)", f"{med('compute_s'):.1f}"],
                            ["gather on the writer rank", f"{med('gather_s'):.1f}"],
                            ["blocked on staging", f"{med('stage_s'):.1f}"]]))
        rows, classes = [], []
        for name, c in v["consumers"].items():
            bad = c["missing"] or c["differ"]
            rows.append([name, c["stream"], c["written"], c["received"], len(c["missing"]), len(c["differ"])])
            classes.append("fail" if bad else "")
        parts.append(table(["consumer", "stream", "steps written", "received", "missing", "digest differs"], rows, classes))
        verdict = "every step reached every consumer intact" if v["ok"] else "steps were lost or corrupted"
        parts.append(f"<p><b>{esc(verdict)}</b> ({v['expected_steps']} output steps, CRC32 per plane on both sides)</p>")
        parts.append(_frames(d["frames"]["cross_section"], outdir) + "<br>" + _frames(d["frames"]["pdf"], outdir))
    return "\n".join(parts)
