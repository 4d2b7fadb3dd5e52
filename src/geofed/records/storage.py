"""Record kinds of storage: IOzone's grid (`bench io`) and BT-I/O over MPI-IO (seed 002)."""

from __future__ import annotations

from geofed.records import Sanity, json_key, kind


def fmt_size(n: int) -> str:
    """A byte count as IOzone's axes show it: 64K, 4M, 1G."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


@kind("bench.io")
class BenchIo:
    """`geofed bench io`, `geofed demo`: IOzone's file size x record size grid, with IOzone and fio on the same cells.

    Attributes:
        path: directory measured
        filesystem: its file system
        memory_bytes: the host's memory
        sizes: file sizes measured
        records: record sizes
        modes: I/O modes (buffered, direct, ...)
        ops: operations, in IOzone's order
        repeat: runs per cell; medians
        drop_cache: whether the file's pages were dropped before reads
        fsync_in_write: whether fsync is inside every write's time
        budget_s: time budget; larger sizes skipped beyond it
        skipped_sizes: file sizes skipped by the budget
        unsupported: mode -> why this file system cannot run it
        peers: peer tools measured on the same cells (iozone, fio)
        peer_versions: peer -> version
        elapsed_s: time the grid took
        cells: per size, record, mode and op: geofed_mbps, cache_read, <peer>_mbps, ratio_<peer>,
            <peer>_comparable, ...
        agreement: peer -> cells, median_ratio, within, long_cells, long_median_ratio, long_within, self_cells,
            self_within
        near: how close counts as agreeing (a fraction)
        long_s: cells at least this long are compared on their own
        verified_bytes: bytes read back and checked
    """
    path: str
    filesystem: str
    memory_bytes: int
    sizes: list
    records: list
    modes: list
    ops: list
    repeat: int
    drop_cache: bool
    fsync_in_write: bool
    budget_s: float
    skipped_sizes: list
    unsupported: dict
    peers: list
    peer_versions: dict
    elapsed_s: float
    cells: list
    agreement: dict
    near: float
    long_s: float
    verified_bytes: int


@kind("job.btio")
class JobBtio:
    """What rank 0 of one BT-I/O job (the btio workload, one subtype) sends home: one run.

    Attributes:
        n: grid points per dimension
        steps: time steps
        dumps: solution dumps written
        ranks: ranks
        subtype: simple or full MPI-IO
        file: the file written
        bytes: bytes written
        total_s: run time
        io_s: time in I/O (slowest rank)
        compute_s: time computing (slowest rank)
        io_fraction: I/O share of the run
        mb_per_s: I/O rate
        mflops: compute rate
        wrong_doubles: doubles read back wrong
        file_size_ok: the file has the size it must
        sites: sites of the ranks
        placement: placement code
    """
    n: int
    steps: int
    dumps: int
    ranks: int
    subtype: str
    file: str
    bytes: int
    total_s: float
    io_s: float
    compute_s: float
    io_fraction: float
    mb_per_s: float
    mflops: float
    wrong_doubles: int
    file_size_ok: bool
    sites: list
    placement: str | None

    def sanity(self) -> Sanity:
        """every double read back as written and the file of the size it must have."""
        ok = self.wrong_doubles == 0 and self.file_size_ok
        return Sanity(ok, "read back intact" if ok else f"{self.wrong_doubles} doubles wrong, size "
                      f"{'ok' if self.file_size_ok else 'WRONG'}")


@kind("bench.btio")
class BenchBtio:
    """`geofed bench btio`, `geofed demo`: BT-I/O simple and full over MPI-IO, the I/O share of the run.

    Attributes:
        class: NPB class
        n: grid points per dimension
        steps: time steps
        placement: placement code
        ranks_per_node: ranks per node
        path: directory of the files
        runs: per subtype: the job.btio data and class
        files_identical: the simple and full runs wrote identical files
        verified: every run read back intact
    """
    cls: str = json_key("class")
    n: int
    steps: int
    placement: str
    ranks_per_node: int
    path: str
    runs: list
    files_identical: bool
    verified: bool

    def sanity(self) -> Sanity:
        """every run read back intact and the simple and full files are identical."""
        ok = self.verified and self.files_identical
        return Sanity(ok, "read back intact, simple and full files identical" if ok else
                      ("a run read back wrong data" if not self.verified else "simple and full files differ"))


@kind("bench.remote_write")
class BenchRemoteWrite:
    """`geofed bench remote-write`: a sequential write across the link into the storage site's file system, against
    a plain TCP copy of the same bytes between the same nodes, in turn.

    Attributes:
        node: node writing
        server: the storage site's node serving the file system (and receiving the copy)
        filesystem: SITE:NAME written
        path: the node's mount of it
        size: bytes written and copied per round
        record: bytes per write call
        repeat: rounds
        link: rtt_ms, bandwidth_gbps between the node's site and the storage site
        rounds: per round: write_mb_s (fsync inside), copy_mb_s, landed_bytes (the file's size on the server's disk)
        write_mb_s: median write rate, MB/s
        copy_mb_s: median plain TCP copy rate, MB/s
        of_copy: write_mb_s / copy_mb_s
    """
    node: str
    server: str
    filesystem: str
    path: str
    size: int
    record: int
    repeat: int
    link: dict
    rounds: list
    write_mb_s: float
    copy_mb_s: float
    of_copy: float

    def sanity(self) -> Sanity:
        """every round's file reached the server's disk whole."""
        short = [i for i, r in enumerate(self.rounds, 1) if r["landed_bytes"] != self.size]
        return Sanity(not short, "every file landed whole" if not short
                      else f"files short on the server's disk in rounds {', '.join(map(str, short))}")
