"""Record kinds of operations: link monitoring and jobs through Slurm (seed 001)."""

from __future__ import annotations

from geofed.records import kind

# What `geofed monitor` samples per pair, and how its series are labelled.
METRICS = {"latency_us": "latency, median [us]", "bw_MBps": "bandwidth [MB/s]"}


@kind("monitor.series")
class MonitorSeries:
    """`geofed monitor show --out`: each pair's series with its sustained level shifts.

    Attributes:
        db: the monitoring store
        run: samples a shift must last
        k: noise standard deviations a shift must exceed
        rel: share of the level a shift must exceed
        series: per pair: federation, a, b, class, t, one list per metric (METRICS), errors, events
    """
    db: str
    run: int
    k: float
    rel: float
    series: list


@kind("bench.schedule")
class BenchSchedule:
    """`geofed bench schedule`: one job stream through separate site clusters, Slurm's federation of them and one cluster.

    Attributes:
        seed: the job stream's random seed
        window_s: submission window
        single_load: load of single-node jobs
        mpi_load: load of MPI jobs
        sites: site -> nodes
        stream: the jobs submitted
        modes: separate, slurm-federation, federated -> mean_wait_s, p90_wait_s, mean_wait_s_<site>, utilisation,
            site_utilisation, makespan_s, spilled, jobs
    """
    seed: int
    window_s: float
    single_load: float
    mpi_load: float
    sites: dict
    stream: list
    modes: dict


@kind("ops.submit")
class OpsSubmit:
    """`geofed submit`: a job given to Slurm, where it may run and why.

    Attributes:
        job: Slurm's job id
        asked: the placement asked for
        placement: the placement the job runs (`*N`: N nodes at whichever one site Slurm gives it)
        constraint: the job's --constraint
        comment: the job's --comment: the decision and its reason
        spans: whether the job may span sites
        profile: the app.profile the decision was predicted from ("" without --profile)
        slowdown_percent: predicted slowdown across the link on the asked placement (0 without a profile)
        max_span_slowdown_percent: the federation's threshold ([scheduler] max_span_slowdown_percent)
        predicted_s: predicted run time on the asked placement (0 without a profile)
    """
    job: str
    asked: str
    placement: str
    constraint: str
    comment: str
    spans: bool
    profile: str
    slowdown_percent: float
    max_span_slowdown_percent: float
    predicted_s: float
