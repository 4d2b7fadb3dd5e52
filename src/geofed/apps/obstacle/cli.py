"""`geofed obstacle` and `geofed bench obstacle`."""

from __future__ import annotations

from geofed.progress import progress
from geofed.validate import nonnegative_float, positive_float, positive_int, probability

SCHEMES = ["sync", "async", "hybrid", "auto", "mpi"]


def write_outputs(result: dict, out: str) -> dict:
    """solution.npy, residual-history.csv, peers.csv; returns their paths."""
    from pathlib import Path

    import numpy as np
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    files = {"solution": d / "solution.npy", "history": d / "residual-history.csv", "peers": d / "peers.csv"}
    np.save(files["solution"], result["u"])
    files["history"].write_text("seconds,certified_residual\n" + "".join(f"{t:.6f},{r:.6e}\n" for t, r in result["residual_history"]))
    files["peers"].write_text("rank,node,site,planes,iterations,seconds,halos_received,snapshots\n" + "".join(
        f"{p['rank']},{p['node']},{p['site']},{p['hi'] - p['lo']},{p['iterations']},{p['seconds']:.6f},"
        f"{p['halos_received']},{p['snapshots']}\n" for p in result["peers"]))
    return {k: str(v) for k, v in files.items()}


def cmd_obstacle(args) -> int:
    from geofed import federation, records
    from geofed.apps.obstacle import job

    fed = federation.load(args.federation)
    spec = job.Spec(args.n, args.tol, args.scheme, args.c, args.delta, args.network, args.secret_file)
    res = job.run_on_placement(fed, args.placement, spec, timeout=args.timeout, hostfile=args.hostfile)
    files = write_outputs(res, args.out)
    data = {k: v for k, v in res.items() if k != "u"} | {"files": files}
    rec = records.make("obstacle.run", data, **records.federation_meta(fed))
    print(f"{'rank':>4} {'node':>4} {'planes':>6} {'iterations':>10} {'seconds':>8}")
    for p in res["peers"]:
        print(f"{p['rank']:>4} {p['node']:>4} {p['hi'] - p['lo']:>6} {p['iterations']:>10} {p['seconds']:>8.3f}")
    print(f"{args.scheme} on {args.placement}: {res['time_to_solution_s']:.3f} s to a certified residual "
          f"{res['certified_residual']:.3g} <= {args.tol:g} (recomputed {res['recomputed_residual']:.3g}), "
          f"max error <= {res['error_bound']:.3g}")
    print(f"results: {files['solution']}, {files['history']}, {files['peers']}")
    print(f"record: {records.save(rec, args.out)}")
    return 0


def cmd_bench(args) -> int:
    from geofed.apps.obstacle import bench
    return bench.main(args, progress)


def register(commands, bench) -> None:
    p = commands.add_parser("obstacle", help="3-D obstacle problem by projected Richardson over P2PSAP on a placement (seed 003)")
    p.add_argument("--n", type=positive_int, default=32, help="interior points per axis (default 32)")
    p.add_argument("--scheme", choices=SCHEMES, default="async",
                   help="sync, async, hybrid (sync inside a site), auto (async across sites), "
                        "or mpi (the synchronous projected Jacobi on MPI); default async")
    p.add_argument("--placement", "-p", required=True, help="one peer per node, like G2W2")
    p.add_argument("--federation", "-f", default="icm-task", help="federation (its testbed must be up; default icm-task)")
    p.add_argument("--tol", type=positive_float, default=1e-6, help="certified fixed-point residual max|u - F(u)| (default 1e-6)")
    p.add_argument("--c", type=nonnegative_float, default=10.0, help="reaction coefficient c >= 0 (default 10)")
    p.add_argument("--delta", type=positive_float, help="Richardson step (default and maximum h^2/(6 + c h^2))")
    p.add_argument("--network", choices=["eth", "fabric"], default="eth", help="P2PSAP network context (default eth)")
    p.add_argument("--secret-file", help="the job secret peers authenticate with (default: a fresh random one per job)")
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE'; srun inside a Slurm allocation")
    p.add_argument("--timeout", type=positive_float, default=600, help="stop the job after this many seconds (default 600)")
    p.add_argument("--out", default="geofed-out/obstacle", help="directory for solution, history and the record")
    p.set_defaults(func=cmd_obstacle)

    p = bench.add_parser("obstacle", help="seed 003's Table III on the testbed: P2PSAP sync/async against MPI Jacobi, "
                                          "and the reliable stack's throughput against TCP (root)")
    p.add_argument("--n", type=positive_int, default=32, help="interior points per axis (default 32)")
    p.add_argument("--tol", type=positive_float, default=1e-8, help="certified residual (default 1e-8)")
    p.add_argument("--placements", default="W2,G1W1", help="one site and across the link (default W2,G1W1)")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs per cell; medians (default 3)")
    p.add_argument("--mbytes", type=positive_float, default=200, help="bytes per throughput run, in MB (default 200)")
    p.add_argument("--loss", type=probability, default=0.01, help="link loss of the delivery run (default 0.01)")
    p.add_argument("--part", choices=["all", "solver", "throughput"], default="all")
    p.add_argument("--federation", "-f", default="icm-task", help="federation to copy and bring up (default icm-task)")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the JSON record")
    p.set_defaults(func=cmd_bench)
