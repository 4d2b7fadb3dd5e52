"""Subcommands of the interconnect validation suite: `geofed bench mpi|compare|matrix|check`.

Registered through geofed.cli.PLUGINS; heavy imports stay inside the commands.
"""

from __future__ import annotations

import argparse

from geofed import federation, records
from geofed.errors import JobFailed, UserError
from geofed.progress import progress
from geofed.validate import choices, positive_float, positive_int


def _job_args(p: argparse.ArgumentParser, ranks: bool = True) -> None:
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--placement", "-p", required=True, help="nodes per site, like W1G1 (ranks 0 and 1 measure p2p)")
    if ranks:
        p.add_argument("--ranks-per-node", "-n", type=positive_int, default=1, help="ranks per node (default 1)")
    p.add_argument("--timeout", type=positive_float, default=900, help="stop a hung job after this many seconds (default 900)")


def _placement(args):
    from geofed.launch.placement import parse
    fed = federation.load(args.federation)
    return fed, parse(args.placement, fed)


def cmd_mpi(args) -> int:
    from geofed.bench import jobs, suite
    fed, placement = _placement(args)
    benches = suite.resolve(args.benchmarks)
    suite.parse_sizes(args.sizes)
    suite.check_ranks(benches, placement.node_count * args.ranks_per_node,
                      f"placement {placement.code} with {args.ranks_per_node} rank per node")
    argv = ["geofed.bench.mpi", *args.benchmarks, *suite.measure_argv(args)]
    rec = jobs.run_program(fed, placement, argv, ranks_per_node=args.ranks_per_node, hostfile=args.hostfile,
                           timeout=args.timeout, what=f"bench mpi {' '.join(args.benchmarks)}")
    print(f"record: {records.save(rec, args.out)}")
    return rec["data"]["exit_status"]


def cmd_compare(args) -> int:
    from geofed.bench import compare
    fed, placement = _placement(args)
    data = compare.run(fed, placement, args.benchmarks, args.sizes, args.osu, args.repeat, args.ranks_per_node,
                       args.timeout, progress)
    print(compare.format_table(data))
    rec = records.make("bench.compare", data, **records.federation_meta(fed))
    print(f"record: {records.save(rec, args.out)}")
    return 0


def cmd_matrix(args) -> int:
    from geofed.bench import jobs, suite
    from geofed.launch.placement import every_node
    fed = federation.load(args.federation)
    placement = _placement(args)[1] if args.placement else every_node(fed)
    suite.parse_size(args.latency_size), suite.parse_size(args.bw_size)
    if placement.node_count < 2:
        raise UserError(f"bench matrix: placement {placement.code} has {placement.node_count} node; it needs 2 or more")
    argv = ["geofed.bench.matrix", "--latency-size", args.latency_size, "--bw-size", args.bw_size,
            "--budget", str(args.budget)] + (["--pairs", args.pairs] if args.pairs else [])
    rec = jobs.run_program(fed, placement, argv, hostfile=args.hostfile, timeout=args.timeout, what="bench matrix")
    print(f"record: {records.save(rec, args.out)}")
    return rec["data"]["exit_status"]


def cmd_check(args) -> int:
    from geofed.bench import check
    runs = check.load_runs(args.runs)
    if args.make_references:
        print(check.make_references(runs), end="")
        return 0
    if not args.references:
        raise UserError("bench check: --references FILE is needed (or --make-references to write one)")
    rows = check.check(check.load_references(args.references), runs)
    print(check.format_table(rows, everything=args.all))
    if args.out:
        rec = records.make("bench.check", {"references": str(args.references), "rows": rows})
        print(f"record: {records.save(rec, args.out)}")
    return 0 if all(r["ok"] for r in rows) else 1


def cmd_io(args) -> int:
    import shutil

    from geofed.bench import storage, storage_peers, suite
    sizes = suite.parse_sizes(args.sizes, "--sizes")
    record_sizes = suite.parse_sizes(args.records or storage.default_records(max(sizes)), "--records")
    storage.check_grid(sizes, record_sizes, args.modes)
    storage_peers.check(args.peers, record_sizes)
    directory = storage.workdir(args.path)
    try:  # the directory goes whatever happens: an error, a failed peer, Ctrl-C
        storage.check_space(directory, max(sizes))
        data = storage.run(directory, sizes, record_sizes, args.modes, args.ops, args.repeat, args.budget,
                           args.peers, args.drop_cache, progress)
    except OSError as e:  # the storage failed us (full, gone, an I/O error): one line, exit 1
        raise JobFailed(f"bench io: {e}") from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(storage.format_table(data))
    print(f"record: {records.save(records.make('bench.io', data), args.out)}")
    return 0


def register(commands, bench) -> None:
    from geofed.bench import suite  # light: no MPI
    names = ", ".join([*suite.BENCHMARKS, *suite.GROUPS])

    p = bench.add_parser("mpi", help="MPI micro-benchmarks with OSU definitions: latency, bw, bibw, collectives")
    p.add_argument("benchmarks", nargs="+", metavar="BENCHMARK", help=names)
    _job_args(p)
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE' (see geofed run)")
    suite.add_measure_options(p)
    p.add_argument("--out", default="geofed-out/bench", help="directory for the bench.mpi record")
    p.set_defaults(func=cmd_mpi)

    p = bench.add_parser("compare", help="geofed's micro-benchmarks side by side with OSU's (C) on the same ranks")
    p.add_argument("benchmarks", nargs="*", default=["latency", "bw"], metavar="BENCHMARK",
                   help="default: latency bw")
    _job_args(p)
    p.add_argument("--osu", required=True, help="OSU Micro-Benchmarks install prefix (built by you, see docs/bench.md)")
    p.add_argument("--sizes", default="1:4M", help="as for bench mpi (default 1:4M)")
    p.add_argument("--repeat", type=positive_int, default=3, help="alternate runs of each (default 3); medians are compared")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the bench.compare record")
    p.set_defaults(func=cmd_compare)

    p = bench.add_parser("matrix", help="latency and bandwidth between every pair of nodes (heat map in the report)")
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--placement", "-p", help="nodes to include, like W2G2 (default: every node)")
    p.add_argument("--pairs", help="only these pairs, like W1-G1,W1-W2")
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE'")
    p.add_argument("--latency-size", default="1", help="latency message size (default 1)")
    p.add_argument("--bw-size", default="1M", help="bandwidth message size (default 1M)")
    p.add_argument("--budget", type=positive_float, default=0.3, help="seconds per measurement (default 0.3)")
    p.add_argument("--timeout", type=positive_float, default=900, help="stop a hung job after this many seconds (default 900)")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the bench.matrix record")
    p.set_defaults(func=cmd_matrix)

    from geofed.bench import storage, storage_peers  # light: the C library loads on first use
    p = bench.add_parser("io", help="storage: IOzone's grid of file x record sizes, buffered, O_SYNC and O_DIRECT, "
                                    "beside IOzone and fio (docs/storage.md)")
    p.add_argument("--path", help="directory to measure (default: the current one); the files go in a private "
                                  "directory made there and removed at the end")
    p.add_argument("--sizes", default=storage.DEFAULT_SIZES,
                   help=f"file sizes: MIN:MAX (powers of 2), MIN:MAX:4 (of 4) or a list (default {storage.DEFAULT_SIZES})")
    p.add_argument("--records", help="record sizes, as --sizes (default: 4K to 16M or the largest file, powers of "
                                     "4); a file is measured with each record no larger than itself")
    p.add_argument("--modes", type=choices(storage.MODES), default=list(storage.MODES),
                   help="buffered, sync (O_SYNC), direct (O_DIRECT), comma-separated (default all)")
    p.add_argument("--ops", type=choices(storage.OPS), default=list(storage.OPS),
                   help="write, rewrite, read, reread, randread, randwrite, comma-separated (default all)")
    p.add_argument("--budget", type=positive_float, default=300,
                   help="seconds: larger file sizes are skipped once the next would not fit (default 300)")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs per cell; medians (default 3)")
    p.add_argument("--peers", type=choices(storage_peers.PEERS, none=True), default=[],
                   help="iozone, fio, comma-separated, on the same cells (default none)")
    p.add_argument("--drop-cache", action=argparse.BooleanOptionalAction, default=True,
                   help="drop the file's pages from the page cache before `read`, so that it reads the storage "
                        "and `reread` the cache (default on)")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the bench.io record")
    p.set_defaults(func=cmd_io)

    p = bench.add_parser("check", help="compare runs with reference values and tolerances; exit 1 when any fails")
    p.add_argument("runs", nargs="+", help="bench.mpi record files or directories (the newest result per benchmark counts)")
    p.add_argument("--references", "-r", help="references TOML (system.class.benchmark tables, see docs/bench.md)")
    p.add_argument("--make-references", action="store_true", help="print a references file from the runs instead")
    p.add_argument("--all", action="store_true", help="list every reference, not only the failed ones")
    p.add_argument("--out", help="directory to write a bench.check record to")
    p.set_defaults(func=cmd_check)
