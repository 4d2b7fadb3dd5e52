"""`geofed mdfs`, `geofed workflow grayscott`, `geofed obstacle` and their benchmarks."""

from __future__ import annotations

import argparse
from pathlib import Path

from geofed import federation, records
from geofed.cli import options
from geofed.cli.bench import run_workload
from geofed.cli.common import command_argv, emit
from geofed.params import add_options, from_args
from geofed.progress import progress
from geofed.validate import nonnegative_float, nonnegative_int, positive_float, positive_int, probability


def _mdfs_params(args):
    from geofed.apps.mdfs.core import Params
    return Params(dimensions=args.dim, divisions=args.divisions, discretizations=args.discretizations,
                  seed=args.seed, range_=args.range, pc_xi=args.pc_xi, n_contrast=args.contrast, level=args.level)


def cmd_mdfs_run(args) -> int:
    """The `mdfs` workload: on this machine, or across the placement."""
    from geofed import workloads
    from geofed.launch.placement import parse
    w = workloads.get("mdfs")
    fed = federation.load(args.federation) if args.placement else None
    ctx = workloads.Context(fed, parse(args.placement, fed) if fed else None, 1, args.hostfile, args.timeout,
                            Path(args.out), progress)
    params = w.Params(data=args.data, decision=args.decision, decision_file=args.decision_file, header=args.header,
                      data_seed=args.data_seed, analysis=_mdfs_params(args), split=args.split, threads=args.threads)
    return run_workload(w, ctx, params, args.out)


def cmd_mdfs_sweep(args) -> int:
    """The `mdfs-sweep` workload on a private copy of the federation, brought up and taken down here."""
    from geofed import workloads
    w = workloads.get("mdfs-sweep")
    params = w.Params(placements=args.placements, splits=args.split, repeat=args.repeat,
                      discretizations=args.discretizations, analysis=_mdfs_params(args), data_seed=args.data_seed,
                      private=True)
    return run_workload(w, workloads.Context(federation.load(args.federation), progress=progress), params, args.out)


def cmd_bench_mdfs(args) -> int:
    """The `mdfs-kernel` workload, on this machine."""
    from geofed import workloads
    w = workloads.get("mdfs-kernel")
    return run_workload(w, workloads.Context(None, progress=progress), from_args(w.Params, args), args.out)


def mdfs_analysis_args(p: argparse.ArgumentParser, dim: int = 2, discretizations: int = 1) -> None:
    p.add_argument("--dim", type=positive_int, default=dim, help=f"tuple size k, 1-5 (default {dim})")
    p.add_argument("--divisions", type=positive_int, default=1, help="thresholds per variable, 1-15 (default 1)")
    p.add_argument("--discretizations", "-D", type=positive_int, default=discretizations,
                   help=f"randomised discretizations (default {discretizations})")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of discretizations and contrasts (default 0)")
    p.add_argument("--range", type=probability, help="threshold randomisation, 0-1 (default: the reference's suggestion)")
    p.add_argument("--pc-xi", type=positive_float, default=0.25, help="pseudocount (default 0.25)")
    p.add_argument("--contrast", type=nonnegative_int, help="contrast variables (default max(30, p); 0 in 1D with -D 1)")
    p.add_argument("--level", type=probability, default=0.05, help="significance level after Holm (default 0.05)")
    p.add_argument("--data-seed", type=nonnegative_int, default=0, help="seed of the Madelon-like data (default 0)")


def cmd_workflow_grayscott(args) -> int:
    from geofed import report
    status = _run_grayscott("grayscott", args, args.hostfile)
    print(f"report: {report.render(records.load_dir(args.out), args.out, title='geofed workflow grayscott')}")
    return status


def cmd_bench_grayscott(args) -> int:
    return _run_grayscott("grayscott-bench", args)


def _run_grayscott(name: str, args, hostfile: str | None = None) -> int:
    """The workload `name` with the command's options as its parameters."""
    from geofed import workloads
    w = workloads.get(name)
    ctx = workloads.Context(federation.load(args.federation), hostfile=hostfile,
                            timeout=args.timeout, out=Path(args.out), progress=progress)
    return run_workload(w, ctx, from_args(w.Params, args), args.out)


def grayscott_settings_args(p) -> None:
    p.add_argument("--settings", help="settings JSON in the ADIOS2 tutorial's shape (default: the tutorial defaults)")
    p.add_argument("--L", type=positive_int, help="override the settings' L (cells per side)")
    p.add_argument("--steps", type=positive_int, help="override the settings' steps")
    p.add_argument("--plotgap", type=positive_int, help="override the settings' plotgap")
    p.add_argument("--noise", type=nonnegative_float, help="override the settings' noise")


def cmd_obstacle(args) -> int:
    """The `obstacle` workload on the placement."""
    from geofed import workloads
    from geofed.launch.placement import parse
    w = workloads.get("obstacle")
    fed = federation.load(args.federation)
    ctx = workloads.Context(fed, parse(args.placement, fed), 1, args.hostfile, args.timeout, Path(args.out), progress)
    return run_workload(w, ctx, from_args(w.Params, args), args.out)


def cmd_bench_obstacle(args) -> int:
    """`obstacle-table` on private copies of the federation, brought up and taken down here."""
    from geofed import workloads
    w = workloads.get("obstacle-table")
    ctx = workloads.Context(federation.load(args.federation), progress=progress)
    params = w.Params(placements=args.placements, n=args.n, tol=args.tol, repeat=args.repeat, part=args.part,
                      mbytes=args.mbytes, loss=args.loss, private=True)
    return run_workload(w, ctx, params, args.out)


def mdfs_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", nargs="?", help="CSV file (objects in rows); default: the Madelon-like generator")
    p.add_argument("--decision", help="decision column: name or 0-based index (default: the last column)")
    p.add_argument("--decision-file", help="decisions in a separate file, one per line")
    p.add_argument("--header", choices=["yes", "no"], help="does the CSV have a header row (default: detect)")
    mdfs_analysis_args(p)
    p.add_argument("--threads", type=nonnegative_int, default=0, help="threads (default: all cores; per rank: its node's cores)")
    options.placement(p, required=False, text="run across testbed nodes, like G1W1 (default: on this machine)")
    options.federation(p, what="federation for --placement")
    p.add_argument("--split", choices=["speed", "calibrate", "even"], default="speed",
                   help="work per node: by declared speed, by a measured calibration, or even (default speed)")
    options.hostfile(p)
    options.timeout(p, None)
    options.out(p, "geofed-out/mdfs", "CSV, JSON and the record")


def mdfs_sweep_args(p: argparse.ArgumentParser) -> None:
    mdfs_analysis_args(p, dim=2, discretizations=30)
    options.federation(p, what="federation to copy and bring up")
    p.add_argument("--placements", default="G1W0,G0W1,G2W0,G1W1,G0W2,G2W2,G0W4",
                   help="comma-separated placement codes (default G1W0,G0W1,G2W0,G1W1,G0W2,G2W2,G0W4)")
    p.add_argument("--split", default="speed,even", help="splits to compare (default speed,even)")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs per placement and split; medians (default 3)")
    options.out(p, "geofed-out/mdfs-sweep", "the record")


def bench_mdfs_args(p: argparse.ArgumentParser) -> None:
    from geofed.workloads.mdfs import KernelParams
    add_options(p, KernelParams)
    options.out(p, "geofed-out/bench", "the JSON record")


def grayscott_sites_args(p: argparse.ArgumentParser) -> None:
    options.federation(p)
    p.add_argument("--sim-site", default="G", help="site of the simulation (default G, as in seed 000)")
    p.add_argument("--analysis-site", default="W", help="site of the consumers (default W)")
    p.add_argument("--sim-ranks", type=positive_int, default=4, help="MPI ranks of the simulation (default 4)")


def workflow_grayscott_args(p: argparse.ArgumentParser) -> None:
    grayscott_sites_args(p)
    p.add_argument("--pdf-site", help="site of the PDF analysis (default: --analysis-site)")
    p.add_argument("--plot-site", help="site of the two plotters (default: --analysis-site)")
    p.add_argument("--pdf-ranks", type=positive_int, default=1, help="MPI ranks of the PDF analysis (default 1)")
    p.add_argument("--connect-timeout", type=positive_float, default=60.0,
                   help="seconds the simulation waits for its consumers to connect (default 60)")
    options.timeout(p, 3600.0)
    options.hostfile(p)
    p.add_argument("--slow-pdf", type=nonnegative_float, default=0.0, help="make the PDF analysis take this many extra seconds per step")
    p.add_argument("--checkpoint", action="store_true",
                   help="the simulation also writes U and V at every output step to gs.bp (BP5) in the run's directory")
    options.out(p, "geofed-out/grayscott", "records, frames and the report")
    grayscott_settings_args(p)


def bench_grayscott_args(p: argparse.ArgumentParser) -> None:
    grayscott_sites_args(p)
    p.add_argument("--sizes", default="64:200,128:100",
                   help="L:STEPS pairs to measure (default 64:200,128:100: about 2 minutes on 2 cores)")
    options.timeout(p, 900.0)
    options.out(p, "geofed-out/bench", "the JSON record and the runs' logs")
    p.add_argument("--settings", help="settings JSON (its L and steps are replaced by --sizes)")
    p.add_argument("--plotgap", type=positive_int, help="override the settings' plotgap")
    p.add_argument("--repeat", type=positive_int, default=1,
                   help="rounds per L: staging off, on and the plain-TCP ceiling in turn; medians (default 1)")
    p.add_argument("--no-ceiling", dest="ceiling", action="store_false",
                   help="skip the same bytes over plain TCP between the same nodes after each staging run")


def obstacle_args(p: argparse.ArgumentParser) -> None:
    from geofed.apps.obstacle.job import Spec
    options.placement(p, text="one peer per node: nodes per site like G2W2, or by name like 'W[1,3]G[2]'")
    options.federation(p, what="federation (its testbed must be up)")
    add_options(p, Spec)
    options.hostfile(p)
    options.timeout(p, 600)
    options.out(p, "geofed-out/obstacle", "solution, history and the record")


def bench_obstacle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=positive_int, default=32, help="interior points per axis (default 32)")
    p.add_argument("--tol", type=positive_float, default=1e-8, help="certified residual (default 1e-8)")
    p.add_argument("--placements", default="W2,G1W1", help="one site and across the link (default W2,G1W1)")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs per cell; medians (default 3)")
    p.add_argument("--mbytes", type=positive_float, default=200, help="bytes per throughput run, in MB (default 200)")
    p.add_argument("--loss", type=probability, default=0.01, help="link loss of the delivery run (default 0.01)")
    p.add_argument("--part", choices=["all", "solver", "throughput"], default="all")
    options.federation(p, what="federation to copy and bring up")
    options.out(p, "geofed-out/bench", "the JSON record")


def cmd_profile(args) -> int:
    """Run the user's program at one site under geofed's profiler; save the app.profile record."""
    from geofed.apps import profile
    from geofed.launch.placement import parse
    program = command_argv(args.program, "profile", "geofed profile -p W2 -- python app.py")
    fed = federation.load(args.federation)
    data = profile.profile(fed, parse(args.placement, fed), program, args.ranks_per_node, hostfile=args.hostfile,
                           timeout=args.timeout, cpu_limit=not args.no_cpu_limit)
    rec = records.make("app.profile", data, **records.federation_meta(fed))
    emit(rec, args.out, profile.format_table(rec.data))
    return 0


def profile_args(p: argparse.ArgumentParser) -> None:
    options.job(p, None, "one site's nodes, like W2")
    p.add_argument("--no-cpu-limit", action="store_true",
                   help="testbed: run ranks without their node's CPU quota, as `geofed run --no-cpu-limit`")
    options.out(p, "geofed-out/profile", "the app.profile record")
    options.command_after_dashes(p)


def cmd_rehearse(args) -> int:
    """Replay a profile's communication on a placement of the testbed, beside its prediction."""
    from geofed import workloads
    from geofed.launch.placement import parse
    w = workloads.get("rehearse")
    fed = federation.load(args.federation)
    ctx = workloads.Context(fed, parse(args.placement, fed), hostfile=args.hostfile, timeout=args.timeout,
                            progress=progress)
    return run_workload(w, ctx, w.Params(profile=args.profile), args.out)


def rehearse_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", help="an app.profile record written by `geofed profile`")
    options.federation(p)
    options.placement(p)
    options.hostfile(p)
    options.timeout(p)
    options.out(p, "geofed-out/rehearse", "the app.rehearsal record")
