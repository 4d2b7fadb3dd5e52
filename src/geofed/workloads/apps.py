"""The app model against measured runs: programs profiled at one site, predicted, run and
rehearsed across sites (bench.apps; docs/profile.md, "Validation").

For every federation and program: the program is profiled at one site (`geofed profile`'s
library) and run on each placement across sites under the same library, whose clock (every
rank's MPI_Init to MPI_Finalize, the slowest rank's) is the one the profile's total is
read from, so the measured and the predicted time are the same span of the run. The
profile and the runs are interleaved, `repeat` rounds of one profile and one run per
placement, so that the host's load, shared with other work, weighs on both alike; the
prediction is the median of every round's profile's, the measured time the runs' median. The interval spans every round's profile's own (the model's, from each profile's
spread): the host's load varies between runs as well as within one. The crossing cost of
the host is measured in every round too (an 8-byte ping-pong across and inside a site)
and is the calibration's: on a host shared with other work, the link emulator waits for
a core as every process does, and a calibration made under another load misses it. So is,
once per federation, the CPU the link emulator takes per message and per byte across
(`forwarding_now`), which the model charges where the ranks leave no core over. The
rehearsal (`geofed rehearse`) replays each round's profile on each placement right after
the round's run there, and the rehearsed time is the rounds' median, as the measured one is.

Every job runs without the node CPU quota (as `geofed rehearse` does): every node then
computes at the host's speed, so the prediction is made for a federation whose sites'
speeds are equal, which is what the testbed runs.

The programs: geofed's HPL, MDFS, the obstacle solver's MPI Jacobi (`--scheme mpi`), the
Gray-Scott simulation, geofed's OSU-style allreduce loop (`bench mpi`), and two classic MPI
programs in C that geofed's models know nothing of (bench/programs: a 2-D Jacobi stencil
and a systolic-ring N-body), compiled with the MPI in use for the run.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from geofed import federation, records
from geofed.errors import UserError
from geofed.params import Params, param
from geofed.validate import positive_int
from geofed.workloads import Context, Workload

PROGRAMS = ("hpl", "mdfs", "obstacle", "grayscott", "osu-allreduce", "jacobi2d", "nbody-ring")
SOURCES = Path(__file__).resolve().parent.parent / "bench" / "programs"


class AppsParams(Params):
    federations: str = param("icm-task,ma-hd", "federations, comma-separated (each on a private testbed copy)")
    programs: str = param(",".join(PROGRAMS), f"programs, comma-separated: {', '.join(PROGRAMS)}")
    nodes: int = param(3, "nodes of every run (one rank each)", type=positive_int)
    placements: int = param(3, "placements across sites per federation", type=positive_int)
    repeat: int = param(3, "rounds of one profile and one run per placement; medians", type=positive_int)
    profiles: str = param("geofed-out/bench/profiles", "directory the profiles predicted from are kept in")
    again: str = param("", "a bench.apps record: predict its rows again from their kept profiles (after a change "
                           "of the model), its runs as they were; runs nothing")


def rank_program(name: str, params: dict, work: Path) -> list[str]:
    """A geofed rank program as a user's command line: the one entry point, one BLAS thread a
    rank as for a pure MPI run (as HPL's). Else NumPy's OpenBLAS starts a thread per core, which
    spins after each BLAS call: 0.03-0.04 s of CPU in a rank's gaps and 0.1 s in MDFS's tail
    that its calls never waited for, on cores the other ranks needed."""
    return ["env", "OPENBLAS_NUM_THREADS=1", sys.executable, "-m", "geofed.workloads", name, json.dumps(params),
            str(work / f"{name}.result.json")]


def programs(names: list[str], work: Path, nodes: int) -> dict[str, list[str]]:
    """Every program's command line, with its inputs written into `work` (which every rank reads)."""
    from geofed.apps.hpl.params import text
    from geofed.apps.mdfs import data
    from geofed.launch import mpi
    from geofed.native import binary
    from geofed.records.hpl import HplParams
    out = {}
    for name in names:
        if name == "hpl":
            (work / "hpccinf.txt").write_text(text(HplParams(ns=(1600,), nb=80, p=1, q=nodes)))
            out[name] = ["env", "OPENBLAS_NUM_THREADS=1", binary(mpi.program("geofed-xhpl"))]
        elif name == "mdfs":
            ds = data.madelon_like(n=300, p=40, seed=1)
            npz = data.save_npz(work / "mdfs.npz", ds.x, ds.y)
            out[name] = rank_program("mdfs", {"data": str(npz), "analysis": {"dimensions": 2, "discretizations": 3},
                                              "split": "even", "threads": 1}, work)
        elif name == "obstacle":
            out[name] = rank_program("obstacle", {"n": 24, "tol": 1e-4, "scheme": "mpi"}, work)
        elif name == "grayscott":
            settings = work / "grayscott.json"
            settings.write_text(json.dumps({"L": 48, "steps": 150, "plotgap": 50, "noise": 0.0, "engine": "none",
                                            "output": str(work / "gs.bp")}))
            out[name] = rank_program("grayscott-simulation", {"settings": str(settings), "readers": 0}, work)
        elif name == "osu-allreduce":
            out[name] = rank_program("mpi", {"benchmarks": "allreduce", "sizes": "8,8K", "iterations": 300,
                                             "warmup": 10, "budget": 1e6}, work)
        elif name in ("jacobi2d", "nbody-ring"):
            exe = compiled(name.replace("-", "_"), work)
            out[name] = [str(exe), "900", "150"] if name == "jacobi2d" else [str(exe), "2400", "12"]
        else:
            raise UserError(f"--programs: unknown program {name!r} (known: {', '.join(PROGRAMS)})")
    return out


def compiled(stem: str, work: Path) -> Path:
    """A C program of bench/programs built with the MPI in use (its mpicc) into `work`."""
    from geofed.launch import mpi
    if mpi.choice() != "mpich":
        raise UserError(f"bench apps: the C programs are built with the venv's MPICH; GEOFED_MPI={mpi.choice()}")
    mpicc = str(Path(sys.executable).parent / "mpicc")
    exe = work / stem
    res = subprocess.run([mpicc, "-O2", "-o", str(exe), str(SOURCES / f"{stem}.c"), "-lm"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise UserError(f"{SOURCES / stem}.c: {mpicc} failed: {res.stderr.strip().splitlines()[-1:]}")
    return exe


def cross_placements(fed, nodes: int, count: int) -> tuple[str, list[str]]:
    """The one-site placement to profile at (the first site with the nodes) and `count`
    placements across sites, each site's turn to hold rank 0 in turn."""
    from geofed.model.advise import placements
    one = next((f"{s.code}{nodes}" for s in fed.sites if s.nodes >= nodes), None)
    if one is None:
        raise UserError(f"--nodes {nodes}: no site of {fed.name} has {nodes} nodes to profile at")
    by_first = [[c for c in placements(fed, nodes, first=s.code) if sum(ch.isalpha() for ch in c) > 1]
                for s in fed.sites]
    out: list[str] = []
    for group in zip(*by_first):  # W2G1, G1W2, W1G2, G2W1, ...
        out += [c for c in group if c not in out]
    return one, out[:count]


def load_now() -> float:
    return os.getloadavg()[0]


def crossing_code(one: str, across: str) -> str:
    """The placement the host's crossing costs are measured on: two nodes at the profiled
    site, one at the other site of `across` (rank 0's pairs: one inside, one across)."""
    site, other = one[0], next(c for c in across if c.isalpha() and c != one[0])
    return f"{site}2{other}1"


def crossing_now(fed, one: str, across: str) -> float:
    """The host's one-way cost of crossing between the sites now, in us: rank 0's 8-byte MPI
    round trips with a rank at its site and one across, each less the federation's model,
    the difference halved. On a host shared with other work the link emulator waits for a
    core like every process, and that wait is in every message across: a calibration made
    under another load than the run's misses it."""
    from geofed.launch import runner
    from geofed.launch.placement import parse
    code = crossing_code(one, across)
    data = runner.run_ranks(fed, parse(code, fed), "pingpong", {"size": 8, "iterations": 100, "seconds": 2.0},
                            timeout=120, what=f"crossing cost on {code}")
    extra = {p["class"]: p["median_ms"] - p["model_rtt_ms"] for p in data["pairs"]}
    return max(0.0, extra["inter-site"] - extra["intra-site"]) / 2 * 1e3


FORWARDING_BYTES = 64 << 10  # the large message of the forwarding measurement


def forwarding_now(fed, one: str, across: str, repeat: int = 3) -> dict:
    """The CPU the testbed's link emulator takes per MPI message crossing and per byte
    (in us and ns; medians of `repeat`): rank 0's ping-pong across, in three jobs: a few
    8-byte round trips, many, and many of FORWARDING_BYTES; the emulator's CPU in each. The
    first two differ by round trips only (their start-up crosses alike), the third by size.

    The emulator forwards every frame at real-time priority, spins to release the short ones
    (ACKs) on time and wakes to read its socket while it holds frames, so it takes a core
    from the ranks for every message, not only for every byte (2026-11-29: ma-hd 35 us per
    message and 1.4 ns per byte, icm-task's 9 ms link 150 us and 2.9 ns; a bulk TCP
    stream, which `testbed verify` measures, costs 0.6 ns per byte more across ma-hd's link
    than inside a site)."""
    from geofed.launch import runner
    from geofed.launch.placement import parse
    from geofed.testbed import core
    code = crossing_code(one, across)

    def job(size: int, iterations: int) -> tuple[float, int]:
        before = core.emulators_cpu_s(fed)
        data = runner.run_ranks(fed, parse(code, fed), "pingpong",
                                {"size": size, "iterations": iterations, "warmup": 5, "seconds": 10.0},
                                timeout=120, what=f"the link emulator's CPU on {code}")
        across_pair = next(p for p in data["pairs"] if p["class"] == "inter-site")
        return core.emulators_cpu_s(fed) - before, 2 * (across_pair["iterations"] + 5)  # messages across

    per_message, per_byte = [], []
    for _ in range(repeat):
        (c0, n0), (c1, n1), (c2, n2) = job(8, 20), job(8, 220), job(FORWARDING_BYTES, 220)
        small = (c1 - c0) / (n1 - n0)  # one 8-byte message
        large = (c2 - c0 + n0 * small) / n2  # one large message: the third job less the first's start-up
        per_byte.append(max(0.0, (large - small) / (FORWARDING_BYTES - 8)))
        per_message.append(max(0.0, small - 8 * per_byte[-1]))
    return {"us_per_message": statistics.median(per_message) * 1e6, "ns_per_byte": statistics.median(per_byte) * 1e9,
            "host_cores": os.cpu_count()}


def measure(fed, program: list[str], one: str, across: list[str], repeat: int, work: Path,
            kept: Path, forwarding: dict, progress) -> list[dict]:
    """One program on one federation's testbed copy: the rows of its placements across sites."""
    from geofed.apps.profile import profiled
    from geofed.launch import runner
    from geofed.launch.placement import parse
    run = dict(ranks_per_node=1, timeout=600, cpu_limit=False, cwd=work, echo=False)
    profiles, paths, loads, crossings = [], [], [], []
    runs, rehearsals = {c: [] for c in across}, {c: [] for c in across}
    for i in range(repeat):
        loads.append(load_now())
        crossings.append(crossing_now(fed, one, across[0]))
        profiles.append(profiled(fed, parse(one, fed), program, **run))
        paths.append(str(records.save(records.make("app.profile", profiles[-1], **records.federation_meta(fed)),
                                      kept)))
        for code in across:
            runs[code].append(profiled(fed, parse(code, fed), program, **run)["total_s"])
            # the run's rehearsal right after it, from the round's profile, under the same load: a
            # median of rounds as the runs' (one rehearsal is as open to a one-off stall as one run)
            rehearsal = runner.run_ranks(fed, parse(code, fed), "rehearse", {"profile": paths[-1]}, timeout=600,
                                         cpu_limit=False, what=f"rehearse on {code}")
            rehearsals[code].append(max(rehearsal["rank_s"]))
        progress(f"  round {i + 1}/{repeat}: {one} {profiles[-1]['total_s']:.3f} s, "
                 + ", ".join(f"{c} {runs[c][-1]:.3f} s (rehearsed {rehearsals[c][-1]:.3f} s)" for c in across)
                 + f" (load {loads[-1]:.2f}, crossing {crossings[-1]:.0f} us)")
    middle = sorted(range(repeat), key=lambda i: profiles[i]["total_s"])[repeat // 2]
    rows = []
    for code in across:
        measured, rehearsed = statistics.median(runs[code]), statistics.median(rehearsals[code])
        row = predicted(fed, {"placement": code, "profiled_at": one, "profiles": paths, "profile": paths[middle],
                              "profile_s": profiles[middle]["total_s"],
                              "profile_runs_s": [p["total_s"] for p in profiles], "measured_s": measured,
                              "measured_runs_s": runs[code], "rehearsal_s": rehearsed,
                              "rehearsal_runs_s": rehearsals[code], "rehearsal_error": rehearsed / measured - 1,
                              "load": statistics.median(loads), "crossing_us": statistics.median(crossings),
                              "crossings_us": crossings, "forwarding": forwarding})
        rows.append(row)
        progress(f"  {code}: measured {measured:.3f} s, predicted {row['predicted_s']:.3f} s "
                 f"({row['error']:+.1%}), rehearsed {row['rehearsal_s']:.3f} s ({row['rehearsal_error']:+.1%})")
    return rows


def predicted(fed, row: dict) -> dict:
    """The row with the app model's prediction from each round's profile at the rounds'
    median crossing cost, with the testbed's forwarding (its emulator's CPU, measured, and
    its store and forward of GSO frames): their median, the parts of the median profile's. The interval
    carries what the model is uncertain of: every round's profile's own spread (the
    model's), the host's crossing cost as it varied between the rounds (each profile
    predicted at the lowest and the highest measured), and the host's repeatability (the
    profile rounds' totals, minutes apart, scatter as a run does: half their range either
    side). No CPU quota: every node computes at the host's speed."""
    from geofed.launch.placement import parse
    from geofed.model import app, calibration, whatif
    equal = whatif.apply(fed, [f"{s.code}.speed=1" for s in fed.sites])
    nodes = parse(row["placement"], equal).nodes(equal)

    forwarding = row.get("forwarding", {})  # records before 2026-11-29 12:55 UTC: none measured

    def at(crossing_us: float, profile: str):
        # the federation file and the host's crossing costs as measured in the run: nothing else fitted
        cal = calibration.Calibration(fed.name, speeds={s.code: 1.0 for s in fed.sites},
                                      tcp_window_bytes=calibration.host_tcp_window(), crossing_us=crossing_us,
                                      crossing_cpu_us_per_message=forwarding.get("us_per_message", 0.0),
                                      crossing_cpu_ns_per_byte=forwarding.get("ns_per_byte", 0.0),
                                      host_cores=forwarding.get("host_cores", 0),
                                      crossing_frame_bytes=calibration.GSO_MAX_BYTES)
        return app.MODELS[0].predict(equal, cal, row["placement"], nodes, app.AppParams(profile=profile))

    preds = [at(row["crossing_us"], p) for p in row["profiles"]]
    total = statistics.median(p.total_s for p in preds)
    crossings = row.get("crossings_us", [row["crossing_us"]])  # records before crossings_us: the median only
    low = [at(min(crossings), p) for p in row["profiles"]]
    high = [at(max(crossings), p) for p in row["profiles"]]
    runs = row["profile_runs_s"]
    repeat = (max(runs) - min(runs)) / 2 / statistics.median(runs)  # relative, either side
    # the host's repeatability scales what runs on the host (compute, the sites' own
    # communication), not the link's propagation
    interval = [max(0.0, min(p.interval[0] - repeat * (p.total_s - p.parts["link_comm"]) for p in low)),
                max(p.interval[1] + repeat * (p.total_s - p.parts["link_comm"]) for p in high)]
    return row | {"predicted_s": total, "interval_s": interval,
                  "parts": preds[row["profiles"].index(row["profile"])].parts, "error": total / row["measured_s"] - 1,
                  "covered": interval[0] <= row["measured_s"] <= interval[1]}


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["error"]) for r in rows]
    return {"rows": len(rows), "median_abs_error": statistics.median(errors) if rows else 0.0,
            "max_abs_error": max(errors, default=0.0),
            "covered": sum(r["covered"] for r in rows) / len(rows) if rows else 0.0,
            "rehearsal_max_abs_error": max((abs(r["rehearsal_error"]) for r in rows), default=0.0)}


def again(path: str) -> dict:
    """A bench.apps record's rows predicted again from their kept profiles (after a change
    of the model), its measured runs and rehearsals as they were."""
    rec = records.read(path)
    if rec.kind != "bench.apps":
        raise UserError(f"{path}: a {rec.kind} record, not bench.apps")
    d = rec.data
    rows = [predicted(federation.load(r["federation_file"]), r) for r in d.rows]
    return {"nodes": d.nodes, "repeat": d.repeat, "rows": rows, "load": d.load, "summary": summary(rows)}


def run(params: AppsParams, progress) -> dict:
    """The rows of every federation and program; the profiles predicted from are kept in params.profiles."""
    from geofed.testbed import core
    names = [n for n in params.programs.split(",") if n]
    rows, started = [], load_now()
    for spec in params.federations.split(","):
        fed = federation.load(spec)
        one, across = cross_placements(fed, params.nodes, params.placements)
        with tempfile.TemporaryDirectory(prefix="geofed-bench-apps-") as tmp, \
                core.owned_copy(fed, "gfapps", progress) as copy:
            work = Path(tmp)
            os.chmod(work, 0o755)
            kept = Path(params.profiles).resolve()
            forwarding = forwarding_now(copy, one, across[0])
            progress(f"{fed.name}: the link emulator's CPU per message across {forwarding['us_per_message']:.1f} us, "
                     f"per byte {forwarding['ns_per_byte']:.2f} ns")
            for name, program in programs(names, work, params.nodes).items():
                progress(f"{fed.name} {name}: profile at {one}, run at {', '.join(across)}, {params.repeat} rounds: "
                         f"{shlex.join(program[-3:])}")
                rows += [{"federation": fed.name, "federation_file": str(fed.path), "program": name} | r
                         for r in measure(copy, program, one, across, params.repeat, work, kept, forwarding,
                                                 progress)]
    return {"nodes": params.nodes, "repeat": params.repeat, "rows": rows,
            "load": {"start": started, "end": load_now(), "cores": os.cpu_count()}, "summary": summary(rows)}


def table(d) -> str:
    lines = [f"{'federation':<10} {'program':<14} {'at':>3} {'placement':>9} {'profile s':>9} {'measured s':>10} "
             f"{'spread':>6} {'predicted s':>11} {'interval s':>13} {'error':>7} {'rehearsed s':>11} {'error':>7} "
             f"{'load':>5}"]
    for r in d.rows:
        lo, hi = r["interval_s"]
        runs = r["measured_runs_s"]
        spread = (max(runs) - min(runs)) / r["measured_s"]  # the runs' own: what no prediction can be closer than
        lines.append(f"{r['federation']:<10} {r['program']:<14} {r['profiled_at']:>3} {r['placement']:>9} "
                     f"{r['profile_s']:9.3f} {r['measured_s']:10.3f} {spread:6.0%} {r['predicted_s']:11.3f} "
                     f"{f'{lo:.2f}-{hi:.2f}':>13} {r['error']:+7.1%} {r['rehearsal_s']:11.3f} "
                     f"{r['rehearsal_error']:+7.1%} {r['load']:5.2f}")
    s = d.summary
    lines.append(f"{s['rows']} rows: median |error| {s['median_abs_error']:.1%} (target 10 %), largest "
                 f"{s['max_abs_error']:.1%} (20 %), intervals cover {s['covered']:.0%} (80 %), rehearsal within "
                 f"{s['rehearsal_max_abs_error']:.1%} of the run (10 %); load {d.load['start']:.2f} -> "
                 f"{d.load['end']:.2f} on {d.load['cores']} cores")
    return "\n".join(lines)


class Apps(Workload, kind="bench.apps", Params=AppsParams, needs_placement=False):
    """the app model against measured runs: programs profiled at one site, predicted, run and rehearsed across sites (root)"""

    def run(self, ctx: Context, params: AppsParams):
        return records.make(self.kind, again(params.again) if params.again else run(params, ctx.progress))

    def table(self, rec) -> str:
        return table(rec.data)


WORKLOAD = Apps()
