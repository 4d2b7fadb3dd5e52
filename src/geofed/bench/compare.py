"""`geofed bench compare`: geofed's micro-benchmarks side by side with the OSU ones in C.

Both run on the same placement (the same pair of ranks, or the same ranks for a
collective), alternately, `repeat` times each; per size the median of the repeats
is compared. OSU is the user's own build (see docs/bench.md); geofed never ships it.
"""

from __future__ import annotations

import os
import re
import statistics
from pathlib import Path
from typing import Callable

from geofed import validate
from geofed.bench import suite
from geofed.errors import UserError
from geofed.launch import job as launch
from geofed.launch import mpi
from geofed.launch import runner

# What "agrees" means: small-message latency within 2 % of OSU's (or 0.5 us, the
# timers' noise at shared memory's sub-microsecond latencies), bandwidth within 10 %
# from 16 KiB up (below that both are dominated by per-message overhead).
LATENCY_SLACK = 0.02
LATENCY_SLACK_US = 0.5
BANDWIDTH_SLACK = 0.10
BANDWIDTH_FROM = 16 * 1024


def find_osu(root: str, name: str) -> Path:
    """osu_<name> under an OSU install prefix or build tree, built for the MPI in use."""
    top = Path(root)
    if not top.is_dir():
        raise UserError(f"--osu {root}: no such directory (an OSU Micro-Benchmarks install prefix)")
    for p in sorted(top.rglob(f"osu_{name}")):
        if p.is_file() and os.access(p, os.X_OK):
            _check_built_for_current_mpi(p, root)
            return p
    raise UserError(f"--osu {root}: no executable osu_{name} under it")


def _check_built_for_current_mpi(program: Path, root: str) -> None:
    """OSU built with another MPI's mpicc links that MPI's libmpi (MPICH's libmpi.so.12, Open
    MPI's libmpi.so.40) and would load it beside the launcher of this one: its ranks would
    not find each other, or run as singletons."""
    used = mpi.current()
    wanted = re.fullmatch(r"libmpi\.so\.\d+", Path(used.libmpi).name)
    linked = re.search(rb"libmpi\.so\.\d+", program.read_bytes())
    if wanted and linked and linked[0].decode() != wanted[0]:
        raise UserError(f"--osu {root}: {program} links {linked[0].decode()}, not the {wanted[0]} of {used.name}, "
                        f"the MPI in use; build OSU with that MPI's mpicc (docs/bench.md)")


def parse_osu(text: str) -> dict[int, float]:
    """OSU's text: '# ...' comments, then 'size value [more columns]' lines."""
    out = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and not line.startswith("#"):
            try:
                out[int(words[0])] = float(words[1])
            except ValueError:
                continue
    return out


def verdict(bench: str, size: int, osu: float, ours: float) -> str:
    if suite.BENCHMARKS[bench].unit == "us":
        if size > suite.LARGE_MESSAGE_SIZE:
            return ""
        return "ok" if abs(ours - osu) <= max(LATENCY_SLACK_US, LATENCY_SLACK * osu) else "differs"
    if size < BANDWIDTH_FROM:
        return ""
    return "ok" if abs(ours / osu - 1) <= BANDWIDTH_SLACK else "differs"


def osu_counts(rows: list[dict]) -> list[tuple[int, int, list[str]]]:
    """OSU's runs for geofed's measured sizes: (first, last size, flags), consecutive sizes
    with the same counts in one run. Where geofed's budget cut its iterations below OSU's
    own (a long link: 10,000 round trips of 10 ms are 100 s a size), OSU gets the same
    counts through -i and -x; elsewhere its own."""
    out: list[tuple[int, int, list[str]]] = []
    for row in sorted(rows, key=lambda row: row["size"]):
        cut = row["iterations"] < row["osu_iterations"]
        flags = ["-i", str(row["iterations"]), "-x", str(row["warmup"])] if cut else []
        if out and out[-1][2] == flags:
            out[-1] = (out[-1][0], row["size"], flags)
        else:
            out.append((row["size"], row["size"], flags))
    return out


def check(placement, names: list[str], sizes: str, osu_root: str | None, ranks_per_node: int):
    """The benchmarks, the sizes and OSU's program for each; UserError for what cannot run."""
    benches = suite.resolve(names)
    suite.check_ranks(benches, placement.node_count * ranks_per_node, f"placement {placement.code}")
    wanted = validate.parse_sizes(sizes)
    if not osu_root:
        raise UserError("bench compare: --osu PREFIX is needed (an OSU Micro-Benchmarks install prefix, see docs/bench.md)")
    return benches, wanted, {b.name: find_osu(osu_root, b.name) for b in benches}


def run(fed, placement, names: list[str], sizes: str, osu_root: str, repeat: int, ranks_per_node: int,
        timeout: float, progress: Callable[[str], None]) -> dict:
    benches, wanted, osu_bins = check(placement, names, sizes, osu_root, ranks_per_node)
    rows, runs = [], []
    for b in benches:
        bsizes = suite.sizes_for(b, wanted)
        osu_vals: dict[int, list[float]] = {s: [] for s in bsizes}
        our_vals: dict[int, list[float]] = {s: [] for s in bsizes}
        for r in range(repeat):
            progress(f"compare {b.name}: geofed, run {r + 1}/{repeat}")
            data = runner.run_ranks(fed, placement, "mpi", {"benchmarks": b.name, "sizes": ",".join(map(str, bsizes))},
                                    ranks_per_node=ranks_per_node, timeout=timeout, what=f"geofed {b.name}")
            ours = {row["size"]: row["value"] for row in data["results"][0]["sizes"]}
            parsed, counts = {}, osu_counts(data["results"][0]["sizes"])
            for first, last, flags in counts:
                progress(f"compare {b.name}: OSU {first}:{last}, run {r + 1}/{repeat}")
                job = launch.Job(fed, placement, [str(osu_bins[b.name]), "-m", f"{first}:{last}", *flags],
                                 ranks_per_node, cpu_limit=False)
                parsed |= parse_osu(runner.run(job, what=f"osu_{b.name}", timeout=timeout))
            for s in bsizes:
                if s in parsed and s in ours:
                    osu_vals[s].append(parsed[s])
                    our_vals[s].append(ours[s])
            runs.append({"benchmark": b.name, "repeat": r, "osu": parsed, "geofed": ours,
                         "class": data["results"][0]["class"],
                         "osu_runs": [{"sizes": f"{first}:{last}", "flags": flags} for first, last, flags in counts]})
        for s in bsizes:
            if not osu_vals[s]:
                continue
            o, g = statistics.median(osu_vals[s]), statistics.median(our_vals[s])
            rows.append({"benchmark": b.name, "unit": b.unit, "size": s, "osu": o, "geofed": g,
                         "diff": g - o, "ratio": g / o if o else None, "verdict": verdict(b.name, s, o, g)})
    return {"placement": placement.code, "ranks_per_node": ranks_per_node, "repeat": repeat,
            "osu": str(Path(osu_root).resolve()), "osu_binaries": {k: str(v) for k, v in osu_bins.items()},
            "rows": rows, "runs": runs}


def format_table(data: dict) -> str:
    out = [f"{'benchmark':<10} {'size':>8} {'OSU':>12} {'geofed':>12} {'diff':>10} {'ratio':>7}  verdict"]
    for r in data["rows"]:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] else "-"
        out.append(f"{r['benchmark']:<10} {r['size']:>8} {r['osu']:>12.2f} {r['geofed']:>12.2f} {r['diff']:>10.2f} "
                   f"{ratio:>7}  {r['verdict']}")
    return "\n".join(out)
