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

from dataclasses import dataclass

from geofed.errors import UserError
from geofed.params import Params, param
from geofed.validate import nonnegative_int, positive_int

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


class Measure(Params):
    """How to measure: the same for `geofed bench mpi`, its workload and the ranks."""
    sizes: str = param(DEFAULT_SIZES, "MIN:MAX in powers of two or a list 1,64,1K")
    budget: float = param(DEFAULT_BUDGET_S, "seconds of timed iterations per size, cutting OSU's counts on slow links")
    min_iterations: int = param(MIN_ITERATIONS, "timed iterations even over budget")
    iterations: int | None = param(None, "instead of OSU's iteration count (still cut by the budget)",
                                   type=positive_int)
    warmup: int | None = param(None, "instead of OSU's warm-up count (still cut by the budget)", type=nonnegative_int)
    window: int = param(WINDOW, "messages per window in bw and bibw")
    rotate_root: bool = param(False, "collectives: the root rotates over the ranks")
    validate: bool = param(False, "check every byte of every message (outside timing)")
    full: bool = param(False, "print min, percentiles, std, iterations, model and ratio too")
