"""The MDFS analysis: max information gain per variable over all k-tuples and
discretizations, contrast variables, p-values and the relevant variables.

The counting runs in the native kernel (`geofed_mdfs`); this module fixes the
parameters, splits the work into units (one per discretization and first tuple
member) and turns the maxima into p-values as the reference's `run` does.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from geofed.errors import UserError

MAX_DIMENSIONS = 5


@dataclass(frozen=True)
class Params:
    dimensions: int = 2
    divisions: int = 1
    discretizations: int = 1
    seed: int = 0
    range_: float | None = None  # None: the reference's suggested range
    pc_xi: float = 0.25
    n_contrast: int | None = None  # None: max(30, p), or 0 in 1D with one discretization
    level: float = 0.05

    def check(self) -> None:
        if not 1 <= self.dimensions <= MAX_DIMENSIONS:
            raise UserError(f"--dim: must be 1 to {MAX_DIMENSIONS}, got {self.dimensions}")
        if not 1 <= self.divisions <= 15:
            raise UserError(f"--divisions: must be 1 to 15, got {self.divisions}")
        if self.discretizations < 1:
            raise UserError(f"--discretizations: must be at least 1, got {self.discretizations}")
        if not 0 <= self.seed <= 2**31 - 1:
            raise UserError(f"--seed: must be 0 to 2^31-1 (portable seeds of the reference), got {self.seed}")
        if self.range_ is not None and not 0 <= self.range_ <= 1:
            raise UserError(f"--range: must be 0 to 1, got {self.range_}")
        if self.range_ == 0 and self.discretizations > 1:
            raise UserError("--range 0 with more than one discretization: every discretization would be the same")
        if self.pc_xi <= 0:
            raise UserError(f"--pc-xi: must be above 0, got {self.pc_xi}")
        if self.n_contrast is not None and self.n_contrast < 0:
            raise UserError(f"--contrast: must be 0 or more, got {self.n_contrast}")
        if not 0 < self.level < 1:
            raise UserError(f"--level: must be between 0 and 1, got {self.level}")

    @property
    def fit_mode(self) -> str:
        """How p-values come from chi-square ones: raw, lin (/alpha) or exp (fitted power)."""
        if self.dimensions == 1 and self.discretizations == 1:
            return "raw"
        if self.dimensions == 1 and self.discretizations * self.divisions < 12:
            return "lin"
        return "exp"

    def contrast_count(self, p: int) -> int:
        if self.n_contrast is not None:
            return self.n_contrast
        return 0 if self.fit_mode == "raw" else max(30, p)

    def as_dict(self) -> dict:
        return asdict(self)


def suggested_range(n: int, dimensions: int, divisions: int) -> float:
    """The reference's default range: the widest that keeps about 3 objects per cell."""
    xi = (3.0 / n) ** (1.0 / dimensions)
    return max(0.0, min((1.0 - xi * (1 + divisions)) / (1.0 - xi * (1 - divisions)), 1.0))


def resolve_range(params: Params, n: int) -> float:
    if params.range_ is not None:
        return params.range_
    r = suggested_range(n, params.dimensions, params.divisions)
    if r == 0:
        raise UserError(f"{n} objects are too few for {params.dimensions}D with {params.divisions} divisions"
                        " (no room to randomise thresholds); give --range explicitly")
    if r < 0.25:
        raise UserError(f"{n} objects are too few for varied discretizations in {params.dimensions}D"
                        f" (suggested range {r:.3f} < 0.25); give --range explicitly")
    return r


@dataclass
class Prepared:
    """Everything every node needs before counting: same on all nodes."""
    x: np.ndarray
    y: np.ndarray
    contrast: np.ndarray | None
    contrast_sources: np.ndarray
    range_: float
    units: list[tuple[int, int, int, int]]  # (discretization, kind, first variable, tuples)


def fit(params: Params, n: int, p: int, p_values: bool = True) -> tuple[float, int]:
    """The discretisation range and the number of contrast variables for data of `n` objects
    and `p` variables; UserError when `params` cannot analyse such data. `p_values=False`:
    only the max IG is wanted, so any number of contrasts will do."""
    params.check()
    if p < params.dimensions:
        raise UserError(f"{p} variables are fewer than --dim {params.dimensions}")
    r = resolve_range(params, n)
    nc = params.contrast_count(p)
    if p_values and params.fit_mode != "raw" and nc < 4:
        raise UserError(f"--contrast: the p-value fit needs at least 4 contrast variables, got {nc}")
    return r, nc


def prepare(x: np.ndarray, y: np.ndarray, params: Params, p_values: bool = True) -> Prepared:
    import geofed_mdfs

    n, p = x.shape
    r, nc = fit(params, n, p, p_values)
    if nc:
        src, contrast = geofed_mdfs.contrast_variables(np.ascontiguousarray(x), nc, params.seed)
    else:
        src, contrast = np.zeros(0, dtype=np.int64), None
    per_disc = geofed_mdfs.work_units(p, nc, params.dimensions)
    units = [(t, kind, i, w) for t in range(params.discretizations) for kind, i, w in per_disc if w > 0]
    return Prepared(x, y, contrast, src, r, units)


def split(units: list[tuple], weights: list[float]) -> list[list[tuple]]:
    """Contiguous shares of the unit sequence, each in proportion to its weight (a
    node's speed); a unit goes to the share its middle falls in."""
    total = sum(u[3] for u in units)
    bounds = np.cumsum(weights) / sum(weights) * total
    shares: list[list[tuple]] = [[] for _ in weights]
    done = 0
    for u in units:
        mid = done + u[3] / 2
        shares[min(int(np.searchsorted(bounds, mid, side="right")), len(weights) - 1)].append(u)
        done += u[3]
    return shares


class Counter:
    """One node's counting over a share of the units (native kernel, `threads` threads)."""

    def __init__(self, prep: Prepared, params: Params):
        import geofed_mdfs
        self.kernel = geofed_mdfs.Analysis(np.asfortranarray(prep.x), prep.y.astype(np.uint8), prep.contrast,
                                           params.dimensions, params.divisions, params.pc_xi, params.seed,
                                           prep.range_)

    def run(self, units: list[tuple], threads: int, progress: Callable[[float], None] | None = None) -> float:
        """Count `units` (sorted by discretization); returns seconds spent."""
        t0 = time.perf_counter()
        total = sum(u[3] for u in units) or 1
        done = 0
        # Chunks of about 2 % of the work: progress in between, and the GIL is released inside.
        chunk_w = max(total // 50, 1)
        i = 0
        while i < len(units):
            t = units[i][0]
            j, w = i, 0
            while j < len(units) and units[j][0] == t and (w < chunk_w or j == i):
                w += units[j][3]
                j += 1
            self.kernel.run(t, [(u[1], u[2]) for u in units[i:j]], threads)
            done += w
            i = j
            if progress:
                progress(done / total)
        return time.perf_counter() - t0

    def results(self) -> dict:
        ig, t, tuples, contrast = self.kernel.results()
        return {"ig": ig, "t": t, "tuples": tuples, "contrast": contrast}


def merge(parts: list[dict]) -> dict:
    """Per-variable maxima of several nodes' results; on equal IG the earliest
    (discretization, tuple) wins, as in the reference's sequential scan, so the
    result does not depend on how the work was split."""
    out = {k: v.copy() for k, v in parts[0].items()}
    for part in parts[1:]:
        for v in range(len(out["ig"])):
            a = (-out["ig"][v], _order(out["t"][v]), tuple(_order(x) for x in out["tuples"][v]))
            b = (-part["ig"][v], _order(part["t"][v]), tuple(_order(x) for x in part["tuples"][v]))
            if b < a:
                out["ig"][v], out["t"][v], out["tuples"][v] = part["ig"][v], part["t"][v], part["tuples"][v]
        out["contrast"] = np.maximum(out["contrast"], part["contrast"])
    return out


def _order(x: int) -> int:
    return x if x >= 0 else 2**62  # "nothing scored" sorts last


def fit_alpha(chisq_contrast: np.ndarray, exponential: bool, search_points: int = 8) -> float:
    """The exponent (exp) or divisor (lin) that maps the contrast variables' chi-square
    p-values onto a uniform distribution, fitted by weighted least squares on their
    order statistics with a search for how many low-IG contrasts to ignore (the
    reference's `fit_p_value` with its defaults)."""
    nc = len(chisq_contrast)
    if nc < 4:
        raise UserError("p-value fit: needs at least 4 contrast variables")
    min_irr = min(nc // 3, 30)
    max_ign = min(nc - min_irr, nc // 3)
    k = np.arange(1, nc + 1, dtype=float)
    v = np.sort(np.asarray(chisq_contrast, dtype=float))[::-1]
    lvals = np.log(k) if exponential else k
    w = k / (nc - k + 1) if exponential else 1.0 / k / (nc - k + 1)
    cum = {name: np.cumsum(a) for name, a in
           [("w", w), ("v", v), ("wv", w * v), ("wv2", w * v * v), ("wl", w * lvals), ("wl2", w * lvals * lvals),
            ("wlv", w * lvals * v)]}
    tail = np.cumsum((w * v * v)[::-1])[::-1]  # sum of w v^2 from i to the end

    @np.errstate(divide="ignore", invalid="ignore")  # one-point windows give 0/0 where unused
    def window(ix: int) -> tuple[float, float]:
        """(fit residual, alpha) when the ix lowest-IG contrasts (highest p) are ignored."""
        npt = nc - ix
        s = {name: c[ix:] - (c[ix - 1] if ix else 0.0) for name, c in cum.items()}
        kk, ll = k[:npt], lvals[:npt]
        if exponential:
            a = s["v"] / kk
            resid = (s["wv2"] + 2 * a * s["wlv"] - 2 * a * ll * s["wv"] + a * a * s["wl2"]
                     - 2 * a * a * ll * s["wl"] + (a * ll) ** 2 * s["w"])
        else:
            a = (s["wv"] - s["wlv"] / ll) / (s["w"] - 2 * s["wl"] / ll + s["wl2"] / (ll * ll))
            resid = (s["wv2"] - 2 * a * s["wv"] + 2 * a / ll * s["wlv"] + a * a * s["w"]
                     - 2 * a * a / ll * s["wl"] + a * a / (ll * ll) * s["wl2"])
        last = npt - 1
        # the score of the whole window: the residual up to the one-before-last point
        # plus the weighted squares past it, per unit weight
        score = ((resid[last - 1] if last else 0.0) + tail[ix + last]) / s["w"][last]
        return score, a[last]

    lo, hi = 0, max_ign - 1
    best_score, best_n0, alpha = math.inf, -1, 0.0
    while True:
        step = max(1, math.floor((hi - lo) / search_points + 0.5))
        for n0 in range(lo, hi, step):
            score, a = window(n0)
            if score < best_score:
                best_score, best_n0, alpha = score, n0, a
        if best_n0 > -1:
            lo, hi = max(1, best_n0 - step), min(max_ign, best_n0 + step)
        if step <= 1:
            break
    if best_n0 == -1 or min(best_n0 - 1, max_ign) >= max_ign:
        raise UserError("p-value fit: the number of ignored contrast variables hit its bound; try more contrast variables")
    if max(min_irr, nc - best_n0 - 1) <= min_irr:
        raise UserError("p-value fit: too few irrelevant contrast variables; try more contrast variables")
    return float(alpha)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values."""
    order = np.argsort(p, kind="stable")
    n = len(p)
    adj = np.maximum.accumulate(p[order] * np.arange(n, 0, -1))
    out = np.empty(n)
    out[order] = np.minimum(adj, 1.0)
    return out


def chi2_sf(x: np.ndarray, df: int) -> np.ndarray:
    """scipy.stats.chi2.sf, bit for bit, from scipy.special: scipy.stats takes 0.7-1.1 s to
    import here, scipy.special 0.3 s, and a distributed run pays it on rank 0 alone after
    the other ranks are done. chi2.sf computes in float64 (1-D IG is float32) and is 1
    below its support (an IG rounded to -1e-17), where chdtrc is NaN."""
    from scipy.special import chdtrc
    return chdtrc(df, np.maximum(np.asarray(x, dtype=np.float64), 0.0))


def p_values(ig: np.ndarray, contrast_ig: np.ndarray, params: Params) -> dict:
    df = params.divisions * (params.divisions + 1) ** (params.dimensions - 1)
    chisq = chi2_sf(ig * 2 * math.log(2), df)
    alpha = None
    mode = params.fit_mode
    if mode == "raw":
        p = chisq
    else:
        alpha = fit_alpha(chi2_sf(contrast_ig * 2 * math.log(2), df), exponential=mode == "exp")
        # 0.0 - ...: no -0.0 for p-values that underflow
        p = 0.0 - np.expm1(np.log(1.0 - chisq) / alpha) if mode == "exp" else chisq / alpha
    adj = holm(p)
    return {"chi_squared": chisq, "p_value": p, "adjusted_p_value": adj, "alpha": alpha, "fit_mode": mode,
            "relevant": np.nonzero(adj <= params.level)[0]}


def analyse(x: np.ndarray, y: np.ndarray, params: Params, threads: int = 1,
            progress: Callable[[float], None] | None = None) -> dict:
    """The whole analysis on this machine: what `mdfs.run` returns, plus the best tuple
    (and its discretization) of every variable and timings."""
    t0 = time.perf_counter()
    prep = prepare(x, y, params)
    counter = Counter(prep, params)
    t_prep = time.perf_counter() - t0
    t_count = counter.run(prep.units, threads, progress)
    res = counter.results()
    return finish(prep, res, params, {"prepare_s": t_prep, "count_s": t_count})


def finish(prep: Prepared, res: dict, params: Params, timing: dict) -> dict:
    pv = p_values(res["ig"], res["contrast"], params)
    return {"params": params.as_dict(), "range": prep.range_, "n_objects": int(prep.x.shape[0]),
            "n_variables": int(prep.x.shape[1]), "n_contrast": int(len(prep.contrast_sources)),
            "contrast_sources": prep.contrast_sources, "tuples_scored": int(sum(u[3] for u in prep.units)),
            "max_ig": res["ig"], "contrast_max_ig": res["contrast"], "best_discretization": res["t"],
            "best_tuple": res["tuples"], **pv, "timing": timing}


# The arrays of a result and their types: a result that crossed a process boundary as
# JSON (lists) is made arrays again, bit for bit (a float64 round-trips through its repr).
ARRAYS = {"contrast_sources": np.int64, "max_ig": np.float64, "contrast_max_ig": np.float64,
          "best_discretization": np.int64, "best_tuple": np.int64, "chi_squared": np.float64,
          "p_value": np.float64, "adjusted_p_value": np.float64, "relevant": np.int64}


def from_json(result: dict) -> dict:
    """A result as `finish` makes it from its JSON form."""
    return {**result, **{k: np.asarray(result[k], dtype=t) for k, t in ARRAYS.items()}}
