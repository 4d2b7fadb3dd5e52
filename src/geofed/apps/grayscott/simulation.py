"""The Gray-Scott simulation as an MPI program: 3-D decomposition, ghost exchange, staging.

    python -m geofed.workloads grayscott-simulation '{"settings": "gs.json", "readers": 2}' result.json

Ranks form a periodic 3-D Cartesian grid (MPI_Dims_create); each holds its block
with one ghost cell per side and swaps faces with its six neighbours before every
step (u and v in one message per direction). Every plotgap-th step the blocks are
gathered on rank 0, the designated writer, which publishes U, V and the step's
plane CRCs through one stream. The PyPI ADIOS2 wheel has no MPI, so one writer per
stream keeps the consumers simple (one stream, global arrays); its cost, the
gather, is measured per step and reported beside the staging time.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from mpi4py import MPI

from geofed import runtime
from geofed.apps.grayscott import model, settings as gs_settings
from geofed.errors import UserError

POLL_S = 0.0002
SPIN_S = 0.00005


def _plane(d: int, i: int) -> tuple:
    idx = [slice(None)] * 3
    idx[d] = i
    return tuple(idx)


def wait_quietly(requests: list) -> None:
    """MPI_Waitall that polls briefly, then sleeps between tests.

    A rank that busy-polls under its node's CPU quota spends the quota waiting and
    is throttled for the rest of the 100 ms period (docs/launch.md): a 10-step
    interval at L = 32 took 850 ms instead of 10 ms. Sleeping costs at most a
    fraction of a millisecond per wait; polling for the first SPIN_S catches the
    neighbours' faces, which mostly arrive within it, without that cost (at L = 64
    on 4 ranks, 6.2 -> 3.9 ms per step).
    """
    deadline = time.perf_counter() + SPIN_S
    while not MPI.Request.Testall(requests):
        if time.perf_counter() > deadline:
            time.sleep(POLL_S)


def exchange(cart, u: np.ndarray, v: np.ndarray) -> None:
    """Fill the face ghost cells of u and v from the six neighbours (periodic).

    All six faces at once, one wait: the 7-point stencil reads face ghosts only, so
    the edge and corner ghosts (which a dimension-by-dimension exchange would also
    fill) are left stale. u and v travel together, one message per direction.
    """
    reqs, recvs = [], []
    for d in range(3):
        left, right = cart.Shift(d, 1)
        n = u.shape[d] - 2
        for side, (send_i, recv_i, dest, source) in enumerate(((n, 0, right, left), (1, n + 1, left, right))):
            sbuf = np.stack([u[_plane(d, send_i)], v[_plane(d, send_i)]])
            rbuf = np.empty_like(sbuf)
            tag = 2 * d + side
            reqs += [cart.Irecv(rbuf, source=source, tag=tag), cart.Isend(sbuf, dest=dest, tag=tag)]
            recvs.append((d, recv_i, rbuf, sbuf))
    wait_quietly(reqs)
    for d, recv_i, rbuf, _ in recvs:
        u[_plane(d, recv_i)] = rbuf[0]
        v[_plane(d, recv_i)] = rbuf[1]


class Gatherer:
    """Assembles the global U and V on rank 0 from every rank's block."""

    def __init__(self, cart, L: int, dims):
        self.cart = cart
        self.blocks = [model.block(L, dims, cart.Get_coords(r)) for r in range(cart.Get_size())]
        counts = [2 * int(np.prod(shape)) for _, shape in self.blocks]
        self.counts, self.displs = counts, [sum(counts[:r]) for r in range(len(counts))]
        root = cart.Get_rank() == 0
        self.flat = np.empty(sum(counts)) if root else None
        self.U = np.empty((L, L, L)) if root else None
        self.V = np.empty((L, L, L)) if root else None

    def gather(self, u: np.ndarray, v: np.ndarray) -> bool:
        """True on rank 0, which then holds the global fields in U and V."""
        mine = np.stack([u[1:-1, 1:-1, 1:-1], v[1:-1, 1:-1, 1:-1]])
        recv = [self.flat, self.counts, self.displs, MPI.DOUBLE] if self.flat is not None else None
        wait_quietly([self.cart.Igatherv(mine, recv, root=0)])
        if self.flat is None:
            return False
        for (start, shape), off in zip(self.blocks, self.displs):
            b = self.flat[off:off + 2 * int(np.prod(shape))].reshape((2, *shape))
            sel = tuple(slice(s, s + n) for s, n in zip(start, shape))
            self.U[sel], self.V[sel] = b[0], b[1]
        return True


def restart(path: str, L: int, start: tuple[int, ...], shape: tuple[int, ...], u: np.ndarray, v: np.ndarray) -> int:
    """Fill the interior of u and v with this rank's block of the checkpoint's last step
    (every plane's CRC checked on the way in); that step's number."""
    from geofed.apps.grayscott.stream import ConnectTimeout, CorruptStep, Reader
    if not os.path.isdir(path):  # a BP5 file is a directory
        raise UserError(f"--restart {path}: not a readable checkpoint (no BP5 file there)")
    try:
        reader = Reader(path, "BP5", ["U", "V"], 10.0, describe="restart")
    except ConnectTimeout as e:
        raise UserError(f"--restart {path}: not a readable checkpoint ({e})") from None
    last = None
    try:
        for last in reader.steps():
            pass
    except CorruptStep as e:
        raise UserError(f"--restart {path}: {e}") from None
    finally:
        reader.close()
    if last is None:
        raise UserError(f"--restart {path}: the checkpoint holds no step")
    if last.arrays["U"].shape != (L,) * 3:
        raise UserError(f"--restart {path}: its fields are {last.arrays['U'].shape}, the settings' L is {L}")
    sel = tuple(slice(a, a + n) for a, n in zip(start, shape))
    u[1:-1, 1:-1, 1:-1] = last.arrays["U"][sel]
    v[1:-1, 1:-1, 1:-1] = last.arrays["V"][sel]
    return last.step


def simulate(comm, p) -> dict | None:
    """The simulation's ranks (the grayscott-simulation rank program; `p` its parameters,
    geofed.workloads.grayscott_parts.SimulationParams): rank 0 returns the per-interval
    rows, with the final U and V when `p.final`."""
    if p.kernel not in model.KERNELS:
        raise UserError(f"kernel {p.kernel!r}: expected one of {', '.join(model.KERNELS)}")
    if p.threads < 1:
        raise UserError(f"threads: must be at least 1, got {p.threads}")
    s = gs_settings.load(p.settings)
    dims = MPI.Compute_dims(comm.Get_size(), 3)
    if s.L < max(dims):
        raise UserError(f"L = {s.L} is too small for a {'x'.join(map(str, dims))} process grid")
    cart = comm.Create_cart(dims, periods=[True] * 3, reorder=False)
    rank = cart.Get_rank()
    where = runtime.rank_map(cart)
    if rank == 0:
        for w in s.warnings():
            print(f"gray-scott: warning: {w}", file=sys.stderr)

    start, shape = model.block(s.L, dims, cart.Get_coords(rank))
    u, v = model.initial(s.L, start, shape)
    first = restart(p.restart, s.L, start, shape, u, v) + 1 if p.restart else 1
    u2, v2 = np.empty_like(u), np.empty_like(v)
    # Noise is reproducible for a given seed and rank count (one stream per rank); a
    # restart draws from a fresh stream, so only noise 0 resumes exactly.
    rng = np.random.default_rng([s.seed, rank] + ([first] if first > 1 else [])) if s.noise > 0 else None
    stepper = model.Stepper(s, shape, rng, p.kernel, p.threads)
    gatherer = Gatherer(cart, s.L, dims) if s.engine != "none" or p.final or p.checkpoint else None

    from geofed.apps.grayscott.stream import Writer
    fields = {"U": (s.L,) * 3, "V": (s.L,) * 3}
    # Rank 0 writes the stream and the checkpoint.
    writer = checkpoint = None
    if s.engine != "none" and rank == 0:
        writer = Writer(p.stream or s.output, s.engine, p.readers, fields, p.connect_timeout,
                        describe="gray-scott simulation")
    if p.checkpoint and rank == 0:
        checkpoint = Writer(p.checkpoint, "BP5", 0, fields, p.connect_timeout, describe="checkpoint")
    runtime.quiet_barrier(cart)

    # One row per output interval (plotgap steps), with staging on or off: `interval_s`
    # is rank 0's wall time for the interval, the simulation's time as a user sees it.
    rows, compute = [], 0.0
    t_start = t_interval = time.perf_counter()
    for step in range(first, s.steps + 1):
        t0 = time.perf_counter()
        exchange(cart, u, v)
        stepper.step(u, v, u2, v2)
        u, u2, v, v2 = u2, u, v2, v
        compute += time.perf_counter() - t0
        if step % s.plotgap != 0:
            continue
        row = {"step": step, "compute_s": compute, "gather_s": 0.0, "stage_s": 0.0, "published": None,
               "bytes": 0, "digest": None}
        if s.engine != "none" or p.checkpoint:
            t1 = time.perf_counter()
            if gatherer.gather(u, v):
                row["gather_s"] = time.perf_counter() - t1
                fields_now = {"U": gatherer.U, "V": gatherer.V}
                if writer is not None:
                    w = writer.write(step, fields_now)
                    row.update(stage_s=w.stage_s, published=w.published, bytes=w.bytes, digest=w.digest)
                if checkpoint is not None:
                    row["checkpoint_digest"] = checkpoint.write(step, fields_now).digest
            # Others sleep while rank 0 stages: busy-polling in the next exchange
            # would take the node's CPU from the writer.
            runtime.quiet_barrier(cart)
        now = time.perf_counter()
        if rank == 0:
            rows.append(dict(row, interval_s=now - t_interval))
        t_interval, compute = now, 0.0
    wall = time.perf_counter() - t_start
    for out in (writer, checkpoint):
        if out is not None:
            out.close()
    final = gatherer.gather(u, v) if p.final else False
    if rank != 0:
        return None
    result = {"part": "simulation", "ranks": cart.Get_size(), "dims": list(dims), "where": where,
              "settings": s.to_json(), "wall_s": wall, "steps_run": s.steps - first + 1, "first_step": first,
              "steps": rows}
    if final:
        result["final"] = {"U": gatherer.U.tolist(), "V": gatherer.V.tolist()}
    return result
