"""`geofed bench hpl`: the High-Performance Linpack on a placement, as a record."""

from __future__ import annotations

from geofed.validate import positive_float, positive_int

DEFAULT_NB = 80
# A small share of the nodes' memory: on the scaled testbed (2 GB per node, 0.4 core)
# a 2-node run then takes seconds, not minutes. Acceptance runs ask for more.
DEFAULT_MEMORY = 0.02


def cmd_bench_hpl(args) -> int:
    from geofed import federation, records
    from geofed.apps.hpl import params as P
    from geofed.apps.hpl import run
    from geofed.errors import UserError
    from geofed.launch.placement import parse
    from geofed.records.hpl import HplParams, parse_grid
    fed = federation.load(args.federation)
    placement = parse(args.placement, fed)
    if args.n and args.memory:
        raise UserError("--n and --memory: give one (the matrix order, or the share of the nodes' memory it fills)")
    if args.n:
        ns = P.parse_ns(args.n)
    else:
        memory = sum(fed.site(n.site).memory_gb for n in placement.nodes(fed)) * 1e9
        ns = [P.n_for_memory(args.memory or DEFAULT_MEMORY, memory, args.nb)]
    p, q = parse_grid(args.grid) if args.grid else (0, 0)
    params = HplParams(tuple(ns), args.nb, p, q, args.bcast, args.depth, args.ranks_per_node).on(
        placement.node_count, f"placement {placement.code} with {args.ranks_per_node} rank per node")
    data = run.run(fed, placement, params, hostfile=args.hostfile, timeout=args.timeout, cpu_limit=args.cpu_limit)
    print(run.format_table(data))
    rec = records.make("bench.hpl", data, **records.federation_meta(fed))
    print(f"record: {records.save(rec, args.out)}")
    return 0 if data["passed"] else 1


def cmd_bench_hpl_sweep(args) -> int:
    from geofed.apps.hpl import sweep
    from geofed.progress import progress
    return sweep.main(args, progress)


def register(commands, bench) -> None:
    from geofed.records.hpl import BCASTS
    p = bench.add_parser("hpl", help="High-Performance Linpack (HPL 2.0) on a placement: time, GFLOPS, residual check")
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--placement", "-p", required=True, help="nodes per site, like G2W2")
    p.add_argument("--ranks-per-node", type=positive_int, default=1, help="ranks per node (default 1)")
    p.add_argument("--n", help="matrix orders N, comma-separated (default: the order filling --memory)")
    p.add_argument("--memory", type=positive_float,
                   help=f"fraction of the placement's memory (federation file) the matrix fills (default {DEFAULT_MEMORY})")
    p.add_argument("--nb", type=positive_int, default=DEFAULT_NB, help=f"block size NB (default {DEFAULT_NB})")
    p.add_argument("--grid", help="process grid PxQ (default: as square as the rank count allows, P <= Q)")
    p.add_argument("--bcast", choices=list(BCASTS), default="1rM", help="panel broadcast variant (default 1rM)")
    p.add_argument("--depth", type=int, default=1, choices=[0, 1, 2], help="lookahead depth (default 1)")
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE'; srun inside a Slurm allocation")
    p.add_argument("--cpu-limit", action="store_true",
                   help="testbed: ranks under their node's CPU quota (default off: HPL's broadcasts poll, and a "
                        "polling rank under a quota is throttled; docs/hpl.md)")
    p.add_argument("--timeout", type=positive_float, default=900, help="stop the run after this many seconds")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the bench.hpl record")
    p.set_defaults(func=cmd_bench_hpl)

    p = bench.add_parser("hpl-sweep", help="seed 002's HPL tables T, S, SP, SPF over placements and N on a "
                                           "private copy of the federation (root)")
    p.add_argument("--federation", "-f", default="icm-task", help="federation to copy and bring up (default icm-task)")
    p.add_argument("--placements", default="W1,W2,G1W1",
                   help="placements, the first of one node (the speed-up's base); default W1,W2,G1W1 (one rank "
                        "per host core here; W4,G2W2 oversubscribe a 2-core host)")
    p.add_argument("--n", default="2000,3000", help="matrix orders (default 2000,3000)")
    p.add_argument("--nb", type=positive_int, default=DEFAULT_NB, help=f"block size NB (default {DEFAULT_NB})")
    p.add_argument("--repeat", type=positive_int, default=1, help="runs per placement; medians (default 1)")
    p.add_argument("--peer", action="store_true",
                   help="also run each placement's rank count on this host without the testbed (plain mpiexec)")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the bench.hpl.sweep record")
    p.set_defaults(func=cmd_bench_hpl_sweep)
