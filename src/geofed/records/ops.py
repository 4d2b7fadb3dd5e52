"""Record kinds of operations: link monitoring and jobs through Slurm (seed 001)."""

from __future__ import annotations

from geofed.records import doc, kind

# What `geofed monitor` samples per pair, and how its series are labelled.
METRICS = {"latency_us": "latency, median [us]", "bw_MBps": "bandwidth [MB/s]"}


@kind("monitor.series")
class MonitorSeries:
    """`geofed monitor show --out`: each pair's series with its sustained level shifts."""
    db: str = doc("the monitoring store")
    run: int = doc("samples a shift must last")
    k: float = doc("noise standard deviations a shift must exceed")
    rel: float = doc("share of the level a shift must exceed")
    series: list = doc("per pair: federation, a, b, class, t, one list per metric (METRICS), errors, events")


@kind("bench.schedule")
class BenchSchedule:
    """`geofed bench schedule`: one job stream through separate site clusters and one federated cluster."""
    seed: int = doc("the job stream's random seed")
    window_s: float = doc("submission window")
    single_load: float = doc("load of single-node jobs")
    mpi_load: float = doc("load of MPI jobs")
    sites: dict = doc("site -> nodes")
    stream: list = doc("the jobs submitted")
    modes: dict = doc("separate, federated -> mean_wait_s, p90_wait_s, mean_wait_s_<site>, utilisation, "
                      "site_utilisation, makespan_s, spilled, jobs")
