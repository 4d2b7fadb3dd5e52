"""Placement advice: every way to put N nodes on the federation's sites, ranked.

The best one-site placement and the best split are compared, and the link factor at
which the advice would flip is computed with the same model (bisection on the
link's bandwidth, then on its round trip), so the user sees how far the answer is
from changing: "keep it in W until the link is 3.1x faster".
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from geofed.errors import UserError
from geofed.launch.placement import parse
from geofed.model import Prediction
from geofed.model import whatif

FLIP_RANGE = (1e-3, 1e3)


@dataclass(frozen=True)
class Option:
    placement: str
    prediction: Prediction

    @property
    def sites(self) -> int:
        return sum(1 for ch in self.placement if ch.isalpha())


def placements(fed, nodes: int, first: str | None = None) -> list[str]:
    """Placement codes with `nodes` nodes in all (every site's share up to its size)."""
    sites = list(fed.sites)
    out = []
    for counts in itertools.product(*[range(s.nodes + 1) for s in sites]):
        if sum(counts) != nodes:
            continue
        groups = [(s.code, c) for s, c in zip(sites, counts) if c]
        if first:  # the site that must hold rank 0 (the pair's first node, the data's reader)
            groups.sort(key=lambda g: g[0] != first)
        out.append("".join(f"{code}{c}" for code, c in groups))
    if not out:
        raise UserError(f"--nodes {nodes}: federation {fed.name} has {sum(s.nodes for s in sites)} nodes in all")
    return out


def rank(model, fed, cal, nodes: int, params) -> list[Option]:
    options = []
    for code in placements(fed, nodes):
        pl = parse(code, fed)
        options.append(Option(code, model.predict(fed, cal, code, pl.nodes(fed), params)))
    return sorted(options, key=lambda o: o.prediction.total_s)


def _gap(model, fed, cal, nodes, params) -> float:
    """Best split's time over best one-site time: < 1 means split."""
    opts = rank(model, fed, cal, nodes, params)
    one = [o for o in opts if o.sites == 1]
    split = [o for o in opts if o.sites > 1]
    if not one or not split:
        return float("nan")
    return split[0].prediction.total_s / one[0].prediction.total_s


def flip_factor(model, fed, cal, nodes: int, params, key: str) -> float | None:
    """The factor on link.`key` at which the best split and the best one-site placement cost the same."""
    def gap(f):
        return _gap(model, whatif.apply(fed, [f"link.{key}={f!r}x"]), cal, nodes, params) - 1.0
    lo, hi = FLIP_RANGE
    g_lo, g_hi = gap(lo), gap(hi)
    if g_lo != g_lo or g_hi != g_hi or (g_lo > 0) == (g_hi > 0):
        return None
    for _ in range(40):  # geometric bisection
        mid = (lo * hi) ** 0.5
        if (gap(mid) > 0) == (g_lo > 0):
            lo = mid
        else:
            hi = mid
    return (lo * hi) ** 0.5


def reason(options: list[Option], bw_flip: float | None, distance_flip: float | None) -> str:
    best = options[0]
    one = next((o for o in options if o.sites == 1), None)
    split = next((o for o in options if o.sites > 1), None)
    if one is None or split is None:
        return f"{best.placement}: the only kind of placement with this many nodes"
    p = split.prediction
    link_share = p.parts["link_comm"] / p.total_s if p.total_s else 0.0
    carried = f"the link carries {p.link_bytes / 1e6:.1f} MB ({link_share:.0%} of the split's time on the link)"
    flips = []
    if bw_flip:
        flips.append(f"link bandwidth x{bw_flip:.3g}")
    if distance_flip:
        flips.append(f"link distance x{distance_flip:.3g}")
    flip = f"; the advice flips at {' or '.join(flips)}" if flips else "; no link change within x1000 flips it"
    if best.sites == 1:
        ratio = split.prediction.total_s / one.prediction.total_s
        return f"keep it in {one.placement}: {carried}, {ratio:.2f}x slower across sites{flip}"
    ratio = one.prediction.total_s / split.prediction.total_s
    return f"split as {split.placement}: {ratio:.2f}x faster than the best one-site placement {one.placement}; {carried}{flip}"
