"""`geofed bench mpi|compare|matrix|check|io|btio|hpl|hpl-sweep`: the interconnect, storage
and Linpack benchmarks. Heavy imports stay inside the commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from geofed import federation, records, validate
from geofed.cli import options
from geofed.cli.common import emit
from geofed.errors import JobFailed, UserError
from geofed.params import add_options, from_args
from geofed.progress import progress
from geofed.validate import choices, positive_float, positive_int

# A small share of the nodes' memory: on the scaled testbed (2 GB per node, 0.4 core)
# a 2-node HPL run then takes seconds, not minutes. Acceptance runs ask for more.
HPL_DEFAULT_MEMORY = 0.02


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
    from geofed.bench import compare
    fed, placement = _placement(args)
    data = compare.run(fed, placement, args.benchmarks, args.sizes, args.osu, args.repeat, args.ranks_per_node,
                       args.timeout, progress)
    emit(records.make("bench.compare", data, **records.federation_meta(fed)), args.out, compare.format_table(data))
    return 0


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


def cmd_io(args) -> int:
    import shutil

    from geofed.bench import storage, storage_peers
    sizes = validate.parse_sizes(args.sizes, "--sizes")
    record_sizes = validate.parse_sizes(args.records or storage.default_records(max(sizes)), "--records")
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
    emit(records.make("bench.io", data), args.out, storage.format_table(data))
    return 0


def cmd_bench_hpl(args) -> int:
    from geofed.apps.hpl import params as P
    from geofed.apps.hpl import run
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
        ns = [P.n_for_memory(args.memory or HPL_DEFAULT_MEMORY, memory, args.nb)]
    p, q = parse_grid(args.grid) if args.grid else (0, 0)
    params = HplParams(tuple(ns), args.nb, p, q, args.bcast, args.depth, args.ranks_per_node).on(
        placement.node_count, f"placement {placement.code} with {args.ranks_per_node} rank per node")
    data = run.run(fed, placement, params, hostfile=args.hostfile, timeout=args.timeout, cpu_limit=args.cpu_limit)
    emit(records.make("bench.hpl", data, **records.federation_meta(fed)), args.out, run.format_table(data))
    return 0 if data["passed"] else 1


def cmd_bench_hpl_sweep(args) -> int:
    from geofed.apps.hpl import sweep
    return sweep.main(args, progress)


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
    p.add_argument("benchmarks", nargs="*", default=["latency", "bw"], metavar="BENCHMARK",
                   help="default: latency bw")
    options.federation(p)
    options.placement(p)
    options.ranks_per_node(p)
    options.timeout(p)
    p.add_argument("--osu", required=True, help="OSU Micro-Benchmarks install prefix (built by you, see docs/bench.md)")
    p.add_argument("--sizes", default="1:4M", help="as for bench mpi (default 1:4M)")
    p.add_argument("--repeat", type=positive_int, default=3, help="alternate runs of each (default 3); medians are compared")
    options.out(p, "geofed-out/bench", "the bench.compare record")


def matrix_args(p: argparse.ArgumentParser) -> None:
    options.federation(p)
    options.placement(p, required=False, text="nodes to include, like W2G2 (default: every node)")
    from geofed.workloads.matrix import MatrixParams
    add_options(p, MatrixParams)
    options.hostfile(p)
    options.timeout(p)
    options.out(p, "geofed-out/bench", "the bench.matrix record")


def io_args(p: argparse.ArgumentParser) -> None:
    from geofed.bench import storage, storage_peers  # light: the C library loads on first use
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
    options.out(p, "geofed-out/bench", "the bench.io record")


def check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", help="bench.mpi record files or directories (the newest result per benchmark counts)")
    p.add_argument("--references", "-r", help="references TOML (system.class.benchmark tables, see docs/bench.md)")
    p.add_argument("--make-references", action="store_true", help="print a references file from the runs instead")
    p.add_argument("--all", action="store_true", help="list every reference, not only the failed ones")
    options.out(p, None, "a bench.check record")


def hpl_args(p: argparse.ArgumentParser) -> None:
    from geofed.records.hpl import BCASTS, HplParams
    DEFAULT_NB = HplParams.nb
    options.federation(p)
    options.placement(p)
    p.add_argument("--ranks-per-node", type=positive_int, default=1, help="ranks per node (default 1)")
    p.add_argument("--n", help="matrix orders N, comma-separated (default: the order filling --memory)")
    p.add_argument("--memory", type=positive_float,
                   help=f"fraction of the placement's memory (federation file) the matrix fills (default {HPL_DEFAULT_MEMORY})")
    p.add_argument("--nb", type=positive_int, default=DEFAULT_NB, help=f"block size NB (default {DEFAULT_NB})")
    p.add_argument("--grid", help="process grid PxQ (default: as square as the rank count allows, P <= Q)")
    p.add_argument("--bcast", choices=list(BCASTS), default="1rM", help="panel broadcast variant (default 1rM)")
    p.add_argument("--depth", type=int, default=1, choices=[0, 1, 2], help="lookahead depth (default 1)")
    options.hostfile(p)
    p.add_argument("--cpu-limit", action="store_true",
                   help="testbed: ranks under their node's CPU quota (default off: HPL's broadcasts poll, and a "
                        "polling rank under a quota is throttled; docs/hpl.md)")
    options.timeout(p)
    options.out(p, "geofed-out/bench", "the bench.hpl record")


def hpl_sweep_args(p: argparse.ArgumentParser) -> None:
    from geofed.records.hpl import HplParams
    DEFAULT_NB = HplParams.nb
    options.federation(p, what="federation to copy and bring up")
    p.add_argument("--placements", default="W1,W2,G1W1",
                   help="placements, the first of one node (the speed-up's base); default W1,W2,G1W1 (one rank "
                        "per host core here; W4,G2W2 oversubscribe a 2-core host)")
    p.add_argument("--n", default="2000,3000", help="matrix orders (default 2000,3000)")
    p.add_argument("--nb", type=positive_int, default=DEFAULT_NB, help=f"block size NB (default {DEFAULT_NB})")
    p.add_argument("--repeat", type=positive_int, default=1, help="runs per placement; medians (default 1)")
    p.add_argument("--peer", action="store_true",
                   help="also run each placement's rank count on this host without the testbed (plain mpiexec)")
    options.out(p, "geofed-out/bench", "the bench.hpl.sweep record")


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
