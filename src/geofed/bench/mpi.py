"""The rank side of `geofed bench mpi` (the `mpi` workload): runs the micro-benchmarks,
prints OSU's text. Its ranks run under geofed's one entry point:

    mpiexec -n 2 python -m geofed.workloads mpi '{"benchmarks": "latency,bw"}' result.json

Point-to-point benchmarks run between ranks 0 and 1 (as OSU's); other ranks wait in
a barrier that sleeps. Collectives run on every rank. For each message size:

1. one untimed iteration pays for connection set-up and first touch of the buffers;
2. warm-ups: OSU's count, cut to WARMUP_SHARE of the budget;
3. timed iterations: OSU's count, cut to what fits in the budget (at least 3),
   estimated from the warm-ups' time; rank 0 decides and tells the others;
4. one validated round trip of that size (every byte checked both ways), or with
   --validate every message of steps 1-3 checked.

Rank 0 prints OSU-compatible lines ("size value") as each size finishes and returns the
data of a `bench.mpi` record: the statistics of every size and the link model beside them.
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime, timezone

import numpy as np
from numpy._core import multiarray as np_multiarray
from mpi4py import MPI

from geofed import __version__, runtime, validate
from geofed.bench import kernels, model, suite
from geofed.stats import summary

VALIDATION_ITER = 1 << 30  # the final check's pattern differs from any timed iteration's


class Pair:
    """Ranks 0 and 1 of the job as a two-rank communicator (None on other ranks)."""

    def __init__(self, world):
        self.comm = world.Split(0 if world.Get_rank() < 2 else MPI.UNDEFINED, world.Get_rank())
        self.role = self.comm.Get_rank() if self.comm != MPI.COMM_NULL else None


def buffers(nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    # Page-aligned like OSU's, and touched so first-touch page faults stay out of timing.
    # Without huge pages, as OSU's malloc'ed buffers: NumPy asks for them (madvise) on
    # large arrays, and shared-memory copies of 4 MiB messages then ran twice as fast
    # as OSU's, measuring the page size rather than the MPI library.
    np_multiarray._set_madvise_hugepage(False)
    s = np.full(nbytes + 4096, ord("a"), dtype=np.uint8)
    r = np.full(nbytes + 4096, ord("b"), dtype=np.uint8)
    return (s[-s.ctypes.data % 4096:][:nbytes], r[-r.ctypes.data % 4096:][:nbytes])


def run_kernel(bench, comm, role, bufs, size, n, args, iter0):
    """n iterations of `bench` at `size`: (times [s] on rank 0, wrong count on this rank)."""
    s, r = bufs
    if bench.name == "latency":
        return kernels.latency(comm, role, s, r, size, n, args.validate, iter0)
    if bench.name in ("bw", "bibw"):
        return kernels.bw(comm, role, s, r, size, args.window, n, bench.name == "bibw", args.validate, iter0)
    return kernels.coll(comm, bench.name, s, r, size, n, args.rotate_root, args.validate, iter0)


def final_check(bench, comm, role, bufs, size) -> int:
    """One validated exchange of `size` bytes; bytes (or elements) found wrong."""
    s, r = bufs
    if bench.kind == "p2p":
        return kernels.latency(comm, role, s, r, size, 1, True, VALIDATION_ITER)[1]
    return kernels.coll(comm, bench.name, s, r, size, 1, False, True, VALIDATION_ITER)[1]


def measure_size(bench, comm, role, bufs, size, args) -> dict:
    """Plan, warm up, time and check one message size on the ranks of `comm`."""
    cap, skip = bench.counts(size)
    if args.iterations:
        cap = args.iterations
    if args.warmup is not None:
        skip = args.warmup
    started = time.perf_counter()

    def timed_call(n, iter0):
        t0 = time.perf_counter()
        times, wrong = run_kernel(bench, comm, role, bufs, size, n, args, iter0)
        return times, wrong, (time.perf_counter() - t0) / max(n, 1)

    _, wrong, per_first = timed_call(1, 0)
    n_warm = comm.bcast(suite.plan(per_first, args.budget * suite.WARMUP_SHARE, max(skip - 1, 0), 0), root=0)
    per_iter = per_first
    if n_warm:
        _, w, per_iter = timed_call(n_warm, 1)
        wrong += w
    n = comm.bcast(suite.plan(per_iter, args.budget, cap, min(args.min_iterations, cap)), root=0)
    times, w, _ = timed_call(n, 1 + n_warm)
    wrong += w
    if not args.validate:
        wrong += final_check(bench, comm, role, bufs, size)
    wrong = comm.allreduce(wrong)
    if bench.kind == "coll":
        # OSU: each rank's mean time, averaged over ranks (min and max too); per
        # iteration the ranks' mean, so the mean of the samples is OSU's average.
        gathered = comm.gather(times, root=0)
        every = np.array(gathered) if role == 0 else None
    if role != 0:
        return {}
    if bench.name == "latency":
        samples = list(times / 2 * 1e6)  # RTT/2 in us
        value = statistics.fmean(samples)
    elif bench.kind == "p2p":
        moved = size * args.window * (2 if bench.name == "bibw" else 1)
        samples = list(moved / times / 1e6)  # decimal MB/s, as OSU
        value = moved * n / times.sum() / 1e6
    else:
        samples = list(every.mean(axis=0) * 1e6)
        per_rank = every.mean(axis=1) * 1e6
        value = statistics.fmean(samples)
    row = {"size": size, "value": value, "iterations": n, "warmup": 1 + n_warm, "osu_iterations": cap,
           "stats": summary(samples), "wrong": wrong, "seconds": time.perf_counter() - started}
    if bench.kind == "coll":
        row["min_rank_us"], row["max_rank_us"] = float(per_rank.min()), float(per_rank.max())
    return row


def measure_between(world, i: int, j: int, plan: list[tuple[str, int]], args) -> dict | None:
    """Point-to-point benchmarks (name, size) between ranks i and j of `world`.

    Every rank of `world` calls it; the rows ({name: row}) come back on rank i, None
    elsewhere. The ranks not in the pair wait in a barrier that sleeps.
    """
    me = world.Get_rank()
    sub = world.Split(0 if me in (i, j) else MPI.UNDEFINED, 0 if me == i else 1)
    out = None
    if sub != MPI.COMM_NULL:
        role = sub.Get_rank()
        rows = {name: measure_size(suite.BENCHMARKS[name], sub, role, buffers(size), size, args)
                for name, size in plan}
        sub.Free()
        out = rows if role == 0 else None
    runtime.quiet_barrier(world)
    return out


# ---------------------------------------------------------------- output (rank 0)


def header(bench, args, label: str) -> str:
    cols = f"{'# Size':<10}{bench.column:>18}"
    if args.full:
        cols += "".join(f"{c:>12}" for c in ("Min", "P50", "P90", "P99", "Std", "Iterations", "Model", "Ratio"))
    if args.validate:
        cols += f"{'Validation':>12}"
    return f"# geofed {bench.title} v{__version__} (OSU 7.4 definitions): {label}\n{cols}"


def line(bench, row: dict, args, expected: float | None) -> str:
    text = f"{row['size']:<10d}{row['value']:>18.2f}"
    if args.full:
        st = row["stats"]
        text += "".join(f"{st[k]:>12.2f}" for k in ("min", "p50", "p90", "p99", "std")) + f"{row['iterations']:>12d}"
        # Latency against the model by its median: a shared host's outliers move the mean.
        measured = st["p50"] if bench.lower_is_better else row["value"]
        text += f"{expected:>12.2f}{measured / expected:>12.3f}" if expected else f"{'-':>12}{'-':>12}"
    if args.validate:
        text += f"{'Pass' if row['wrong'] == 0 else 'Fail':>12}"
    return text


def model_note(bench, rows: list[dict], pmodel: dict | None, window: int) -> str | None:
    """One comment line: the headline number against the link model, with the ratio."""
    if pmodel is None or not rows or bench.kind != "p2p":
        return None
    m = pmodel
    link = (f"model one-way {m['one_way_us']:.1f} us (propagation {m['propagation_us']:.1f} + local {m['local_us']:.1f})"
            + (f", cap {m['bandwidth_MBps']:.0f} MB/s, BDP {m['bdp_bytes'] / 1e6:.3g} MB" if m["bandwidth_MBps"] else ""))
    if bench.name == "latency":
        r = rows[0]
        return (f"# {link}; {r['size']} B: median {r['stats']['p50']:.2f} us, ratio {r['stats']['p50'] / m['one_way_us']:.3f}"
                f" (mean {r['value']:.2f})")
    if not m["bandwidth_MBps"]:
        return f"# {link}"
    peak = max(rows, key=lambda r: r["value"])
    cap = m["bandwidth_MBps"] * (2 if bench.name == "bibw" else 1)
    return (f"# {link}; peak {peak['value']:.1f} MB/s at {peak['size']} B, {peak['value'] / cap:.3f} of the cap,"
            f" {peak['value'] / model.expected(bench.name, peak['size'], m, window):.3f} of the model at that size")


# ---------------------------------------------------------------- main


def measure(world, benchmarks: list[str], args: suite.Measure) -> dict | None:
    """Every rank measures; rank 0 prints OSU's tables as it goes and returns the bench.mpi
    data, the other ranks None. Data received wrong is counted in the rows (and said)."""
    benches = suite.resolve(benchmarks)
    suite.check_ranks(benches, world.Get_size(), f"this job ({world.Get_size()} rank)")
    sizes = validate.parse_sizes(args.sizes)
    where = runtime.rank_map(world)
    fed = runtime.federation()
    pair = Pair(world)
    me = world.Get_rank()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results = []
    for bench in benches:
        bsizes = suite.sizes_for(bench, sizes)
        if bench.kind == "p2p":
            comm, role, nranks = pair.comm, pair.role, 2
            a, b = where[0], where[1]
            label = f"ranks 0@{a['node']} 1@{b['node']}, {runtime.pair_class(a['node'] or a['host'], b['node'] or b['host'])}"
            pclass = label.rsplit(", ", 1)[1]
            pmodel = model.pair_model(fed, a["site"], b["site"]) if pclass != "intra-node" else None
        else:
            comm, role, nranks = world, me, world.Get_size()
            nodes = [w["node"] or w["host"] for w in where]
            classes = {runtime.pair_class(nodes[0], n) for n in nodes[1:]}
            pclass = next(c for c in ("inter-site", "intra-site", "intra-node") if c in classes)
            label = f"{nranks} ranks on {','.join(dict.fromkeys(nodes))}, {pclass}"
            sites = sorted({w["site"] for w in where if w["site"]})
            pmodel = model.pair_model(fed, sites[0], sites[-1]) if sites and pclass != "intra-node" else None
        rows = []
        if comm != MPI.COMM_NULL:
            window_bytes = args.window if bench.name in ("bw", "bibw") and args.validate else 1
            gather = nranks if bench.name == "gather" else 1
            bufs = buffers(max(bsizes) * max(window_bytes, gather))
            if me == 0:
                print(header(bench, args, label), flush=True)
            for size in bsizes:
                row = measure_size(bench, comm, role, bufs, size, args)
                if me == 0:
                    row["model"] = model.expected(bench.name, size, pmodel, args.window)
                    print(line(bench, row, args, row["model"]), flush=True)
                    rows.append(row)
            if me == 0:
                note = model_note(bench, rows, pmodel, args.window)
                if note:
                    print(note, flush=True)
        runtime.quiet_barrier(world)
        results.append({"benchmark": bench.name, "kind": bench.kind, "unit": bench.unit, "class": pclass,
                        "label": label, "ranks": nranks, "window": args.window if bench.name in ("bw", "bibw") else None,
                        "rotate_root": args.rotate_root if bench.kind == "coll" else None,
                        "model": pmodel, "sizes": rows})
    if me != 0:
        return None
    wrong = sum(r["wrong"] for res in results for r in res["sizes"])
    if wrong:
        print(f"# geofed: validation FAILED: {wrong} bytes or elements received wrong", flush=True)
    return {"placement": runtime.placement(), "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
            "mpi_version": "%d.%d" % MPI.Get_version(), "ranks": where,
            "sites": sorted({w["site"] for w in where if w["site"]}), "hosts": sorted({w["host"] for w in where}),
            "budget_s": args.budget, "validate": args.validate, "started": started,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "results": results}
