"""Record kinds of the MPI benchmarks and the typed parameters of their models."""

from __future__ import annotations

from dataclasses import dataclass

from geofed.params import Params, param
from geofed.records import Sanity, kind


class MpiLatencyParams(Params):
    """OSU latency: the one-way time of a ping-pong message."""
    size: int = param(1, "message size in bytes")


class MpiBandwidthParams(Params):
    """OSU bw: a window of messages, then an acknowledgement."""
    size: int = param(4 << 20, "message size in bytes")
    window: int = param(64, "messages per window")


class MpiAllreduceParams(Params):
    """MPI allreduce of a vector over every rank of the placement."""
    size: int = param(8, "vector size in bytes")


@dataclass(kw_only=True)
class MpiJob:
    """What the record of every checked MPI job holds: where and when it ran, with which
    MPI, how it ended, and how many messages arrived with wrong data.

    Attributes:
        placement: placement code the job ran on
        mpi_library: MPI library version line
        started: when the job started (ISO 8601)
        finished: when it finished
        exit_status: the job's exit status, set by the caller that ran it
    """
    placement: str | None
    mpi_library: str
    started: str
    finished: str
    exit_status: int | None = None

    def wrong_messages(self) -> int:
        raise NotImplementedError

    def sanity(self) -> Sanity:
        """no message arrived with wrong data and the job ended with status 0."""
        if wrong := self.wrong_messages():
            return Sanity(False, f"{wrong} message(s) arrived with wrong data")
        if self.exit_status:
            return Sanity(False, f"the job ended with exit status {self.exit_status}")
        return Sanity(True, "every message's data checked")


@kind("job.pingpong")
class JobPingpong:
    """`python -m geofed.bench.pingpong --out F` under `geofed run`: rank 0's round trips with every other rank.

    Attributes:
        placement: placement code the job ran on
        mpi_library: MPI library version line
        message_bytes: message size
        ranks: per rank: rank, node, site, host
        pairs: per pair: a, b, class, model_rtt_ms, min_ms, median_ms, p99_ms, iterations
    """
    placement: str | None
    mpi_library: str
    message_bytes: int
    ranks: list
    pairs: list


@kind("bench.mpi")
class BenchMpi(MpiJob):
    """`geofed bench mpi`: OSU-defined micro-benchmarks per message size, beside the link model.

    Attributes:
        mpi_version: MPI standard version
        ranks: per rank: rank, node, site, host
        sites: sites the ranks sat at
        hosts: hosts the ranks ran on
        budget_s: time budget per message size
        validate: whether every message's data was checked
        results: per benchmark: benchmark, kind, unit, class, label, ranks, window, rotate_root, model, sizes
            (per size: size, value, stats, iterations, wrong, model)
    """
    mpi_version: str
    ranks: list
    sites: list
    hosts: list
    budget_s: float
    validate: bool
    results: list

    def wrong_messages(self) -> int:
        return sum(r["wrong"] for res in self.results for r in res["sizes"])


@kind("bench.compare")
class BenchCompare:
    """`geofed bench compare`: geofed's benchmarks against the OSU Micro-Benchmarks (C) on the same ranks.

    Attributes:
        placement: placement code
        ranks_per_node: ranks per node
        repeat: alternating runs of each side; medians
        osu: the OSU installation
        osu_binaries: benchmark -> OSU binary
        rows: per benchmark and size: benchmark, unit, size, osu, geofed, diff, ratio, verdict
        runs: every run: benchmark, repeat, osu, geofed, class, osu_runs (since geofed 33: OSU's jobs, their sizes
            and the -i/-x given where geofed's budget cut its counts)
    """
    placement: str
    ranks_per_node: int
    repeat: int
    osu: str
    osu_binaries: dict
    rows: list
    runs: list


@kind("bench.matrix")
class BenchMatrix(MpiJob):
    """`geofed bench matrix`: latency and bandwidth between every pair of nodes.

    Attributes:
        nodes: node names, in matrix order
        latency_size: latency message size
        bw_size: bandwidth message size
        window: bandwidth window
        budget_s: time budget per pair
        pairs: per pair: a, b, class, latency_us, latency_min_us, bw_MBps, iterations, wrong, model,
            model_latency_us, model_bw_MBps
    """
    nodes: list
    latency_size: int
    bw_size: int
    window: int
    budget_s: float
    pairs: list

    def wrong_messages(self) -> int:
        return sum(p.get("wrong", 0) for p in self.pairs)


@kind("bench.check", version=2)
class BenchCheck:
    """`geofed bench check --out`: benchmark results against reference values with tolerances.

    Attributes:
        references: the references file
        rows: per measurement and its closest reference, then per reference no run measured: system,
            scope (a pair class, a link "W-G" or a node pair "W1-G1"), benchmark, size, value, lower, upper,
            run (the record checked), pair (its nodes), link (its two sites, if so), measured, low, high,
            deviation, ok, status
    """
    references: str
    rows: list

    @classmethod
    def upgrade(cls, version: int, data: dict) -> dict:
        """Version 1 kept references per pair class only and checked the newest run per class."""
        rows = [{k: v for k, v in r.items() if k != "class"} | {"scope": r["class"], "run": None, "pair": None,
                                                                "link": None} for r in data["rows"]]
        return data | {"rows": rows}

    @property
    def met(self) -> int:
        return sum(r["ok"] for r in self.rows)
