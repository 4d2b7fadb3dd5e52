"""The discrete obstacle problem and its relaxations.

Find u >= phi with -lap(u) + c u - f >= 0 and (u - phi)(-lap(u) + c u - f) = 0 on
the unit cube (any dimension d here, so the 1-D exact case runs the same code),
u = 0 on the boundary, N interior points per axis, h = 1/(N+1), (2d+1)-point stencil.

The projected Richardson map is F(u) = max(phi, u - delta (A u - f)); it contracts
in the max norm for 0 < delta <= h^2/(2d + c h^2), with factor 1 - delta c when
c > 0, so a fixed-point residual r = max|u - F(u)| certifies max|u - u*| <= r/(1 - rho).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from geofed.errors import UserError


@dataclass
class Problem:
    n: int
    dim: int
    c: float
    f: np.ndarray      # interior values, shape (n,) * dim
    phi: np.ndarray
    delta: float

    @property
    def h(self) -> float:
        return 1.0 / (self.n + 1)

    def rho(self) -> float:
        """Max-norm contraction factor of F (1 when c = 0: no certificate from the residual alone)."""
        return 1.0 - self.delta * self.c

    def error_bound(self, residual: float) -> float:
        rho = self.rho()
        return math.inf if rho >= 1.0 else residual / (1.0 - rho)


def delta_bound(n: int, dim: int, c: float) -> float:
    h = 1.0 / (n + 1)
    return h * h / (2 * dim + c * h * h)


def make(n: int, dim: int, c: float, f, phi, delta: float | None = None) -> Problem:
    if n < 1:
        raise UserError(f"--n: the grid needs at least 1 interior point per axis, got {n}")
    if c < 0:
        raise UserError(f"--c: must be >= 0, got {c:g}")
    bound = delta_bound(n, dim, c)
    if delta is None:
        delta = bound
    if not 0 < delta <= bound * (1 + 1e-12):
        raise UserError(f"--delta: {delta:.6g} is outside (0, {bound:.6g}] = (0, h^2/(2d + c h^2)], "
                        f"where the iteration converges (asynchronously too)")
    x = coordinates(n, dim)
    shape = (n,) * dim
    arr = lambda v: np.broadcast_to(np.asarray(v(*x) if callable(v) else v, dtype=float), shape).copy()
    return Problem(n, dim, c, arr(f), arr(phi), delta)


def coordinates(n: int, dim: int) -> list[np.ndarray]:
    g = np.arange(1, n + 1) / (n + 1)
    return list(np.meshgrid(*([g] * dim), indexing="ij", sparse=True))


def default_3d(n: int, c: float = 10.0, delta: float | None = None) -> Problem:
    """A 3-D obstacle problem with a real contact set: a load pushing the membrane
    down onto a dome-shaped obstacle [ours; the seed does not give its data]."""
    def phi(x, y, z):
        return 0.3 - 2.0 * ((x - 0.5) ** 2 + (y - 0.5) ** 2 + (z - 0.5) ** 2)
    return make(n, 3, c, -20.0, phi, delta)


def exact_1d(x: np.ndarray) -> np.ndarray:
    """The spec's 1-D case: f = 0, phi = 1/2 - 4 (x - 1/2)^2, contact on [a, 1 - a]."""
    a = 1 / (2 * math.sqrt(2))
    phi = 0.5 - 4 * (x - 0.5) ** 2
    slope = 4 - 2 * math.sqrt(2)
    return np.where(x < a, slope * x, np.where(x > 1 - a, slope * (1 - x), phi))


def problem_1d(n: int) -> Problem:
    return make(n, 1, 0.0, 0.0, lambda x: 0.5 - 4 * (x - 0.5) ** 2)


def problem_poisson(n: int, dim: int = 3) -> Problem:
    """phi far below: -lap(u) = f with u = prod sin(pi x_i)."""
    def f(*x):
        return dim * math.pi ** 2 * _sines(x)
    return make(n, dim, 0.0, f, -10.0)


def exact_poisson(n: int, dim: int = 3) -> np.ndarray:
    return _sines(coordinates(n, dim)) * np.ones((n,) * dim)


def _sines(x) -> np.ndarray:
    out = np.ones(())
    for xi in x:  # sparse grids broadcast to the full one
        out = out * np.sin(math.pi * xi)
    return out


class Slab:
    """Rows [lo, hi) along axis 0 of the grid, with one halo plane each side.

    `padded` holds the slab with a zero frame (the boundary condition) and the two
    halo planes at index 0 and -1 along axis 0; `relax` applies F in place.
    """

    def __init__(self, p: Problem, lo: int, hi: int):
        self.p, self.lo, self.hi = p, lo, hi
        shape = (hi - lo + 2,) + (p.n + 2,) * (p.dim - 1)
        self.padded = np.zeros(shape)
        self.inner = (slice(1, -1),) * p.dim
        self.f = p.f[lo:hi]
        self.phi = p.phi[lo:hi]
        self.u[...] = np.maximum(self.phi, 0.0)  # a feasible start: u >= phi, 0 outside

    @property
    def u(self) -> np.ndarray:
        return self.padded[self.inner]

    def face(self, side: int) -> np.ndarray:
        """Our first (side -1) or last (side +1) plane, to send to that neighbour."""
        return self.u[0 if side < 0 else -1]

    def set_halo(self, side: int, plane: np.ndarray) -> None:
        self.padded[(0 if side < 0 else -1,) + self.inner[1:]] = plane

    def image(self, u_padded: np.ndarray | None = None) -> np.ndarray:
        """F applied to the interior of `u_padded` (default: the slab's own)."""
        P = self.padded if u_padded is None else u_padded
        p = self.p
        u = P[self.inner]
        nb = np.zeros_like(u)
        for ax in range(p.dim):
            for shift in (0, 2):
                idx = list(self.inner)
                idx[ax] = slice(shift, P.shape[ax] - 2 + shift)
                nb += P[tuple(idx)]
        h2 = p.h * p.h
        au = (2 * p.dim * u - nb) / h2 + p.c * u
        return np.maximum(self.phi, u - p.delta * (au - self.f))

    def relax(self) -> float:
        """One projected Richardson step; returns max |F(u) - u| (the residual before it)."""
        new = self.image()
        diff = float(np.max(np.abs(new - self.u))) if new.size else 0.0
        self.u[...] = new
        return diff


def split(n: int, peers: int) -> list[tuple[int, int]]:
    if peers < 1:
        raise UserError(f"peers: need at least 1, got {peers}")
    if n < 2 * peers:
        raise UserError(f"--n {n}: too small for {peers} peers (each slab needs at least 2 planes)")
    cuts = [round(k * n / peers) for k in range(peers + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def residual(p: Problem, u: np.ndarray) -> float:
    """max |u - F(u)| of a whole-grid vector."""
    s = Slab(p, 0, p.n)
    s.u[...] = u
    return float(np.max(np.abs(s.image() - u)))


def richardson(p: Problem, tol: float, max_iter: int = 10_000_000) -> tuple[np.ndarray, int, float]:
    """Sequential projected Richardson until the residual is <= tol."""
    s = Slab(p, 0, p.n)
    for k in range(1, max_iter + 1):
        r = s.relax()
        if r <= tol:
            return s.u.copy(), k, r
    raise RuntimeError(f"projected Richardson did not reach {tol:g} in {max_iter} iterations")


def sor(p: Problem, tol: float = 1e-13, omega: float | None = None, max_sweeps: int = 1_000_000) -> np.ndarray:
    """Sequential projected SOR (red-black ordering, vectorised), the reference solution.

    Each colour is updated from the other's newest values:
    u_p <- max(phi_p, (1 - w) u_p + w (h^2 f_p + sum of neighbours) / (2d + c h^2)).
    """
    if omega is None:
        omega = 2 / (1 + math.sin(math.pi * p.h))  # optimal for the Laplacian
    s = Slab(p, 0, p.n)
    P = s.padded
    colour = np.indices(s.u.shape).sum(axis=0) % 2
    h2 = p.h * p.h
    diag = 2 * p.dim + p.c * h2
    for _ in range(max_sweeps):
        change = 0.0
        for col in (0, 1):
            mask = colour == col
            nb = np.zeros_like(s.u)
            for ax in range(p.dim):
                for shift in (0, 2):
                    idx = list(s.inner)
                    idx[ax] = slice(shift, P.shape[ax] - 2 + shift)
                    nb += P[tuple(idx)]
            gs = (h2 * p.f + nb) / diag
            new = np.maximum(p.phi, (1 - omega) * s.u + omega * gs)
            change = max(change, float(np.max(np.abs(new - s.u)[mask])))
            s.u[mask] = new[mask]
        if change <= tol:
            return s.u.copy()
    raise RuntimeError(f"projected SOR did not converge to {tol:g} in {max_sweeps} sweeps")
