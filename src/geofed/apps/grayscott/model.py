"""The numerics of Gray-Scott on one rank's block, independent of MPI and I/O.

    u_t = Du lap(u) - u v^2 + F (1 - u) + noise
    v_t = Dv lap(v) + u v^2 - (F + k) v

explicit Euler, the 7-point Laplacian divided by 6, periodic boundaries. A block is
held with one ghost cell on every side; `step` reads the ghosts, which the caller
has filled (from neighbours, or from the block itself when a dimension is not split).
"""

from __future__ import annotations

import numpy as np

from geofed.apps.grayscott.settings import Settings

CUBE_HALF = 6  # the initial perturbation is the cube [L/2 - 6, L/2 + 6)^3


def split(n: int, parts: int, index: int) -> tuple[int, int]:
    """(start, length) of part `index` of n cells in `parts`; the first n % parts get one more."""
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, base + (1 if index < extra else 0)


def block(L: int, dims: tuple[int, int, int], coords: tuple[int, int, int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Global start and shape of the block at `coords` of a `dims` process grid."""
    parts = [split(L, d, c) for d, c in zip(dims, coords)]
    return tuple(p[0] for p in parts), tuple(p[1] for p in parts)


def initial(L: int, start: tuple[int, ...], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """u and v of a block, with ghost cells (filled later by the exchange)."""
    u = np.ones(tuple(n + 2 for n in shape))
    v = np.zeros_like(u)
    lo, hi = L // 2 - CUBE_HALF, L // 2 + CUBE_HALF
    inner = []
    for s, n in zip(start, shape):
        a, b = max(lo, s), min(hi, s + n)
        if a >= b:
            return u, v
        inner.append(slice(a - s + 1, b - s + 1))
    u[tuple(inner)] = 0.25
    v[tuple(inner)] = 0.33
    return u, v


KERNELS = ("native", "numpy")


class Stepper:
    """One Euler step on a ghosted block, with its scratch arrays allocated once.

    kernel "native": the Rust kernel (rust/stencil, module geofed_stencil), one pass over
    memory, `threads` threads per rank, the GIL released. kernel "numpy": every update a
    whole-array NumPy operation into preallocated buffers; the reference the native
    kernel equals bit for bit (same operations, same order), and the benchmark's baseline.
    Noise comes from the same generator either way.
    """

    def __init__(self, s: Settings, shape: tuple[int, ...], rng: np.random.Generator | None,
                 kernel: str = "native", threads: int = 1):
        if kernel not in KERNELS:
            raise ValueError(f"kernel {kernel!r}: expected one of {', '.join(KERNELS)}")
        self.s = s
        self.rng = rng
        self.kernel = kernel
        self.threads = threads
        self.lap = np.empty(shape)
        self.uvv = np.empty(shape)
        self.tmp = np.empty(shape)
        self.noise = np.empty(shape) if s.noise > 0 else None

    def draw_noise(self) -> np.ndarray | None:
        """This step's noise, scaled, for the interior (None without noise)."""
        if self.noise is None:
            return None
        self.noise[...] = self.rng.uniform(-1.0, 1.0, self.noise.shape)
        self.noise *= self.s.noise
        return self.noise

    def laplacian(self, f: np.ndarray) -> np.ndarray:
        c = f[1:-1, 1:-1, 1:-1]
        lap, tmp = self.lap, self.tmp
        np.add(f[:-2, 1:-1, 1:-1], f[2:, 1:-1, 1:-1], out=lap)
        lap += f[1:-1, :-2, 1:-1]
        lap += f[1:-1, 2:, 1:-1]
        lap += f[1:-1, 1:-1, :-2]
        lap += f[1:-1, 1:-1, 2:]
        np.multiply(c, 6.0, out=tmp)
        lap -= tmp
        lap /= 6.0
        return lap

    def step(self, u: np.ndarray, v: np.ndarray, u_new: np.ndarray, v_new: np.ndarray) -> None:
        """Interior of u_new, v_new from u, v (whose ghosts are current)."""
        s = self.s
        if self.kernel == "native":
            import geofed_stencil
            geofed_stencil.step(u, v, u_new, v_new, s.Du, s.Dv, s.F, s.k, s.dt, self.draw_noise(), self.threads)
            return
        uc, vc = u[1:-1, 1:-1, 1:-1], v[1:-1, 1:-1, 1:-1]
        un, vn = u_new[1:-1, 1:-1, 1:-1], v_new[1:-1, 1:-1, 1:-1]
        np.multiply(uc, vc, out=self.uvv)
        self.uvv *= vc
        # du = Du lap(u) - u v^2 + F (1 - u) + noise
        lap = self.laplacian(u)
        lap *= s.Du
        lap -= self.uvv
        np.subtract(1.0, uc, out=self.tmp)
        self.tmp *= s.F
        lap += self.tmp
        noise = self.draw_noise()
        if noise is not None:
            lap += noise
        lap *= s.dt
        np.add(uc, lap, out=un)
        # dv = Dv lap(v) + u v^2 - (F + k) v
        lap = self.laplacian(v)
        lap *= s.Dv
        lap += self.uvv
        np.multiply(vc, s.F + s.k, out=self.tmp)
        lap -= self.tmp
        lap *= s.dt
        np.add(vc, lap, out=vn)
