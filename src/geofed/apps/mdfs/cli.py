"""`geofed mdfs run|sweep` and `geofed bench mdfs`."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from geofed.errors import UserError
from geofed.progress import Bar, progress
from geofed.validate import nonnegative_int, positive_float, positive_int, probability


def _params(args):
    from geofed.apps.mdfs.core import Params
    return Params(dimensions=args.dim, divisions=args.divisions, discretizations=args.discretizations,
                  seed=args.seed, range_=args.range, pc_xi=args.pc_xi, n_contrast=args.contrast, level=args.level)


def load_input(args):
    from geofed.apps.mdfs import data
    if args.data in (None, "madelon-like"):
        return data.madelon_like(seed=args.data_seed)
    header = {None: None, "yes": True, "no": False}[args.header]
    return data.load_csv(args.data, decision=args.decision, decision_file=args.decision_file, header=header)


def cmd_run(args) -> int:
    from geofed import federation, records
    from geofed.apps.mdfs import core, jobs, output

    params = _params(args)
    params.check()
    ds = load_input(args)
    if args.hostfile and not args.placement:
        raise UserError("--hostfile: only with --placement (it names the hosts the placement's nodes run on)")
    if args.placement:
        fed = federation.load(args.federation)
        # A real cluster's ranks read the data where this process wrote it: the shared
        # current directory (see jobs.run_on_placement).
        with tempfile.TemporaryDirectory(prefix=".geofed-mdfs-" if args.hostfile else "geofed-mdfs-",
                                         dir="." if args.hostfile else None) as tmp:
            npz = jobs.save_npz(Path(tmp).resolve() / "data.npz", ds.x, ds.y)
            result = jobs.run_on_placement(fed, args.placement, npz, params, args.split, args.threads,
                                           args.timeout, progress=True, hostfile=args.hostfile)
        meta = records.federation_meta(fed)
    else:
        if args.split != "speed":
            raise UserError("--split: only with --placement (it splits the work among nodes)")
        result = core.analyse(ds.x, ds.y, params, threads=args.threads or os.cpu_count() or 1, progress=Bar("mdfs: tuples"))
        meta = {}
    files = output.write(result, ds.names, args.out)
    print(output.table(result, ds.names))
    t = result["timing"]
    print("time: " + ", ".join(f"{k.removesuffix('_s')} {v:.2f} s" for k, v in t.items()))
    rec = records.make("mdfs.run", output.record_data(result, ds.names, ds.source, args.placement, files), **meta)
    print(f"results: {files['ig_csv']}, {files['tuples_csv']}, {files['json']}")
    print(f"record: {records.save(rec, args.out)}")
    return 0


def cmd_sweep(args) -> int:
    from geofed.apps.mdfs import sweep
    return sweep.main(args, _params(args), progress)


def cmd_bench(args) -> int:
    from geofed.apps.mdfs import bench
    return bench.main(args, progress)


def _analysis_args(p: argparse.ArgumentParser, dim: int = 2, discretizations: int = 1) -> None:
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


def register(commands, bench) -> None:
    sub = commands.add_parser("mdfs", help="multidimensional feature selection (MDFS) on a data set").add_subparsers(
        dest="action", required=True)
    p = sub.add_parser("run", help="relevant variables by MDFS: locally, or across a placement of the testbed")
    p.add_argument("data", nargs="?", help="CSV file (objects in rows); default: the Madelon-like generator")
    p.add_argument("--decision", help="decision column: name or 0-based index (default: the last column)")
    p.add_argument("--decision-file", help="decisions in a separate file, one per line")
    p.add_argument("--header", choices=["yes", "no"], help="does the CSV have a header row (default: detect)")
    _analysis_args(p)
    p.add_argument("--threads", type=nonnegative_int, default=0, help="threads (default: all cores; per rank: its node's cores)")
    p.add_argument("--placement", "-p", help="run across testbed nodes, like G1W1 (default: on this machine)")
    p.add_argument("--federation", "-f", default="icm-task", help="federation for --placement (default icm-task)")
    p.add_argument("--split", choices=["speed", "calibrate", "even"], default="speed",
                   help="work per node: by declared speed, by a measured calibration, or even (default speed)")
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE' for --placement; srun inside a Slurm allocation")
    p.add_argument("--timeout", type=positive_float, help="stop a --placement job after this many seconds")
    p.add_argument("--out", default="geofed-out/mdfs", help="directory for CSV, JSON and the record")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="seed 000's Tables 1 and 2: time and speedup per placement on the testbed (root)")
    _analysis_args(p, dim=2, discretizations=30)
    p.add_argument("--federation", "-f", default="icm-task", help="federation to copy and bring up (default icm-task)")
    p.add_argument("--placements", default="G1W0,G0W1,G2W0,G1W1,G0W2,G2W2,G0W4",
                   help="comma-separated placement codes (default G1W0,G0W1,G2W0,G1W1,G0W2,G2W2,G0W4)")
    p.add_argument("--split", default="speed,even", help="splits to compare (default speed,even)")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs per placement and split; medians (default 3)")
    p.add_argument("--out", default="geofed-out/mdfs-sweep", help="directory for the record")
    p.set_defaults(func=cmd_sweep)

    p = bench.add_parser("mdfs", help="MDFS kernel side by side with the reference (PyPI mdfs), same data and parameters")
    p.add_argument("--cases", default="2d30,3d1", help="cases: 2d30 (2D, 30 discretizations), 3d1, 2d1, 1d1 (default 2d30,3d1)")
    p.add_argument("--variables", type=positive_int, default=500, help="variables of the Madelon-like data (default 500)")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs of each side; medians (default 3)")
    p.add_argument("--threads", type=nonnegative_int, default=0, help="threads for the threaded runs (default: all cores)")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the JSON record")
    p.set_defaults(func=cmd_bench)
