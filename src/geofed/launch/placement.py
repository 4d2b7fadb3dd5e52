"""Placement codes as in seed 000: `G2W3` is 2 nodes at site G and 3 at site W."""

from __future__ import annotations

import re
from dataclasses import dataclass

from geofed.errors import UserError
from geofed.federation import Federation, Node

GROUP_RE = re.compile(r"([A-Z])(\d+)")


@dataclass(frozen=True)
class Placement:
    code: str
    groups: tuple[tuple[str, int], ...]  # (site code, node count) in the order written

    @property
    def node_count(self) -> int:
        return sum(n for _, n in self.groups)

    def sites(self) -> list[str]:
        return [s for s, n in self.groups if n > 0]

    def nodes(self, fed: Federation) -> list[Node]:
        """The first nodes of each site, in the order the code names the sites."""
        return [n for site, count in self.groups for n in fed.site(site).node_list()[:count]]


def parse(code: str, fed: Federation) -> Placement:
    if not code or GROUP_RE.sub("", code) != "":
        raise UserError(
            f"placement {code!r}: expected site letters each followed by a node count, like G2W3")
    groups = tuple((s, int(n)) for s, n in GROUP_RE.findall(code))
    seen = set()
    known = [s.code for s in fed.sites]
    for site, count in groups:
        if site in seen:
            raise UserError(f"placement {code!r}: site {site} is named twice")
        seen.add(site)
        if site not in known:
            raise UserError(
                f"placement {code!r}: unknown site letter {site} (federation {fed.name} has {', '.join(known)})")
        have = fed.site(site).nodes
        if count > have:
            raise UserError(
                f"placement {code!r}: site {site} has {have} node{'s' if have != 1 else ''}, {count} asked")
    p = Placement(code, groups)
    if p.node_count == 0:
        raise UserError(f"placement {code!r}: asks for no node at all")
    return p
