"""`geofed workflow grayscott`: simulation at one site, analysis and plots at another.

Four MPI jobs on the testbed, each placed on its own nodes and started at once, each
the rank program of a part (geofed.workloads.grayscott_parts, launched by name):

    simulation  (sim site, 4 ranks)   --SST gs-->   pdf analysis (analysis site)  --SST pdf-->  pdf plot
                                      --SST gs-->   cross-section plot (analysis site)

The workflow watches all of them. When every part has finished, it lines up the
per-step digests of the writer and of every reader: a step that is missing or
differs anywhere fails the run. When a part dies, the others are stopped at once
and the error names the part, its node and the last thing it said; nothing waits
for a reader that is gone (SST would carry on without it and lose its steps).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from geofed import records
from geofed.apps.grayscott import outputs, stream
from geofed.apps.grayscott.settings import Settings
from geofed.errors import JobFailed, UserError
from geofed.federation import Federation
from geofed.launch import runner
from geofed.launch.placement import Placement, on_nodes

PDF_FILE, CHECKPOINT = "pdf.bp", "gs.bp"  # BP5 files the run leaves in its directory


@dataclass
class Part:
    name: str  # simulation, pdf, gplot, pdfplot: its rank program is grayscott-NAME
    describe: str
    placement: Placement  # names its nodes, so that parts at one site do not share a node
    ranks_per_node: int
    params: dict  # of its rank program (geofed.workloads.grayscott_parts)
    log: Path
    running: runner.Running | None = None

    @property
    def nodes(self) -> list[str]:
        return self.placement.node_names()

    @property
    def workload(self) -> str:
        return f"grayscott-{self.name}"


class WorkflowFailed(JobFailed):
    """A part died (status 1) or the workflow ran past its timeout (status 124)."""


def check_sites(fed: Federation, **sites: str | None) -> None:
    """--sim-site X and friends name sites of the federation (checked before anything is created)."""
    for flag, site in sites.items():
        if site is not None and site not in [x.code for x in fed.sites]:
            raise UserError(f"--{flag.removesuffix('_site')}-site: unknown site {site!r} (federation {fed.name} has "
                            f"{', '.join(x.code for x in fed.sites)})")


def pick_nodes(fed: Federation, site: str, count: int, taken: dict[str, int], what: str) -> Placement:
    """The next `count` nodes of a site, wrapping around when parts outnumber nodes."""
    s = fed.site(site)
    if count > s.nodes:
        raise UserError(f"{what}: site {site} has {s.nodes} nodes, {count} asked")
    nodes = s.node_list()
    first = taken.get(site, 0)
    taken[site] = first + count
    return on_nodes([nodes[(first + i) % len(nodes)] for i in range(count)])


def sim_layout(fed: Federation, site: str, ranks: int) -> tuple[int, int]:
    """(nodes, ranks per node) for the simulation: as many nodes as divide the ranks."""
    if ranks < 1:
        raise UserError(f"--sim-ranks: must be at least 1, got {ranks}")
    have = fed.site(site).nodes
    nodes = max(n for n in range(1, min(have, ranks) + 1) if ranks % n == 0)
    return nodes, ranks // nodes


def plan_parts(fed: Federation, s: Settings, run_dir: Path, stream_dir: Path, *, sim_site: str, analysis_site: str,
               pdf_site: str | None, plot_site: str | None, sim_ranks: int, pdf_ranks: int,
               connect_timeout: float, frame_every: int, delays: dict[str, float],
               checkpoint: bool = False) -> list[Part]:
    check_sites(fed, sim_site=sim_site, analysis_site=analysis_site, pdf_site=pdf_site, plot_site=plot_site)
    taken: dict[str, int] = {}
    gs, pdf = str(stream_dir / "gs.bp"), str(stream_dir / "pdf.bp")
    frames = str(run_dir / "frames")
    settings_path = run_dir / "settings.json"
    settings_path.write_text(json.dumps(s.to_json(), indent=1))
    n_nodes, per_node = sim_layout(fed, sim_site, sim_ranks)
    if pdf_ranks < 1:
        raise UserError(f"--pdf-ranks: must be at least 1, got {pdf_ranks}")

    def part(name, describe, site, nodes, per, params):
        where = pick_nodes(fed, site, nodes, taken, f"{describe} (--{name}-ranks)")
        delay = {"delay": delays[name]} if delays.get(name) else {}
        return Part(name, describe, where, per, {**params, **delay, "connect_timeout": connect_timeout},
                    run_dir / f"{name}.log")

    return [
        part("simulation", "the simulation", sim_site, n_nodes, per_node,
             {"settings": str(settings_path), "stream": gs, "readers": pdf_ranks + 1,
              **({"checkpoint": str(run_dir / CHECKPOINT)} if checkpoint else {})}),
        part("pdf", "the pdf analysis", pdf_site or analysis_site, 1, pdf_ranks,
             {"stream": gs, "out_stream": pdf, "out_readers": 1, "out_file": str(run_dir / PDF_FILE),
              "planes": s.L}),
        part("gplot", "the cross-section plot", plot_site or analysis_site, 1, 1,
             {"stream": gs, "frames": frames, "every": frame_every}),
        part("pdfplot", "the pdf plot", plot_site or analysis_site, 1, 1,
             {"stream": pdf, "frames": frames, "every": frame_every}),
    ]


def _last_words(p: Part) -> str:
    lines = [l.strip() for l in p.log.read_text(errors="replace").splitlines() if l.strip()] if p.log.exists() else []
    said = [l for l in lines if "error" in l.lower() or "consumer" in l.lower() or "cannot" in l.lower()]
    return (said or lines or ["(no output)"])[-1][:300]


def run_parts(fed: Federation, parts: list[Part], work: Path, timeout: float, progress: Callable[[str], None],
              hostfile: str | None = None) -> tuple[float, dict[str, dict]]:
    """Start every part, wait for all; stop everything at the first failure. Returns the
    wall time and every part's result by name. Each part's rank program runs where any
    job does (launch.runner), under the SST preload: on the testbed, the hosts of
    `hostfile`, or inside the Slurm allocation this process runs in; `work` is a
    directory every rank sees (runner.work_directory), where the results come home."""
    t0 = time.monotonic()
    # Every part is stopped at the end, however it ends; also one whose mpiexec has ended:
    # its ranks in other namespaces may still be exiting.
    with contextlib.ExitStack() as jobs:
        # Under their nodes' CPU quota: the parts compute and stage, they do not measure the link.
        for p in parts:
            p.running = jobs.enter_context(runner.ranks_started(
                fed, p.placement, p.workload, p.params, work, log=p.log, ranks_per_node=p.ranks_per_node,
                hostfile=hostfile, cpu_limit=True, prefix=stream.preload_argv()))
            progress(f"started {p.describe} on {','.join(p.nodes)} ({len(p.nodes) * p.ranks_per_node} ranks)")
        while True:
            running = [p for p in parts if p.running.poll() is None]
            failed = [p for p in parts if p.running.poll() not in (None, 0)]
            if failed:
                p = failed[0]
                raise WorkflowFailed(f"{p.describe} on {','.join(p.nodes)} exited with status {p.running.poll()}; "
                                     f"the workflow was stopped. It said: {_last_words(p)} (log {p.log})",
                                     exit_status=p.running.poll(), log=p.log)
            if not running:
                break
            if time.monotonic() - t0 > timeout:
                raise WorkflowFailed(f"the workflow did not finish within {timeout:g} s and was stopped; still running: "
                                     + ", ".join(f"{p.describe} on {','.join(p.nodes)}" for p in running), status=124)
            try:
                running[0].running.proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        wall = time.monotonic() - t0
    return wall, {p.name: p.running.rank_result(0, p.describe, timeout) for p in parts}


def verify(sim: dict, consumers: dict[str, dict], pdf_out: dict | None, expected: list[int],
           files: dict[str, dict] | None = None) -> dict:
    """Line up the writer's digests with every reader's, and with the BP5 files read
    back (`files`, from outputs.check): what is missing, what differs."""
    written = {r["step"]: r["digest"] for r in sim["steps"]}
    checks = {}
    for name, res in consumers.items():
        got = {r["step"]: r["digest"] for r in res["steps"]}
        checks[name] = {"stream": "gs", "written": len(written), "received": len(got),
                        "missing": sorted(set(written) - set(got)),
                        "differ": sorted(s for s in got if s in written and got[s] != written[s])}
    if pdf_out is not None:
        pdf_written = {r["step"]: r["out_digest"] for r in consumers["pdf"]["steps"]}
        got = {r["step"]: r["digest"] for r in pdf_out["steps"]}
        checks["pdfplot"] = {"stream": "pdf", "written": len(pdf_written), "received": len(got),
                             "missing": sorted(set(pdf_written) - set(got)),
                             "differ": sorted(s for s in got if s in pdf_written and got[s] != pdf_written[s])}
    checks.update(files or {})
    all_written = sorted(written) == expected
    ok = all_written and all(not c["missing"] and not c["differ"] and c["written"] == len(expected)
                             for c in checks.values())
    return {"ok": ok, "all_steps_written": all_written, "expected_steps": len(expected), "consumers": checks}


def _mbps(nbytes: int, seconds: float) -> float | None:
    return nbytes * 8 / seconds / 1e6 if seconds > 0 else None


def step_table(sim: dict, consumers: dict[str, dict]) -> list[dict]:
    """Per output step: the writer's row and, per consumer, how long the step took to arrive.

    `delivery_s` runs from the writer's EndStep to the consumer having the data, on the
    host's common wall clock. It is a transfer time only when the consumer was already
    waiting (had asked before the step was published); a consumer still busy with the
    previous step adds its own lag, so its rate is left out (`behind`). `link_mbps` is
    all consumers' bytes over the time until the last of them had the step: what the
    link carried for this step, when every consumer was waiting.
    """
    rows = []
    by = {n: {r["step"]: r for r in res["steps"]} for n, res in consumers.items()}
    for r in sim["steps"]:
        row = dict(r, consumers={}, link_mbps=None)
        for n in by:
            c = by[n].get(r["step"])
            if c:
                delivery = c["arrived"] - r["published"]
                behind = c["asked"] > r["published"]
                row["consumers"][n] = {"digest": c["digest"], "wait_s": c["wait_s"], "bytes": c["bytes"],
                                       "delivery_s": delivery, "behind": behind,
                                       "mbps": None if behind else _mbps(c["bytes"], delivery)}
        got = row["consumers"].values()
        if len(got) == len(by) and not any(c["behind"] for c in got):
            row["link_mbps"] = _mbps(sum(c["bytes"] for c in got), max(c["delivery_s"] for c in got))
        rows.append(row)
    return rows


def transfer_summary(steps: list[dict], link_gbps: float | None, link_bytes: int | None) -> dict:
    """Medians of the per-step rates against the link's configured rate."""
    names = list(steps[0]["consumers"]) if steps else []
    per = {n: [r["consumers"][n]["mbps"] for r in steps if n in r["consumers"] and r["consumers"][n]["mbps"]]
           for n in names}
    link = [r["link_mbps"] for r in steps if r["link_mbps"]]
    payload = sum(c["bytes"] for r in steps for c in r["consumers"].values())
    return {
        "configured_mbps": link_gbps * 1000 if link_gbps else None,
        "median_mbps": {n: statistics.median(v) if v else None for n, v in per.items()},
        "median_delivery_s": {n: statistics.median(r["consumers"][n]["delivery_s"] for r in steps
                                                   if n in r["consumers"]) for n in names},
        "steps_measured": {n: len(v) for n, v in per.items()},
        # steps a consumer asked for only after they were published: still busy with
        # the one before, or that one was late to arrive
        "behind_steps": {n: [r["step"] for r in steps if n in r["consumers"] and r["consumers"][n]["behind"]]
                         for n in names},
        "median_link_mbps": statistics.median(link) if link else None,
        "payload_bytes": payload,
        "link_bytes": link_bytes,
    }


def run(fed: Federation, s: Settings, out: Path, *, sim_site: str = "G", analysis_site: str = "W",
        pdf_site: str | None = None, plot_site: str | None = None, sim_ranks: int = 4, pdf_ranks: int = 1,
        connect_timeout: float = 60.0, timeout: float = 3600.0, frame_every: int | None = None,
        delays: dict[str, float] | None = None, checkpoint: bool = False, hostfile: str | None = None,
        progress: Callable[[str], None] = lambda m: None) -> dict:
    """Run the workflow on the (up) testbed of `fed`, inside a Slurm allocation of it, or on
    the hosts of `hostfile`; returns a `workflow.grayscott` record. The PDF analysis writes
    pdf.bp into the run's directory; with `checkpoint` the simulation writes gs.bp (U, V
    at every output step) there too. The bytes the link carried are the testbed's
    emulator's count, read as root: there are none with a hostfile, nor under Slurm as a user."""
    from geofed.testbed.core import link_tx_bytes
    if s.engine != "SST":
        raise UserError(f"workflow grayscott streams between sites: engine must be SST, the settings say {s.engine}")
    if sim_site == analysis_site:
        progress(f"note: simulation and analysis both at site {sim_site}: no long-haul link in between")
    expected = s.output_steps()
    if not expected:
        raise UserError(f"settings: steps = {s.steps} < plotgap = {s.plotgap}: the simulation would write nothing")
    run_id = uuid.uuid4().hex[:8]
    run_dir = Path(out) / f"grayscott-{run_id}"
    run_dir.mkdir(parents=True)
    every = frame_every or max(1, len(expected) // 20)
    # SST contact files live outside the output: a stale one would send readers to a dead writer.
    with runner.work_directory("grayscott", hostfile) as work:
        parts = plan_parts(fed, s, run_dir, work, sim_site=sim_site, analysis_site=analysis_site,
                           pdf_site=pdf_site, plot_site=plot_site, sim_ranks=sim_ranks, pdf_ranks=pdf_ranks,
                           connect_timeout=connect_timeout, frame_every=every, delays=delays or {},
                           checkpoint=checkpoint)
        # The emulator's counters are root's: a job of the testbed's Slurm runs as its user.
        counted = hostfile is None and os.geteuid() == 0
        before = link_tx_bytes(fed, sim_site, analysis_site) if counted else None
        wall, res = run_parts(fed, parts, work, timeout, progress, hostfile)
        after = link_tx_bytes(fed, sim_site, analysis_site) if counted else None
    consumers = {"pdf": res["pdf"], "gplot": res["gplot"]}
    files = {PDF_FILE: outputs.check(run_dir / PDF_FILE, ["U/pdf", "V/pdf"],
                                     {r["step"]: r["out_digest"] for r in res["pdf"]["steps"]})}
    if checkpoint:
        files[CHECKPOINT] = outputs.check(run_dir / CHECKPOINT, ["U", "V"],
                                          {r["step"]: r["checkpoint_digest"] for r in res["simulation"]["steps"]})
    check = verify(res["simulation"], consumers, res["pdfplot"], expected, files)
    link = fed.route(sim_site, analysis_site)
    steps = step_table(res["simulation"], consumers)
    gbps = fed.bandwidth_gbps(sim_site, analysis_site)
    crossed = after - before if before is not None else None
    data = {
        "settings": s.to_json(), "sim_site": sim_site, "analysis_site": analysis_site, "run_dir": str(run_dir),
        "link": {"rtt_ms": fed.rtt_ms(sim_site, analysis_site),
                 "bandwidth_gbps": gbps, "hops": len(link)},
        "parts": [{"name": p.name, "describe": p.describe, "nodes": p.nodes, "ranks": len(p.nodes) * p.ranks_per_node,
                   "delay_s": (delays or {}).get(p.name, 0.0)} for p in parts],
        "simulation": {k: v for k, v in res["simulation"].items() if k != "steps"},
        "steps": steps, "transfer": transfer_summary(steps, gbps, crossed),
        "pdf_stream": [dict(r) for r in res["pdfplot"]["steps"]],
        "verify": check, "wall_s": wall,
        "frames": {"cross_section": res["gplot"]["frames"], "pdf": res["pdfplot"]["frames"],
                   "animations": [a for a in (res["gplot"]["animation"], res["pdfplot"]["animation"]) if a]},
    }
    return records.make("workflow.grayscott", data, **records.federation_meta(fed))


def format_table(rec: records.Record) -> str:
    d = rec.data
    names = list(d.steps[0]["consumers"]) if d.steps else []
    head = f"{'step':>6} {'compute ms':>10} {'gather ms':>9} {'staged ms':>9} {'MB':>6} {'digest':>9}"
    head += "".join(f" {n + ' in ms':>11} {n + ' Mb/s':>11} {n + ' digest':>14}" for n in names)
    lines = [head]
    for r in d.steps:
        line = (f"{r['step']:>6} {r['compute_s'] * 1e3:>10.1f} {r['gather_s'] * 1e3:>9.1f} {r['stage_s'] * 1e3:>9.1f}"
                f" {r['bytes'] / 1e6:>6.2f} {r['digest']:>9}")
        for n in names:
            c = r["consumers"].get(n)
            if c:
                rate = "behind" if c["mbps"] is None else f"{c['mbps']:.0f}"
                line += f" {c['delivery_s'] * 1e3:>11.1f} {rate:>11} {c['digest']:>14}"
            else:
                line += f" {'-':>11} {'-':>11} {'MISSING':>14}"
        lines.append(line)
    lines.append(transfer_line(d.transfer))
    v = d.verify
    for n, c in v["consumers"].items():
        lines.append(f"{n}: {c['received']}/{c['written']} steps of stream {c['stream']} received, "
                     f"{len(c['missing'])} missing, {len(c['differ'])} differ")
    lines.append(f"verdict: {'every step reached every consumer intact' if v['ok'] else 'STEPS LOST OR CORRUPTED'}"
                 f" ({v['expected_steps']} steps, {d.wall_s:.1f} s)")
    return "\n".join(lines)


def fmt_mbps(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def transfer_line(x: dict) -> str:
    """One line on what the link carried, against its configured rate."""
    mb = fmt_mbps
    out = ("transfer (EndStep to data in the consumer, common clock): median "
           + ", ".join(f"{n} {mb(v)} Mb/s" for n, v in x["median_mbps"].items())
           + f"; all consumers together {mb(x['median_link_mbps'])} Mb/s; link configured {mb(x['configured_mbps'])} Mb/s")
    if x["link_bytes"] is not None:
        out += f"; the link carried {x['link_bytes'] / 1e6:.1f} MB for {x['payload_bytes'] / 1e6:.1f} MB of steps"
    return out
