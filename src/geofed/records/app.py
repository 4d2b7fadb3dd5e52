"""Record kinds of a user's own MPI program: its profile at one site and its rehearsal on a link."""

from __future__ import annotations

from geofed.params import Params, param
from geofed.records import Sanity, kind


class AppParams(Params):
    """A user's MPI program, described by its profile (`geofed profile`)."""
    profile: str = param("", "an app.profile record written by `geofed profile`")


# A profile's non-blocking collectives: each is its blocking form (the name without the i)
# with a request, completed by a later wait.
NONBLOCKING = ("ibarrier", "ibcast", "ireduce", "iallreduce", "igather", "iscatter", "iallgather", "ialltoall")


@kind("app.profile")
class AppProfile:
    """`geofed profile`: every MPI call of a user's program at one site, per rank, aggregated by pattern.

    Attributes:
        program: the command that was profiled
        placement: the placement it ran on (one site)
        site: the site it ran at
        ranks_per_node: ranks per node
        total_s: the slowest rank's time from MPI_Init to MPI_Finalize
        ranks: per rank (in rank order): rank, host, node, total_s, compute_s (time between calls, the tail
            included), comm_s (time inside calls), tail_cpu_s (the MPI thread's CPU time after the last call),
            calls, patterns, prefix, iteration, iterations, suffix.
            A pattern is kind (send, isend, recv, irecv, sendrecv, wait, waitall, waitany, waitsome, barrier,
            bcast, reduce, allreduce, scan, gather, scatter, allgather, alltoall, reduce_scatter_block,
            comm_split, comm_dup, comm_create, cart_create; the non-blocking ibarrier, ibcast, ireduce,
            iallreduce, igather, iscatter, iallgather, ialltoall, each completed by a later wait), peer
            (the destination, source or root's MPI_COMM_WORLD rank; -1 none, -2 any source, -3 not
            translated), source (a sendrecv's), bytes (sent; a collective's vector or one rank's block),
            size (a collective's communicator size, a wait's requests), count, inside_s (time inside) with its
            mean_s, sd_s, min_s and max_s per call, gap_s (time before the calls: compute), gap_cpu_s (the
            MPI-calling thread's CPU time in those gaps: the compute without its waits for a core), overlap_s (time a
            non-blocking message had between its post and its wait) over `overlapped` requests, poll_s and
            poll_sq (a wait made by polling, MPI_Test/Testall or MPI_Iprobe: the sum of the intervals between
            its polls and of their squares; 0 for a blocking call), slept (the polled waits that slept between
            polls: an interval longer than a polling loop's turn, 20 us), spin_s (their polls before their
            first sleep), sleeps and sleep_s (their intervals that slept: count and sum). The calls in
            order are `prefix`, then `iteration` `iterations` times, then `suffix` (indexes into patterns)
        untracked_calls: calls beyond the profiler's table of patterns (counted, not described)
    """
    program: list
    placement: str
    site: str
    ranks_per_node: int
    total_s: float
    ranks: list
    untracked_calls: int

    def sanity(self) -> Sanity:
        """every call fitted the profiler's tables."""
        if self.untracked_calls:
            return Sanity(False, f"{self.untracked_calls} calls found no free pattern in the profiler's table")
        return Sanity(True, f"{sum(r['calls'] for r in self.ranks)} calls of {len(self.ranks)} ranks profiled")


@kind("app.rehearsal", version=2, added={"rank_cpu_s": []})
class AppRehearsal:
    """`geofed rehearse`: a profile's communication replayed on a placement of the testbed, beside its prediction.

    Attributes:
        profile: the app.profile record replayed
        program: the profiled command
        placement: the placement it was replayed on
        measured_s: the slowest rank's replay time
        rank_s: every rank's replay time
        rank_cpu_s: every rank's CPU time in its replay, its replaying thread's (a wait made asleep is replayed asleep)
        predicted_s: the app model's time for this placement
        interval_s: the prediction interval, low and high
        parts: the prediction's parts in seconds (compute, local_comm, link_comm, staging)
        error: measured over predicted, less 1
        calls: calls replayed by all ranks
    """
    profile: str
    program: list
    placement: str
    measured_s: float
    rank_s: list
    rank_cpu_s: list
    predicted_s: float
    interval_s: list
    parts: dict
    error: float
    calls: int

    def sanity(self) -> Sanity:
        """every rank replayed its calls to the end."""
        return Sanity(self.calls > 0 and len(self.rank_s) > 0, f"{self.calls} calls replayed")


@kind("bench.apps")
class BenchApps:
    """`geofed bench apps`: programs profiled at one site, predicted by the app model, run and rehearsed across sites.

    Attributes:
        nodes: nodes of every run, one rank each
        repeat: rounds of one profile and one run per placement
        rows: per federation (and its federation_file), program and placement across sites: profiled_at, profiles (every round's app.profile,
            kept), profile (the one of the median total), profile_s (its total: the median of
            profile_runs_s), measured_s (median of measured_runs_s, MPI_Init to MPI_Finalize
            of the slowest rank), predicted_s (median of every round's profile's prediction), interval_s (spanning every
            round's), parts (the median profile's), error (predicted over measured, less 1),
            covered (the interval holds the measured time), rehearsal_s (median of rehearsal_runs_s, each round's
            profile rehearsed after the round's run), rehearsal_error, load (the host's
            1-minute load average during the rounds), crossing_us (the host's one-way crossing cost measured in
            the rounds, the calibration's), forwarding (the link emulator's CPU per message across, us_per_message,
            and per byte, ns_per_byte, on host_cores cores, measured once per federation; the calibration's)
        load: the host's 1-minute load average at the start and end, and its cores
        summary: rows, median_abs_error, max_abs_error, covered (share of rows), rehearsal_max_abs_error
    """
    nodes: int
    repeat: int
    rows: list
    load: dict
    summary: dict

    def sanity(self) -> Sanity:
        """every row was profiled, run, predicted and rehearsed."""
        return Sanity(bool(self.rows) and all(r["measured_s"] > 0 and r["rehearsal_s"] > 0 for r in self.rows),
                      f"{len(self.rows)} rows")
