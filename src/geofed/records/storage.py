"""Record kinds of storage: IOzone's grid (`bench io`) and BT-I/O over MPI-IO (seed 002)."""

from __future__ import annotations

from geofed.records import Sanity, doc, kind


def fmt_size(n: int) -> str:
    """A byte count as IOzone's axes show it: 64K, 4M, 1G."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


@kind("bench.io")
class BenchIo:
    """`geofed bench io`, `geofed demo`: IOzone's file size x record size grid, with IOzone and fio on the same cells."""
    path: str = doc("directory measured")
    filesystem: str = doc("its file system")
    memory_bytes: int = doc("the host's memory")
    sizes: list = doc("file sizes measured")
    records: list = doc("record sizes")
    modes: list = doc("I/O modes (buffered, direct, ...)")
    ops: list = doc("operations, in IOzone's order")
    repeat: int = doc("runs per cell; medians")
    drop_cache: bool = doc("whether the file's pages were dropped before reads")
    fsync_in_write: bool = doc("whether fsync is inside every write's time")
    budget_s: float = doc("time budget; larger sizes skipped beyond it")
    skipped_sizes: list = doc("file sizes skipped by the budget")
    unsupported: dict = doc("mode -> why this file system cannot run it")
    peers: list = doc("peer tools measured on the same cells (iozone, fio)")
    peer_versions: dict = doc("peer -> version")
    elapsed_s: float = doc("time the grid took")
    cells: list = doc("per size, record, mode and op: geofed_mbps, cache_read, <peer>_mbps, ratio_<peer>, "
                      "<peer>_comparable, ...")
    agreement: dict = doc("peer -> cells, median_ratio, within, long_cells, long_median_ratio, long_within, "
                          "self_cells, self_within")
    near: float = doc("how close counts as agreeing (a fraction)")
    long_s: float = doc("cells at least this long are compared on their own")
    verified_bytes: int = doc("bytes read back and checked")


@kind("job.btio")
class JobBtio:
    """What rank 0 of one BT-I/O job (the btio workload, one subtype) sends home: one run."""
    n: int = doc("grid points per dimension")
    steps: int = doc("time steps")
    dumps: int = doc("solution dumps written")
    ranks: int = doc("ranks")
    subtype: str = doc("simple or full MPI-IO")
    file: str = doc("the file written")
    bytes: int = doc("bytes written")
    total_s: float = doc("run time")
    io_s: float = doc("time in I/O (slowest rank)")
    compute_s: float = doc("time computing (slowest rank)")
    io_fraction: float = doc("I/O share of the run")
    mb_per_s: float = doc("I/O rate")
    mflops: float = doc("compute rate")
    wrong_doubles: int = doc("doubles read back wrong")
    file_size_ok: bool = doc("the file has the size it must")
    sites: list = doc("sites of the ranks")
    placement: str | None = doc("placement code")

    def sanity(self) -> Sanity:
        """every double read back as written and the file of the size it must have."""
        ok = self.wrong_doubles == 0 and self.file_size_ok
        return Sanity(ok, "read back intact" if ok else f"{self.wrong_doubles} doubles wrong, size "
                      f"{'ok' if self.file_size_ok else 'WRONG'}")


@kind("bench.btio")
class BenchBtio:
    """`geofed bench btio`, `geofed demo`: BT-I/O simple and full over MPI-IO, the I/O share of the run."""
    cls: str = doc("NPB class", key="class")
    n: int = doc("grid points per dimension")
    steps: int = doc("time steps")
    placement: str = doc("placement code")
    ranks_per_node: int = doc("ranks per node")
    path: str = doc("directory of the files")
    runs: list = doc("per subtype: the job.btio data and class")
    files_identical: bool = doc("the simple and full runs wrote identical files")
    verified: bool = doc("every run read back intact")

    def sanity(self) -> Sanity:
        """every run read back intact and the simple and full files are identical."""
        ok = self.verified and self.files_identical
        return Sanity(ok, "read back intact, simple and full files identical" if ok else
                      ("a run read back wrong data" if not self.verified else "simple and full files differ"))
