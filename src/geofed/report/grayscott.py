"""Report section of the Gray-Scott workflow: per-step timing, checksums, a few frames."""

from __future__ import annotations

import os
import shutil
import statistics
from collections.abc import Iterator
from pathlib import Path

from geofed.records import Record
from geofed.report import esc, num, percent_change, section, table


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


def _transfer(x: dict) -> str:
    rows = [[f"{n}: step bytes / (EndStep to data in memory)", num(v, ".0f"), x["steps_measured"][n]]
            for n, v in x["median_mbps"].items()]
    rows.append(["all consumers of the step together", num(x["median_link_mbps"], ".0f"), ""])
    rows.append(["link, configured", num(x["configured_mbps"], ".0f"), ""])
    note = ""
    if x["link_bytes"] is not None:
        note = (f"<p class='meta'>The link emulator delivered {x['link_bytes'] / 1e6:.1f} MB towards the consumers "
                f"for {x['payload_bytes'] / 1e6:.1f} MB of steps they read.</p>")
    return table(["transfer, median per step (common clock)", "Mb/s", "steps"], rows) + note


@section("workflow.grayscott", "Gray-Scott across sites: simulation, SST staging, analysis", order=60, each=True)
def render(rec: Record, i: int, outdir: Path) -> Iterator[str]:
    d = rec.data
    s, v = d.settings, d.verify
    steps = d.steps
    med = (lambda k: statistics.median(r[k] for r in steps) * 1e3) if steps else (lambda k: 0.0)
    yield (f"<p class='meta'>{esc(rec.meta.get('federation'))}: simulation at site {esc(d.sim_site)}, "
           f"consumers at {esc(d.analysis_site)}, link RTT {d.link['rtt_ms']:.3g} ms, "
           f"{d.link['bandwidth_gbps']} Gb/s; L = {s['L']}, {s['steps']} steps, plotgap {s['plotgap']}, "
           f"wall {d.wall_s:.1f} s</p>")
    yield table(["part", "nodes", "ranks"],
                [[p["describe"], ",".join(p["nodes"]), p["ranks"]] for p in d.parts])
    yield table(["median per output step", "ms"],
                [["simulation compute (plotgap steps)", f"{med('compute_s'):.1f}"],
                 ["gather on the writer rank", f"{med('gather_s'):.1f}"],
                 ["blocked on staging", f"{med('stage_s'):.1f}"]])
    if d.transfer is not None:  # records made before the common-clock rates have none
        yield _transfer(d.transfer)
    rows, classes = [], []
    for name, c in v["consumers"].items():
        bad = c["missing"] or c["differ"]
        rows.append([name, c["stream"], c["written"], c["received"], len(c["missing"]), len(c["differ"])])
        classes.append("fail" if bad else "")
    yield table(["consumer", "stream", "steps written", "received", "missing", "digest differs"], rows, classes)
    verdict = "every step reached every consumer intact" if v["ok"] else "steps were lost or corrupted"
    yield f"<p><b>{esc(verdict)}</b> ({v['expected_steps']} output steps, CRC32 per plane on both sides)</p>"
    yield from [_bp_file(name, c, Path(d.run_dir), outdir) for name, c in v["consumers"].items() if "listing" in c]
    yield _frames(d.frames["cross_section"], outdir) + "<br>" + _frames(d.frames["pdf"], outdir)


@section("bench.grayscott", "Gray-Scott: simulation time per step, staging across the link on and off", order=61, each=True)
def render_bench(rec: Record, i: int, outdir: Path) -> Iterator[str]:
    d = rec.data
    yield (f"<p class='meta'>{esc(rec.meta.get('federation'))}: {d.sim_ranks} simulation ranks at "
           f"site {esc(d.sim_site)}, consumers at {esc(d.analysis_site)}, link RTT "
           f"{d.link['rtt_ms']:.3g} ms, {d.link['bandwidth_gbps']} Gb/s; medians over output intervals</p>")
    rows, classes = [], []
    for c in d.cases:
        on, x = c["on"], c["on"]["transfer"]
        rows.append([c["L"], c["steps"], f"{c['bytes_per_output'] / 1e6:.1f}", f"{c['off']['per_step_ms']:.1f}",
                     f"{on['per_step_ms']:.1f}", percent_change(c["overhead"]), f"{on['staging_ms']:.2f}",
                     f"{c['staging_overhead'] * 100:.1f} %", f"{c['off']['compute_ms']:.1f} / {on['compute_ms']:.1f}",
                     f"{on['gather_ms']:.1f}", f"{on['stage_ms']:.1f}", " / ".join(num(v, ".0f") for v in x["median_mbps"].values()),
                     num(x["median_link_mbps"], ".0f"), num((c.get("ceiling") or {}).get("median_mbps"), ".0f"),
                     "-" if c.get("of_ceiling") is None else f"{c['of_ceiling'] * 100:.1f} %",
                     num(x["configured_mbps"], ".0f"), "yes" if on["intact"] else "NO"])
        classes.append("" if on["intact"] else "fail")
    yield table(["L", "steps", "MB per output", "off ms/step", "on ms/step", "overhead",
                "staging ms/step", "staging / off", "compute ms/step off / on", "gather ms per output",
                "staged ms per output", "per consumer Mb/s", "together Mb/s", "plain TCP Mb/s (ceiling)",
                "of the ceiling", "link Mb/s", "intact"], rows, classes)


def _bp_file(name: str, check: dict, run_dir: Path, outdir: Path) -> str:
    """A BP5 file the run left: a link and its variables as bpls lists them."""
    path = run_dir / name
    href = os.path.relpath(path, outdir)
    head = (f"<p>{esc(name)} (BP5, <a href='{esc(href)}'>{esc(str(path))}</a>; read back: "
            f"{check['received']} of {check['written']} steps, {len(check['differ'])} differ from what was written)</p>")
    rows = [[x["type"], x["name"], x["steps"], x["shape"]] for x in check["listing"]]
    return head + table(["type", "variable", "steps", "shape"], rows)
