"""`geofed bench io`: IOzone's grid on a directory, with IOzone and fio beside it.

For every file size x record size (records no larger than the file), mode (buffered,
O_SYNC, O_DIRECT) and operation (write, rewrite, read, reread, random read, random
write, in IOzone's order) one pass over the file is timed in C (storage.c): pwrite or
pread of every record once, an fsync inside a write's time (IOzone's -e). --repeat
runs each cell that many times, geofed and each peer interleaved so that all see the
same machine; medians.

Page cache. A buffered or O_SYNC read of a file that fits in memory is a read of
memory, not of the storage, once the file's pages are cached. The share of the file's
pages in the cache as each read begins is measured (mincore) and shown; with
--drop-cache (the default) the pages are dropped (posix_fadvise DONTNEED: clean after
the writes' fsync) before the first read, so `read` measures the storage and `reread`
the cache, and the peers are given the same: IOzone's read phase runs after the same
drop, fio's with its own invalidate. O_DIRECT reads always come from the device.

O_DIRECT needs records in multiples of 4 KiB (buffers are 4 KiB aligned). A file
system that refuses it (EINVAL) or accepts it but keeps the data in the page cache
(tmpfs since Linux 6.6) is reported as not supporting it and its direct cells skipped.

Everything is written to a private directory made under --path and removed at the
end, also after an error or Ctrl-C.
"""

from __future__ import annotations

import ctypes
import errno
import os
import statistics
import tempfile
import time
from pathlib import Path

from geofed.bench import storage_peers
from geofed.bench.iolib import drop_cache, lib, resident
from geofed.errors import JobFailed, UserError
from geofed.progress import Bar
from geofed.records.storage import fmt_size

MODES = ("buffered", "sync", "direct")
OPS = ("write", "rewrite", "read", "reread", "randread", "randwrite")  # IOzone's order
WRITES = ("write", "rewrite", "randwrite")
GENERATION = {"write": 1, "rewrite": 2, "randwrite": 3}  # the stamp each write pass leaves
DIRECT_ALIGN = 4096
KIB = 1024
DEFAULT_SIZES = "64K:1G:4"
CACHE_READ = 0.5  # a read that starts with more of the file in the page cache reads memory
# Agreement with a peer is counted within this share, and separately for cells whose
# operation takes at least LONG_S: shorter ones are dominated by process start-up
# effects (a fresh IOzone's first read faults its buffer in) and timer noise.
NEAR, LONG_S = 0.10, 1e-3


def _check(rc: int, what: str, path: Path) -> None:
    if rc < 0:
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}", str(path))


def open_fd(path: Path, mode: str, op: str) -> int:
    """A descriptor opened exactly as a pass of `op` in `mode` opens its file (the caller closes it)."""
    fd = lib().gf_io_open(os.fsencode(path), MODES.index(mode), OPS.index(op))
    _check(fd, "open", path)
    return fd


def one_pass(path: Path, mode: str, op: str, size: int, record: int, generation: int, seed: int = 0
             ) -> tuple[float, int]:
    """(seconds, stamps read back wrong) of one timed pass of `op` over the file."""
    seconds, wrong = ctypes.c_double(), ctypes.c_long()
    rc = lib().gf_io_pass(os.fsencode(path), MODES.index(mode), OPS.index(op), size, record, generation, seed,
                           ctypes.byref(seconds), ctypes.byref(wrong))
    _check(rc, op, path)
    return seconds.value, wrong.value


def verify(path: Path, mode: str, size: int, record: int, generation: int) -> int:
    """Bytes of the file that differ from what the last write pass (`generation`) wrote."""
    wrong = ctypes.c_long()
    _check(lib().gf_io_verify(os.fsencode(path), MODES.index(mode), size, record, generation, ctypes.byref(wrong)),
           "verify", path)
    return wrong.value


# ---------------------------------------------------------------- the grid


def check_grid(sizes: list[int], records: list[int], modes: list[str]) -> None:
    """A grid IOzone and the C loops can run: whole KiB records no larger than the largest
    file, every file a whole number of its records, O_DIRECT records in 4 KiB multiples."""
    odd = [r for r in records if r % KIB]
    if odd:
        raise UserError(f"--records {','.join(map(fmt_size, odd))}: records are whole KiB (IOzone's unit)")
    too_big = [r for r in records if r > max(sizes)]
    if too_big:
        raise UserError(f"--records {','.join(map(fmt_size, too_big))}: larger than the largest file "
                        f"(--sizes up to {fmt_size(max(sizes))})")
    if "direct" in modes:
        unaligned = [r for r in records if r % DIRECT_ALIGN]
        if unaligned:
            raise UserError(f"--records {','.join(map(fmt_size, unaligned))}: O_DIRECT (--modes direct) needs records "
                            f"in multiples of {DIRECT_ALIGN} bytes (4K)")
    ragged = [(s, r) for s in sizes for r in records if r <= s and s % r]
    if ragged:
        s, r = ragged[0]
        raise UserError(f"--sizes {fmt_size(s)} is not a whole number of {fmt_size(r)} records")


def default_records(largest: int) -> str:
    """IOzone's record range, 4K to 16M in powers of 4, up to the largest file."""
    return f"4K:{min(16 << 20, largest)}:4"


def records_for(size: int, records: list[int]) -> list[int]:
    return [r for r in records if r <= size]


class Forecast:
    """Seconds a cell (one size x record x mode: every run of geofed and the peers) will
    take, from the cells measured so far: per record and mode, a + b x size fitted to the
    smaller files (a: what does not grow with the file, such as the peers' process starts
    and fsync latency; b: what does). A record new in a row is taken to cost what the
    largest record measured costs: more than it will, since larger records need fewer calls."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, str], list[tuple[int, float]]] = {}

    def add(self, size: int, record: int, mode: str, seconds: float) -> None:
        self.seen.setdefault((record, mode), []).append((size, seconds))

    def cell(self, size: int, record: int, mode: str) -> float:
        points = self.seen.get((record, mode))
        if not points:
            points = self.seen[(max(r for r, m in self.seen if m == mode), mode)]
        sizes, seconds = [p[0] for p in points], [p[1] for p in points]
        if len(set(sizes)) < 2:
            return seconds[-1] * size / sizes[-1]
        slope, intercept = statistics.linear_regression(sizes, seconds)
        return max(slope * size + intercept, max(seconds))  # never less than a smaller file took

    def row(self, size: int, records: list[int], modes: list[str]) -> float | None:
        """Seconds for every cell of a file size; None before anything was measured."""
        if not self.seen:
            return None
        return sum(self.cell(size, r, m) for r in records_for(size, records) for m in modes)


# ---------------------------------------------------------------- one cell


def geofed_cell(path: Path, size: int, record: int, mode: str, ops: list[str], drop: bool, seed: int) -> dict:
    """One run of a cell's operations on `path`: {op: {"mbps", "resident"}}. The file is
    written first whether or not `write` is asked for; every byte is checked at the end."""
    out: dict[str, dict] = {}
    generation = 0
    for op in OPS:
        if op != "write" and op not in ops:
            continue
        share = None
        if op not in WRITES:
            if op == "read" and drop:
                drop_cache(path)
            share = resident(path)
        generation = GENERATION.get(op, generation)
        seconds, wrong = one_pass(path, mode, op, size, record, generation, seed)
        if wrong:
            raise JobFailed(f"bench io: {op} of a {fmt_size(size)} file in {fmt_size(record)} records ({mode}) read "
                            f"{wrong} records that are not the ones written (offset or generation stamp differs)")
        if op in ops:
            out[op] = {"mbps": size / seconds / 1e6, "resident": share}
    bad = verify(path, mode, size, record, generation)
    if bad:
        raise JobFailed(f"bench io: {bad} bytes of a {fmt_size(size)} file ({mode}, {fmt_size(record)} records) "
                        f"read back differ from what was written")
    path.unlink()
    return out


def direct_support(directory: Path) -> str | None:
    """None when O_DIRECT bypasses the page cache here; otherwise why not, in one phrase."""
    probe = directory / "direct-probe"
    try:
        try:
            one_pass(probe, "direct", "write", 64 * KIB, 64 * KIB, 1)
        except OSError as e:
            if e.errno == errno.EINVAL:
                return "not supported by this file system (O_DIRECT refused: EINVAL)"
            raise
        if resident(probe):
            return ("not supported by this file system (O_DIRECT accepted, but the data stayed in the page cache, "
                    "as on tmpfs)")
        return None
    finally:
        probe.unlink(missing_ok=True)


# ---------------------------------------------------------------- the run


def workdir(path: str | None) -> Path:
    """A private directory under --path (default: the current directory); the caller removes it."""
    base = Path(path or ".")
    if not base.exists():
        raise UserError(f"--path {base}: no such directory")
    if not base.is_dir():
        raise UserError(f"--path {base}: not a directory")
    try:
        return Path(tempfile.mkdtemp(prefix="geofed-io-", dir=base))
    except OSError as e:
        raise UserError(f"--path {base}: cannot write there ({e.strerror})") from None


def check_space(directory: Path, largest: int) -> None:
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    if free < largest:
        raise UserError(f"--path {directory.parent}: {free / 1e6:.0f} MB free, the largest file "
                        f"(--sizes {fmt_size(largest)}) needs {largest / 1e6:.0f} MB")


def filesystem(path: Path) -> str:
    """The type of the file system holding `path` (from /proc/self/mountinfo)."""
    best, kind = "", "?"
    target = str(path.resolve())
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mount = left.split()[4]
            if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                best, kind = mount, right.split()[0]
    return kind


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def run(directory: Path, sizes: list[int], records: list[int], modes: list[str], ops: list[str], repeat: int,
        budget: float, peers: list[str], drop: bool, progress) -> dict:
    """The grid on `directory` (a private directory the caller removes), as a bench.io record's data."""
    t0 = time.perf_counter()
    unsupported = {}
    if "direct" in modes:
        why = direct_support(directory)
        if why:
            unsupported["direct"] = why
            progress(f"bench io: direct: {why}; its cells are skipped")
    active = [m for m in modes if m not in unsupported]
    path = directory / "geofed-io.dat"
    cells, skipped, forecast = [], [], Forecast()
    for i, size in enumerate(sizes):
        row = records_for(size, records)
        elapsed = time.perf_counter() - t0
        guess = forecast.row(size, records, active)
        if guess is not None and elapsed + guess > budget:
            skipped = sizes[i:]
            progress(f"bench io: skipping file sizes {', '.join(map(fmt_size, skipped))}: {fmt_size(size)} alone "
                     f"would take about {guess:.0f} s, {elapsed:.0f} s of the --budget {budget:g} s are spent")
            break
        progress(f"bench io: file size {fmt_size(size)}: {len(row)} records x {len(active)} modes x {repeat} runs"
                 + (f", about {guess:.0f} s" if guess is not None else ""))
        bar, todo = Bar(f"bench io: file size {fmt_size(size)}"), [(r, m) for r in row for m in active]
        for k, (record, mode) in enumerate(todo):
            started = time.perf_counter()
            cells += _cell(path, size, record, mode, ops, repeat, peers, drop)
            forecast.add(size, record, mode, time.perf_counter() - started)
            bar((k + 1) / len(todo))
        bar.close()
    return {
        "path": str(directory.parent.resolve()), "filesystem": filesystem(directory),
        "memory_bytes": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
        "sizes": [s for s in sizes if s not in skipped], "records": records, "modes": modes, "ops": ops,
        "repeat": repeat, "drop_cache": drop, "fsync_in_write": True, "budget_s": budget,
        "skipped_sizes": skipped, "unsupported": unsupported, "peers": peers,
        "peer_versions": {p: storage_peers.version(p) for p in peers},
        "elapsed_s": time.perf_counter() - t0, "cells": cells,
        "agreement": {p: agreement(cells, p) for p in peers}, "near": NEAR, "long_s": LONG_S,
        # every run of every cell reads its whole file back (one row per operation: count one)
        "verified_bytes": sum(c["size"] * repeat for c in cells if c["op"] == ops[0]),
    }


def agreement(cells: list[dict], peer: str) -> dict:
    """How close geofed's medians are to a peer's over the cells that measure the same thing,
    and, as the yardstick, how often the peer's own first two runs of a cell agree as closely."""
    mine = [r for r in cells if r[f"{peer}_comparable"] and r[f"ratio_{peer}"] is not None]
    pairs = [(r[f"ratio_{peer}"], r["size"] / (r["geofed_mbps"] * 1e6)) for r in mine]
    long = [x for x, t in pairs if t >= LONG_S]
    twice = [r[f"{peer}_runs"][:2] for r in mine if len(r[f"{peer}_runs"]) > 1 and None not in r[f"{peer}_runs"][:2]]
    return {"cells": len(pairs), "median_ratio": _median([x for x, _ in pairs]),
            "within": sum(abs(x - 1) <= NEAR for x, _ in pairs),
            "long_cells": len(long), "long_median_ratio": _median(long),
            "long_within": sum(abs(x - 1) <= NEAR for x in long),
            "self_cells": len(twice), "self_within": sum(abs(a / b - 1) <= NEAR for a, b in twice)}


def _cell(path: Path, size: int, record: int, mode: str, ops: list[str], repeat: int, peers: list[str], drop: bool
          ) -> list[dict]:
    """Rows (one per operation) of a cell: medians of `repeat` interleaved runs of geofed and each peer."""
    ours: list[dict] = []
    theirs: dict[str, list[dict]] = {p: [] for p in peers}
    for k in range(repeat):
        ours.append(geofed_cell(path, size, record, mode, ops, drop, seed=k))
        for p in peers:
            theirs[p].append(storage_peers.run(p, path, size, record, mode, ops, drop))
    rows = []
    for op in ops:
        share = _median([r[op]["resident"] for r in ours])
        row = {"size": size, "record": record, "mode": mode, "op": op,
               "geofed_mbps": _median([r[op]["mbps"] for r in ours]),
               "geofed_runs": [r[op]["mbps"] for r in ours], "resident": share,
               "cache_read": mode != "direct" and share is not None and share > CACHE_READ}
        for p in peers:
            row[f"{p}_comparable"] = not (p == "iozone" and iozone_prereads(op, mode, row["cache_read"]))
            row[f"{p}_mbps"] = _median([r.get(op, {}).get("mbps") for r in theirs[p]])
            row[f"{p}_runs"] = [r.get(op, {}).get("mbps") for r in theirs[p]]
            row[f"{p}_resident"] = _median([r.get(op, {}).get("resident") for r in theirs[p]])
            row[f"{p}_coarse"] = any(r.get(op, {}).get("coarse") for r in theirs[p])
            row[f"ratio_{p}"] = row["geofed_mbps"] / row[f"{p}_mbps"] if row[f"{p}_mbps"] else None
        rows.append(row)
    return rows


def iozone_prereads(op: str, mode: str, cache_read: bool) -> bool:
    """Whether IOzone's pass is partly a read of memory where geofed's is not.

    IOzone's read and reread passes each open the file and read its first record
    before the clock starts. Where the file is not in memory as the pass begins (after a drop, or
    on a mount that drops a file's pages at open, as sshfs does), that read starts the
    read-ahead (16 MiB on geofed's mounts: all of a small file) which the timed loop
    then finds in memory, while geofed's pass reads the storage."""
    return op in ("read", "reread") and mode != "direct" and not cache_read


# ---------------------------------------------------------------- output


def _mbps(x: float | None, coarse: bool = False) -> str:
    return "-" if x is None else ("~" if coarse else "") + (f"{x:.0f}" if x >= 100 else f"{x:.3g}")


def cache_label(row: dict) -> str:
    if row["op"] in WRITES:
        return "-"
    share = "" if row["resident"] is None else f" {row['resident']:.0%}"
    return ("cache" if row["cache_read"] else "device") + share


def format_table(data: dict) -> str:
    peers = data["peers"]
    lines = [f"bench io on {data['path']} ({data['filesystem']}): {data['repeat']} runs per cell, medians in MB/s "
             f"(10^6 B/s); fsync inside every write's time; "
             + ("the file's pages dropped before `read`" if data["drop_cache"] else "no page-cache drop")
             + f"; memory {data['memory_bytes'] / 2 ** 30:.1f} GiB"]
    for mode, why in data["unsupported"].items():
        lines.append(f"{mode}: {why}")
    if data["skipped_sizes"]:
        lines.append(f"skipped by --budget {data['budget_s']:g} s: file sizes "
                     + ", ".join(map(fmt_size, data["skipped_sizes"])))
    head = f"{'mode':<8} {'op':<9} {'size':>5} {'record':>6} {'geofed':>8} {'cache':>11}"
    for p in peers:
        head += f" {p:>8} {'ratio':>7}"
    lines.append(head)
    for r in data["cells"]:
        line = (f"{r['mode']:<8} {r['op']:<9} {fmt_size(r['size']):>5} {fmt_size(r['record']):>6} "
                f"{_mbps(r['geofed_mbps']):>8} {cache_label(r):>11}")
        for p in peers:
            ratio = r[f"ratio_{p}"]
            shown = "-" if ratio is None else f"{ratio:.3f}" + ("" if r[f"{p}_comparable"] else "*")
            line += f" {_mbps(r[f'{p}_mbps'], r[f'{p}_coarse']):>8} {shown:>7}"
        lines.append(line)
    lines.append("cache: the share of the file's pages in the page cache as the read began; above "
                 f"{CACHE_READ:.0%} a buffered or sync read is a read of memory ('cache'), not of the storage")
    for p in peers:
        a = data["agreement"][p]
        if a["cells"]:
            lines.append(f"geofed / {p}: median {a['median_ratio']:.3f} over {a['cells']} cells, {a['within']} within "
                         f"{data['near']:.0%}; over the {a['long_cells']} cells of {data['long_s'] * 1e3:g} ms or more: "
                         + (f"median {a['long_median_ratio']:.3f}, {a['long_within']} within {data['near']:.0%}"
                            if a["long_cells"] else "none"))
            if a["self_cells"]:
                lines.append(f"{p} against itself (its first two runs of a cell): {a['self_within']} of "
                             f"{a['self_cells']} cells within {data['near']:.0%}")
    if any(not r[f"{p}_comparable"] for r in data["cells"] for p in peers):
        lines.append("* not counted: IOzone reads the file's first record before its clock starts, so where the file is not "
                     "in memory as its read or reread begins (after a drop; sshfs drops a file's pages at open) "
                     "the read-ahead makes its pass partly a read of memory")
    if "fio" in peers:
        lines.append("~ fio times writes in whole milliseconds: a figure from a run under 10 ms is coarse")
    return "\n".join(lines)
