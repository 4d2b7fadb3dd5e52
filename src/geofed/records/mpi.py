"""Record kinds of the MPI benchmarks and the typed parameters of their models."""

from __future__ import annotations

from dataclasses import dataclass

from geofed.params import Params, param
from geofed.records import Sanity, doc, kind


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
    MPI, how it ended, and how many messages arrived with wrong data."""
    placement: str | None = doc("placement code the job ran on")
    mpi_library: str = doc("MPI library version line")
    started: str = doc("when the job started (ISO 8601)")
    finished: str = doc("when it finished")
    exit_status: int | None = doc("the job's exit status, set by the caller that ran it", None)

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
    """`python -m geofed.bench.pingpong --out F` under `geofed run`: rank 0's round trips with every other rank."""
    placement: str | None = doc("placement code the job ran on")
    mpi_library: str = doc("MPI library version line")
    message_bytes: int = doc("message size")
    ranks: list = doc("per rank: rank, node, site, host")
    pairs: list = doc("per pair: a, b, class, model_rtt_ms, min_ms, median_ms, p99_ms, iterations")


@kind("bench.mpi")
class BenchMpi(MpiJob):
    """`geofed bench mpi`: OSU-defined micro-benchmarks per message size, beside the link model."""
    mpi_version: str = doc("MPI standard version")
    ranks: list = doc("per rank: rank, node, site, host")
    sites: list = doc("sites the ranks sat at")
    hosts: list = doc("hosts the ranks ran on")
    budget_s: float = doc("time budget per message size")
    validate: bool = doc("whether every message's data was checked")
    results: list = doc("per benchmark: benchmark, kind, unit, class, label, ranks, window, rotate_root, model, "
                        "sizes (per size: size, value, stats, iterations, wrong, model)")

    def wrong_messages(self) -> int:
        return sum(r["wrong"] for res in self.results for r in res["sizes"])


@kind("bench.compare")
class BenchCompare:
    """`geofed bench compare`: geofed's benchmarks against the OSU Micro-Benchmarks (C) on the same ranks."""
    placement: str = doc("placement code")
    ranks_per_node: int = doc("ranks per node")
    repeat: int = doc("alternating runs of each side; medians")
    osu: str = doc("the OSU installation")
    osu_binaries: dict = doc("benchmark -> OSU binary")
    rows: list = doc("per benchmark and size: benchmark, unit, size, osu, geofed, diff, ratio, verdict")
    runs: list = doc("every run: benchmark, repeat, osu, geofed, class")


@kind("bench.matrix")
class BenchMatrix(MpiJob):
    """`geofed bench matrix`: latency and bandwidth between every pair of nodes."""
    nodes: list = doc("node names, in matrix order")
    latency_size: int = doc("latency message size")
    bw_size: int = doc("bandwidth message size")
    window: int = doc("bandwidth window")
    budget_s: float = doc("time budget per pair")
    pairs: list = doc("per pair: a, b, class, latency_us, latency_min_us, bw_MBps, iterations, wrong, model, "
                      "model_latency_us, model_bw_MBps")

    def wrong_messages(self) -> int:
        return sum(p.get("wrong", 0) for p in self.pairs)


@kind("bench.check")
class BenchCheck:
    """`geofed bench check --out`: benchmark results against reference values with tolerances."""
    references: str = doc("the references file")
    rows: list = doc("per reference: system, class, benchmark, size, value, lower, upper, measured, low, high, "
                     "deviation, ok, status")

    @property
    def met(self) -> int:
        return sum(r["ok"] for r in self.rows)
