"""`--what-if`: the same federation with a link or a site changed, for the same model.

    link.bandwidth=10x     the link's rate times 10 (or `=40` for 40 Gb/s)
    link.rtt_ms=1          the link's round trip (fibre shortened to match)
    link.fibre_km=2000     the fibre's length (propagation at 200 km/ms)
    link.loss=0.01         the link's frame loss
    W.speed=2x, W.nodes=8  a site's core speed or node count

Every link of the federation changes (`link.KEY`), or one named by its sites
(`link.M-F.bandwidth=10x`, as `federation show` names it); the parts of the one-way
delay that are not fibre (the local fabrics) stay.
"""

from __future__ import annotations

import math
from dataclasses import replace

from geofed.errors import UserError
from geofed.federation import LIGHT_IN_FIBRE_KM_PER_MS

LINK_KEYS = ("bandwidth", "rtt_ms", "fibre_km", "loss")
SITE_KEYS = ("speed", "nodes")


def _value(text: str, old: float, where: str) -> float:
    try:
        value = float(text[:-1]) * old if text.endswith("x") else float(text)
    except ValueError:
        raise UserError(f"--what-if {where}: expected a number or a factor like 10x, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise UserError(f"--what-if {where}: expected a finite number >= 0, got {text!r}")
    return value


def _link(link, key: str, text: str, where: str):
    if key == "bandwidth":
        v = _value(text, link.bandwidth_gbps, where)
        if v <= 0:
            raise UserError(f"--what-if {where}: the bandwidth must be positive")
        return replace(link, bandwidth_gbps=v)
    if key == "loss":
        v = _value(text, link.loss, where)
        if v >= 1:
            raise UserError(f"--what-if {where}: a loss must be below 1")
        return replace(link, loss=v)
    local = link.one_way_ms - link.propagation_ms
    if key == "fibre_km":
        propagation = _value(text, link.fibre_km or link.propagation_ms * LIGHT_IN_FIBRE_KM_PER_MS, where) \
            / LIGHT_IN_FIBRE_KM_PER_MS
    else:
        propagation = _value(text, link.rtt_ms, where) / 2 - local
        if propagation < 0:
            raise UserError(f"--what-if {where}: below the local fabrics' {2 * local:.4f} ms")
    return replace(link, propagation_ms=propagation, one_way_ms=propagation + local,
                   fibre_km=propagation * LIGHT_IN_FIBRE_KM_PER_MS)


def apply(fed, changes: list[str]):
    """The federation with every `KEY=VALUE` of `changes` applied (in memory only)."""
    for change in changes:
        key, sep, text = change.partition("=")
        if not sep:
            raise UserError(f"--what-if {change!r}: expected KEY=VALUE, like link.bandwidth=10x")
        scope, _, attr = key.partition(".")
        name, _, link_attr = attr.rpartition(".")
        if scope == "link" and link_attr in LINK_KEYS:
            if name and name not in [l.name for l in fed.links]:
                raise UserError(f"--what-if {change!r}: federation {fed.name} has no link {name}; its links: "
                                f"{', '.join(l.name for l in fed.links)}")
            fed = replace(fed, links=tuple(_link(l, link_attr, text, change) if name in ("", l.name) else l
                                           for l in fed.links))
        elif attr in SITE_KEYS and scope in [s.code for s in fed.sites]:
            site = fed.site(scope)
            v = _value(text, getattr(site, attr), change)
            if v <= 0 or (attr == "nodes" and v != int(v)):
                raise UserError(f"--what-if {change}: expected a positive {'whole ' if attr == 'nodes' else ''}number")
            new = replace(site, **{attr: int(v) if attr == "nodes" else v})
            fed = replace(fed, sites=tuple(new if s.code == scope else s for s in fed.sites))
        else:
            raise UserError(f"--what-if {change!r}: unknown key {key!r}; known: "
                            f"{', '.join('link.' + k for k in LINK_KEYS)} (or link.A-B.KEY for one link), SITE.speed, SITE.nodes")
    return fed
