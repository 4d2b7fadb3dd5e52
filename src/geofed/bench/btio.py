"""BT-I/O: the NAS Parallel Benchmarks' BT access pattern over MPI-IO (seed 002).

Written from NPB 3.4's published description (no NPB code is packaged anywhere this
project can reach): a grid of N^3 points with 5 doubles each, square numbers of ranks,
every rank owning sqrt(ranks) cells on NPB's diagonal multi-partitioning (one cell in
each z-slab, shifted along the diagonal), the whole solution appended to one shared
file every 5 time steps, and read back and checked at the end. Two subtypes:
- simple (NPB's simple_mpiio): independent `Write_at` of each cell's x-rows (5 * nx
  doubles) for every (cell, z, y);
- full (full_mpiio): each cell a 3-D subarray type, the cells joined into one file
  view, one collective `Write_at_all` per dump.
Both write the same bytes: the file of one is the file of the other.

What this does not reproduce: BT's solver. Between dumps every rank runs a compute
phase on a field of its cells' size (a 7-point update of the 5 components, 8 flops
per point and component, NumPy), so that I/O is measured against computation as in
seed 002's figure; its MFlop/s are this kernel's, not BT's. The values written are a
function of (dump, point, component), so the read-back checks every byte exactly.

    geofed bench btio -p W4 --class A --subtype simple,full --path /scratch
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import time
from pathlib import Path

CLASSES = {"S": (12, 60), "W": (24, 200), "A": (64, 200), "B": (102, 200), "C": (162, 200)}  # N, time steps
IO_EVERY = 5
COMPONENTS = 5
FLOPS_PER_POINT = 8 * COMPONENTS


def isqrt_exact(n: int) -> int | None:
    q = math.isqrt(n)
    return q if q * q == n else None


def cells(rank: int, ranks: int, n: int) -> list[tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """NPB's multi-partitioning: (low corner (x, y, z), size (x, y, z)) of each cell of
    `rank`, one per z-slab, the (x, y) position moving along the diagonal."""
    q = isqrt_exact(ranks)
    x, y = rank % q, rank // q
    out = []
    for c in range(q):
        coord = (x, y, c)
        low, size = [], []
        for d in coord:
            base, excess = divmod(n, q)
            size.append(base + 1 if d < excess else base)
            low.append(d * (base + 1) if d < excess else excess * (base + 1) + (d - excess) * base)
        out.append((tuple(low), tuple(size)))
        x, y = (x + 1) % q, (y - 1 + q) % q
    return out


def values(n: int, dump: int, low, size):
    """What a cell holds at a dump, shaped (z, y, x, component) as it lies in the file:
    every double its own number, so a byte in a wrong place is seen."""
    import numpy as np
    z = np.arange(low[2], low[2] + size[2]).reshape(-1, 1, 1, 1)
    y = np.arange(low[1], low[1] + size[1]).reshape(1, -1, 1, 1)
    x = np.arange(low[0], low[0] + size[0]).reshape(1, 1, -1, 1)
    m = np.arange(COMPONENTS).reshape(1, 1, 1, -1)
    return ((((dump * n + z) * n + y) * n + x) * COMPONENTS + m).astype(np.float64)


def dump_bytes(n: int) -> int:
    return n ** 3 * COMPONENTS * 8


def compute_step(field):
    """One 7-point update of every component of a cell (interior points)."""
    inner = field[:, 1:-1, 1:-1, 1:-1]
    inner += 0.1 * (field[:, 2:, 1:-1, 1:-1] + field[:, :-2, 1:-1, 1:-1] + field[:, 1:-1, 2:, 1:-1]
                    + field[:, 1:-1, :-2, 1:-1] + field[:, 1:-1, 1:-1, 2:] + field[:, 1:-1, 1:-1, :-2] - 6 * inner)


def write_simple(fh, n: int, dump: int, mine) -> None:
    row = COMPONENTS * 8
    for (low, size), data in mine:
        for k in range(size[2]):
            for j in range(size[1]):
                off = dump * dump_bytes(n) + (((low[2] + k) * n + low[1] + j) * n + low[0]) * row
                fh.Write_at(off, data[k, j])


def full_view(MPI, n: int, mine):
    """One file type: every cell a subarray of the (z, y, x, component) array, joined."""
    types = [MPI.DOUBLE.Create_subarray([n, n, n, COMPONENTS], [size[2], size[1], size[0], COMPONENTS],
                                        [low[2], low[1], low[0], 0]) for (low, size), _ in mine]
    joined = MPI.Datatype.Create_struct([1] * len(types), [0] * len(types), types).Commit()
    for t in types:
        t.Free()
    return joined


def measure(comm, n: int, steps: int, subtype: str, file: str) -> dict | None:
    """One BT-I/O run of every rank into `file`, read back; rank 0 returns the job.btio data,
    the other ranks None."""
    import numpy as np
    from mpi4py import MPI

    from geofed import runtime
    from geofed.errors import UserError
    rank, ranks = comm.Get_rank(), comm.Get_size()
    if isqrt_exact(ranks) is None:
        raise UserError(f"{ranks} ranks: BT needs a square number")
    mine = [(cell, values(n, 0, *cell)) for cell in cells(rank, ranks, n)]
    fields = [np.ascontiguousarray(np.moveaxis(d, 3, 0)) for _, d in mine]  # the compute phase's own arrays
    dumps = steps // IO_EVERY
    amode = MPI.MODE_CREATE | MPI.MODE_RDWR
    comm.Barrier()
    t0 = time.perf_counter()
    fh = MPI.File.Open(comm, file, amode)
    view = full_view(MPI, n, mine) if subtype == "full" else None
    io_s = compute_s = 0.0
    flops = 0
    for step in range(1, steps + 1):
        c0 = time.perf_counter()
        for f in fields:
            compute_step(f)
            flops += FLOPS_PER_POINT * max(f.shape[1] - 2, 0) * max(f.shape[2] - 2, 0) * max(f.shape[3] - 2, 0)
        compute_s += time.perf_counter() - c0
        if step % IO_EVERY == 0:
            dump = step // IO_EVERY - 1
            now = [(cell, values(n, dump, *cell)) for cell, _ in mine]
            i0 = time.perf_counter()
            if view is None:
                write_simple(fh, n, dump, now)
            else:
                fh.Set_view(dump * dump_bytes(n), MPI.DOUBLE, view)
                fh.Write_at_all(0, np.concatenate([d.ravel() for _, d in now]))
            io_s += time.perf_counter() - i0
    i0 = time.perf_counter()
    fh.Sync()
    fh.Close()
    io_s += time.perf_counter() - i0
    comm.Barrier()
    total_s = time.perf_counter() - t0
    # Read back: every double of every cell of every dump where it belongs.
    wrong = 0
    fh = MPI.File.Open(comm, file, MPI.MODE_RDONLY)
    size_ok = fh.Get_size() == dumps * dump_bytes(n)
    for dump in range(dumps):
        for (low, size), _ in mine:
            want = values(n, dump, low, size)
            got = np.empty_like(want)
            for k in range(size[2]):
                for j in range(size[1]):
                    off = dump * dump_bytes(n) + (((low[2] + k) * n + low[1] + j) * n + low[0]) * COMPONENTS * 8
                    fh.Read_at(off, got[k, j])
            wrong += int(np.count_nonzero(got != want))
    fh.Close()
    if view is not None:
        view.Free()
    stats = comm.gather({"io_s": io_s, "compute_s": compute_s, "flops": flops, "wrong": wrong,
                         "node": runtime.node(), "site": runtime.site()}, root=0)
    if rank != 0:
        return None
    io = max(s["io_s"] for s in stats)
    return {"n": n, "steps": steps, "dumps": dumps, "ranks": ranks, "subtype": subtype, "file": file,
            "bytes": dumps * dump_bytes(n), "total_s": total_s, "io_s": io,
            "compute_s": max(s["compute_s"] for s in stats), "io_fraction": io / total_s,
            "mb_per_s": dumps * dump_bytes(n) / io / 1e6 if io else 0.0,
            "mflops": sum(s["flops"] for s in stats) / total_s / 1e6,
            "wrong_doubles": sum(s["wrong"] for s in stats), "file_size_ok": bool(size_ok),
            "sites": sorted({s["site"] for s in stats if s["site"]}), "placement": runtime.placement()}


# ---------------------------------------------------------------- driver


def check_request(cls: str, ranks: int) -> tuple[int, int]:
    from geofed.errors import UserError
    if cls not in CLASSES:
        raise UserError(f"--class {cls!r}: expected one of {', '.join(CLASSES)}")
    if isqrt_exact(ranks) is None:
        raise UserError(f"{ranks} ranks: BT-I/O needs a square number of ranks (1, 4, 9, 16, ...); "
                        f"change the placement or --ranks-per-node")
    n, steps = CLASSES[cls]
    if isqrt_exact(ranks) > n:
        raise UserError(f"{ranks} ranks: class {cls}'s grid of {n}^3 has fewer than one plane per cell")
    return n, steps


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run(fed, placement, cls: str, subtypes: list[str], directory: Path, *, ranks_per_node: int = 1,
        steps: int | None = None, hostfile: str | None = None, timeout: float | None = None) -> dict:
    """One BT-I/O run per subtype on the placement, writing into `directory`; the files
    are compared, then removed."""
    from geofed import records
    from geofed.errors import UserError
    from geofed.launch import runner
    from geofed.progress import progress
    n, class_steps = check_request(cls, placement.node_count * ranks_per_node)
    steps = steps or class_steps
    directory = Path(directory)
    if not directory.is_dir() or not os.access(directory, os.W_OK):
        raise UserError(f"--path {directory}: not a directory this user can write")
    rows, digests = [], {}
    with tempfile.TemporaryDirectory(prefix="geofed-btio-", dir=directory) as tmp:
        os.chmod(tmp, 0o755)  # ranks run as this user; the directory may be reached through another mount
        for sub in subtypes:
            target = Path(tmp) / f"btio-{cls}-{sub}.dat"
            progress(f"bench btio: class {cls} ({n}^3, {steps} steps), {sub}, {placement.code}")
            data = runner.run_ranks(fed, placement, "btio", {"n": n, "steps": steps, "subtype": sub,
                                                             "file": str(target)},
                                    ranks_per_node=ranks_per_node, hostfile=hostfile, timeout=timeout,
                                    cpu_limit=True, what=f"bench btio {sub}")
            row = records.make("job.btio", data).to_dict()["data"] | {"class": cls}  # its shape checked
            digests[sub] = file_digest(target)
            target.unlink()
            rows.append(row)
    return {"class": cls, "n": n, "steps": steps, "placement": placement.code, "ranks_per_node": ranks_per_node,
            "path": str(directory), "runs": rows, "files_identical": len(set(digests.values())) == 1,
            "verified": all(r["wrong_doubles"] == 0 and r["file_size_ok"] for r in rows)}


def format_table(data: dict) -> str:
    lines = [f"BT-I/O class {data['class']} ({data['n']}^3, {data['steps']} steps) on {data['placement']}, "
             f"file in {data['path']}; simple and full files identical: {data['files_identical']}",
             f"{'subtype':<8} {'ranks':>5} {'MB':>8} {'total s':>8} {'I/O s':>8} {'I/O %':>6} {'MB/s':>8} "
             f"{'MFlop/s':>8} {'checked':>8}"]
    for r in data["runs"]:
        lines.append(f"{r['subtype']:<8} {r['ranks']:>5} {r['bytes'] / 1e6:>8.1f} {r['total_s']:>8.2f} {r['io_s']:>8.2f} "
                     f"{r['io_fraction']:>6.1%} {r['mb_per_s']:>8.1f} {r['mflops']:>8.0f} "
                     f"{'ok' if r['wrong_doubles'] == 0 and r['file_size_ok'] else 'WRONG':>8}")
    return "\n".join(lines)
