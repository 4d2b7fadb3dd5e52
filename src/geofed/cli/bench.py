"""`geofed bench mpi|compare|matrix|check|btio` and the `bench NAME` of every workload of
the registry. Heavy imports stay inside the commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from geofed import federation, records
from geofed.cli import options
from geofed.cli.common import emit
from geofed.errors import UserError
from geofed.params import add_options, from_args
from geofed.progress import progress
from geofed.validate import choices, positive_int


def _placement(args):
    from geofed.launch.placement import parse
    fed = federation.load(args.federation)
    return fed, parse(args.placement, fed)


def cmd_mpi(args) -> int:
    """The `mpi` workload with its benchmarks named as words (`bench mpi latency bw`)."""
    import dataclasses

    from geofed import workloads
    from geofed.bench import suite
    from geofed.workloads.mpi import MpiParams
    measure = from_args(suite.Measure, args)
    params = MpiParams(**dataclasses.asdict(measure), benchmarks=",".join(args.benchmarks))
    fed, placement = _placement(args)
    ctx = workloads.Context(fed, placement, args.ranks_per_node, args.hostfile, args.timeout, progress=progress)
    return run_workload(workloads.get("mpi"), ctx, params, args.out)


def cmd_compare(args) -> int:
    """The `compare` workload with its benchmarks named as words (`bench compare latency bw`)."""
    import dataclasses

    from geofed import workloads
    from geofed.workloads.compare import CompareParams, OsuRuns
    params = CompareParams(**dataclasses.asdict(from_args(OsuRuns, args)), benchmarks=",".join(args.benchmarks))
    fed, placement = _placement(args)
    ctx = workloads.Context(fed, placement, args.ranks_per_node, timeout=args.timeout, progress=progress)
    return run_workload(workloads.get("compare"), ctx, params, args.out)


def cmd_matrix(args) -> int:
    """The `matrix` workload on the placement, or on every node of the federation."""
    from geofed import workloads
    from geofed.launch.placement import every_node
    fed = federation.load(args.federation)
    placement = _placement(args)[1] if args.placement else every_node(fed)
    w = workloads.get("matrix")
    ctx = workloads.Context(fed, placement, 1, args.hostfile, args.timeout, progress=progress)
    return run_workload(w, ctx, from_args(w.Params, args), args.out)


def cmd_check(args) -> int:
    from geofed.bench import check
    runs = check.load_runs(args.runs)
    if args.make_references:
        print(check.make_references(runs), end="")
        return 0
    if not args.references:
        raise UserError("bench check: --references FILE is needed (or --make-references to write one)")
    rows = check.check(check.load_references(args.references), runs)
    emit(records.make("bench.check", {"references": str(args.references), "rows": rows}), args.out,
         check.format_table(rows, everything=args.all))
    return 0 if all(r["ok"] for r in rows) else 1


def cmd_bench_btio(args) -> int:
    from geofed.bench import btio
    from geofed.launch.placement import parse
    fed = federation.load(args.federation)
    placement = parse(args.placement, fed)
    data = btio.run(fed, placement, args.cls, args.subtype, Path(args.path), ranks_per_node=args.ranks_per_node,
               steps=args.steps, hostfile=args.hostfile, timeout=args.timeout)
    emit(records.make("bench.btio", data, **records.federation_meta(fed)), args.out, btio.format_table(data))
    return 0 if data["verified"] and data["files_identical"] else 1


def mpi_args(p: argparse.ArgumentParser) -> None:
    from geofed.bench import suite  # light: no MPI
    p.add_argument("benchmarks", nargs="+", metavar="BENCHMARK", help=", ".join([*suite.BENCHMARKS, *suite.GROUPS]))
    options.job(p, placement_text="nodes per site like W1G1, or by name like 'W[2]G[1]' (ranks 0 and 1 measure p2p)")
    add_options(p, suite.Measure)
    options.out(p, "geofed-out/bench", "the bench.mpi record")


def compare_args(p: argparse.ArgumentParser) -> None:
    from geofed.workloads.compare import OsuRuns
    p.add_argument("benchmarks", nargs="*", default=["latency", "bw"], metavar="BENCHMARK",
                   help="default: latency bw")
    options.federation(p)
    options.placement(p)
    options.ranks_per_node(p)
    options.timeout(p)
    add_options(p, OsuRuns)
    options.out(p, "geofed-out/bench", "the bench.compare record")


def matrix_args(p: argparse.ArgumentParser) -> None:
    options.federation(p)
    options.placement(p, required=False, text="nodes to include, like W2G2 (default: every node)")
    from geofed.workloads.matrix import MatrixParams
    add_options(p, MatrixParams)
    options.hostfile(p)
    options.timeout(p)
    options.out(p, "geofed-out/bench", "the bench.matrix record")


def check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", help="bench.mpi record files or directories (the newest result per benchmark counts)")
    p.add_argument("--references", "-r", help="references TOML (system.class.benchmark tables, see docs/bench.md)")
    p.add_argument("--make-references", action="store_true", help="print a references file from the runs instead")
    p.add_argument("--all", action="store_true", help="list every reference, not only the failed ones")
    options.out(p, None, "a bench.check record")


def btio_args(p: argparse.ArgumentParser) -> None:
    options.job(p, timeout_default=None, placement_text="nodes per site, like W4 (a square number of ranks)")
    p.add_argument("--class", dest="cls", default="S", help="NPB class: S (12^3), W (24^3), A (64^3), B, C (default S)")
    p.add_argument("--subtype", type=choices(("simple", "full")), default=["simple", "full"], help="simple, full or both (default both)")
    p.add_argument("--steps", type=positive_int, help="time steps (default the class's; a dump every 5)")
    p.add_argument("--path", default=".", help="directory the shared file is written in (default .)")
    options.out(p, "geofed-out/bench", "the bench.btio record")


def cmd_workload(args) -> int:
    """`geofed bench NAME` of a workload from the registry: check, run, show, save; exit 1
    when its sanity check fails."""
    from geofed import workloads
    from geofed.launch.placement import parse
    w = workloads.get(args.workload)
    fed = federation.load(args.federation)
    ctx = workloads.Context(fed, parse(args.placement, fed) if args.placement else None, args.ranks_per_node,
                            args.hostfile, args.timeout, progress=progress)
    return run_workload(w, ctx, from_args(w.Params, args), args.out)


def run_workload(w, ctx, params, out) -> int:
    """Check, run, show and save a workload's record; 1 when its sanity check fails."""
    w.check(ctx, params)
    rec = w.run(ctx, params)
    emit(rec, out, w.table(rec))
    verdict = w.sanity(rec)
    if not verdict.ok:
        print(f"geofed: failed: {w.name}: {verdict.why}", file=sys.stderr)
    return 0 if verdict.ok else 1


def workload_args(p: argparse.ArgumentParser, w) -> None:
    options.federation(p)
    options.placement(p, required=w.needs_placement)
    options.ranks_per_node(p)
    options.hostfile(p)
    options.timeout(p)
    add_options(p, w.Params)
    options.out(p, "geofed-out/bench", f"the {w.kind} record")
    p.set_defaults(workload=w.name)
