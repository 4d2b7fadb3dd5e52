"""The registry of MPI micro-benchmarks, their message sizes and iteration planning.

Pure Python (no MPI here), so the CLI can check a request before anything starts
and the tests can check the planning without ranks. The rank side is
`geofed.bench.mpi`.

Iteration counts are OSU 7.x's (osu_util.h): latency 10000 iterations after 100
warm-ups up to 8 KiB and 1000 after 10 above; bw/bibw 100 after 10, 20 after 2;
collectives 1000 after 100, 100 after 10. On a long link these are cut by a time
budget per message size, as IMB does, so a 9 ms or 50 ms link ends in bounded time.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from geofed.errors import UserError
from geofed.validate import nonnegative_int, positive_float, positive_int

LARGE_MESSAGE_SIZE = 8192  # OSU: above this the "large" counts apply
WINDOW = 64  # OSU's window of non-blocking messages for bw and bibw
DEFAULT_SIZES = "1:4M"
DEFAULT_BUDGET_S = 0.5
# Warm-up may take this share of the budget: on a 9 ms link OSU's 100 warm-ups
# alone would take 0.9 s per size.
WARMUP_SHARE = 0.2
MIN_ITERATIONS = 3


@dataclass(frozen=True)
class Benchmark:
    name: str
    kind: str  # "p2p" (ranks 0 and 1) or "coll" (every rank)
    title: str  # OSU's header line, without the "# OSU"
    column: str  # OSU's column header
    unit: str
    iterations: tuple[int, int]  # small, large messages
    warmup: tuple[int, int]
    min_size: int = 1  # reductions work on 4-byte floats

    def counts(self, size: int) -> tuple[int, int]:
        """(iterations, warm-ups) OSU would use at this size."""
        large = size > LARGE_MESSAGE_SIZE
        return self.iterations[large], self.warmup[large]

    @property
    def lower_is_better(self) -> bool:
        return self.unit == "us"


_LAT = ((10000, 1000), (100, 10))
_BW = ((100, 20), (10, 2))
_COLL = ((1000, 100), (100, 10))

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in [
    Benchmark("latency", "p2p", "MPI Latency Test", "Latency (us)", "us", *_LAT),
    Benchmark("bw", "p2p", "MPI Bandwidth Test", "Bandwidth (MB/s)", "MB/s", *_BW),
    Benchmark("bibw", "p2p", "MPI Bi-Directional Bandwidth Test", "Bandwidth (MB/s)", "MB/s", *_BW),
    Benchmark("bcast", "coll", "MPI Broadcast Latency Test", "Avg Latency(us)", "us", *_COLL),
    Benchmark("gather", "coll", "MPI Gather Latency Test", "Avg Latency(us)", "us", *_COLL),
    Benchmark("reduce", "coll", "MPI Reduce Latency Test", "Avg Latency(us)", "us", *_COLL, min_size=4),
    Benchmark("allreduce", "coll", "MPI Allreduce Latency Test", "Avg Latency(us)", "us", *_COLL, min_size=4),
]}
GROUPS = {"p2p": ["latency", "bw", "bibw"], "coll": ["bcast", "gather", "reduce", "allreduce"]}


def resolve(names: list[str]) -> list[Benchmark]:
    """Benchmarks by name; `p2p` and `coll` name their groups."""
    out: list[Benchmark] = []
    for name in names:
        for n in GROUPS.get(name, [name]):
            if n not in BENCHMARKS:
                raise UserError(f"unknown benchmark {name!r} (known: {', '.join([*BENCHMARKS, *GROUPS])})")
            if BENCHMARKS[n] not in out:
                out.append(BENCHMARKS[n])
    if not out:
        raise UserError("no benchmark named (known: " + ", ".join([*BENCHMARKS, *GROUPS]) + ")")
    return out


def check_ranks(benches: list[Benchmark], nranks: int, where: str) -> None:
    if nranks < 2:
        raise UserError(f"{benches[0].name} needs at least 2 ranks; {where} gives {nranks}")


def sizes_for(bench: Benchmark, sizes: list[int]) -> list[int]:
    return [s for s in sizes if s >= bench.min_size]


def plan(per_iteration_s: float, budget_s: float, cap: int, minimum: int) -> int:
    """How many iterations fit in the budget, between `minimum` and `cap` (OSU's count)."""
    if per_iteration_s <= 0:
        return cap
    return max(min(minimum, cap), min(cap, int(budget_s / per_iteration_s)))


def add_measure_options(p: argparse.ArgumentParser) -> None:
    """How to measure: the same options for `geofed bench mpi` and the ranks' program."""
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="MIN:MAX in powers of two or a list 1,64,1K (default 1:4M)")
    p.add_argument("--budget", type=positive_float, default=DEFAULT_BUDGET_S,
                   help="seconds of timed iterations per size, cutting OSU's counts on slow links (default 0.5)")
    p.add_argument("--min-iterations", type=positive_int, default=MIN_ITERATIONS, help="timed iterations even over budget (default 3)")
    p.add_argument("--iterations", type=positive_int, help="instead of OSU's iteration count (still cut by the budget)")
    p.add_argument("--warmup", type=nonnegative_int, help="instead of OSU's warm-up count (still cut by the budget)")
    p.add_argument("--window", type=positive_int, default=WINDOW, help="messages per window in bw and bibw (default 64)")
    p.add_argument("--rotate-root", action="store_true", help="collectives: the root rotates over the ranks")
    p.add_argument("--validate", action="store_true", help="check every byte of every message (outside timing)")
    p.add_argument("--full", action="store_true", help="print min, percentiles, std, iterations, model and ratio too")


def measure_argv(args) -> list[str]:
    """The options of add_measure_options as given, to pass on to the ranks' program."""
    argv = ["--sizes", args.sizes, "--budget", str(args.budget), "--window", str(args.window),
            "--min-iterations", str(args.min_iterations)]
    argv += ["--iterations", str(args.iterations)] if args.iterations else []
    argv += ["--warmup", str(args.warmup)] if args.warmup is not None else []
    argv += [flag for flag, on in (("--validate", args.validate), ("--rotate-root", args.rotate_root),
                                   ("--full", args.full)) if on]
    return argv
