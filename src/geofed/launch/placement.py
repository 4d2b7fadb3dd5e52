"""Placements: the nodes a job runs on, in rank order (docs/launch.md).

Each site's share is written one of two ways, and one placement may mix them:
- a count, as in seed 000: `G2W3` is the first 2 nodes of site G and the first 3 of W;
  where the job runs decides which those are (inside a Slurm allocation, the ones
  Slurm gave it);
- node numbers in brackets, as Slurm writes host lists: `W[1,3]G[2]` is nodes W1, W3
  and G2, exactly those; `W[2-4]` is W2, W3, W4.

`Placement.code` writes the placement back in the same grammar, so a record's or a
batch script's placement parses again to the same nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from geofed.errors import UserError
from geofed.federation import Federation, Node

GROUP_RE = re.compile(r"([A-Z])(?:(\d+)|\[([^\]]*)\])")
NUMBERS_RE = re.compile(r"(\d+)(?:-(\d+))?")
NODE_NAME_RE = re.compile(r"([A-Z])(\d+)")


@dataclass(frozen=True)
class Group:
    """One site's share of a placement."""
    site: str
    # Node numbers within the site as runs (first, last), in rank order: kept as runs so
    # that a code asking for 10^9 nodes is refused without listing them.
    runs: tuple[tuple[int, int], ...]
    named: bool  # W[1,3]: these nodes; otherwise (W2) the site's first `count` nodes

    @property
    def count(self) -> int:
        return sum(last - first + 1 for first, last in self.runs)

    @property
    def numbers(self) -> list[int]:
        return [i for first, last in self.runs for i in range(first, last + 1)]

    @property
    def code(self) -> str:
        if not self.named:
            return f"{self.site}{self.count}"
        return f"{self.site}[{','.join(str(a) if a == b else f'{a}-{b}' for a, b in self.runs)}]"

    def node_names(self) -> list[str]:
        return [f"{self.site}{i}" for i in self.numbers]


@dataclass(frozen=True)
class Placement:
    groups: tuple[Group, ...]  # in the order written, which is the ranks' order

    @property
    def code(self) -> str:
        return "".join(g.code for g in self.groups)

    @property
    def node_count(self) -> int:
        return sum(g.count for g in self.groups)

    def sites(self) -> list[str]:
        return [g.site for g in self.groups if g.count]

    def node_names(self) -> list[str]:
        """The nodes by name, in rank order: those a count takes are the site's first."""
        return [name for g in self.groups for name in g.node_names()]

    def nodes(self, fed: Federation) -> list[Node]:
        return [fed.node(name) for name in self.node_names()]


def first_nodes(site: str, count: int) -> Group:
    return Group(site, ((1, count),) if count else (), named=False)


def on_nodes(nodes: list[Node]) -> Placement:
    """The placement naming exactly `nodes` (in this order; each site's nodes together)."""
    groups: list[Group] = []
    for n in nodes:
        if groups and groups[-1].site == n.site:
            groups[-1] = Group(n.site, groups[-1].runs + ((n.index, n.index),), named=True)
        else:
            groups.append(Group(n.site, ((n.index, n.index),), named=True))
    if len({g.site for g in groups}) != len(groups):
        raise ValueError(f"nodes {', '.join(n.name for n in nodes)}: a site's nodes must follow each other")
    return Placement(tuple(groups))


def every_node(fed: Federation) -> Placement:
    return Placement(tuple(first_nodes(s.code, s.nodes) for s in fed.sites))


def _runs(code: str, site: str, text: str) -> tuple[tuple[int, int], ...]:
    """`1,3` or `2-4` (within brackets) as runs of node numbers."""
    runs = []
    for item in text.split(","):
        m = NUMBERS_RE.fullmatch(item.strip())
        if not m:
            raise UserError(f"placement {code!r}: {site}[{text}]: expected node numbers like {site}[1,3] or {site}[2-4]")
        first, last = int(m[1]), int(m[2] or m[1])
        if last < first:
            raise UserError(f"placement {code!r}: {site}[{text}]: range {item.strip()} runs backwards")
        runs.append((first, last))
    return tuple(runs)


def _comma_hint(code: str) -> str:
    """For `W1,W3,G2`, which reads as node names: how to write them."""
    names = [NODE_NAME_RE.fullmatch(w.strip()) for w in code.split(",")]
    if not all(names):
        return ""
    by_site: dict[str, list[str]] = {}
    for m in names:
        by_site.setdefault(m[1], []).append(m[2])
    written = "".join(f"{site}[{','.join(numbers)}]" for site, numbers in by_site.items())
    return f"; nodes by name are written per site in brackets: {written}"


def read(code: str) -> Placement:
    """The placement a code writes, without checking it against a federation."""
    if not code or GROUP_RE.sub("", code) != "":
        raise UserError(f"placement {code!r}: expected site letters each followed by a node count (G2W3) or by "
                        f"node numbers in brackets (W[1,3]){_comma_hint(code)}")
    groups = []
    for site, count, numbers in GROUP_RE.findall(code):
        if count:
            groups.append(first_nodes(site, int(count)))
        else:
            groups.append(Group(site, _runs(code, site, numbers), named=True))
    return Placement(tuple(groups))


def _node_ranges(fed: Federation) -> str:
    return ", ".join(f"{s.code}1-{s.code}{s.nodes}" if s.nodes > 1 else f"{s.code}1" for s in fed.sites)


def parse(code: str, fed: Federation) -> Placement:
    """The placement a code writes, every site and node checked against `fed`."""
    p = read(code)
    seen = set()
    known = [s.code for s in fed.sites]
    for g in p.groups:
        if g.site in seen:
            raise UserError(f"placement {code!r}: site {g.site} is named twice")
        seen.add(g.site)
        if g.site not in known:
            raise UserError(
                f"placement {code!r}: unknown site letter {g.site} (federation {fed.name} has {', '.join(known)})")
        have = fed.site(g.site).nodes
        if g.named:
            for first, last in g.runs:
                if first < 1 or last > have:
                    missing = first if first < 1 or first > have else have + 1
                    raise UserError(f"placement {code!r}: no node {g.site}{missing} in federation {fed.name} "
                                    f"(its nodes: {_node_ranges(fed)})")
            numbers = g.numbers
            twice = sorted({i for i in numbers if numbers.count(i) > 1})
            if twice:
                raise UserError(f"placement {code!r}: node {g.site}{twice[0]} is named twice")
        elif g.count > have:
            raise UserError(
                f"placement {code!r}: site {g.site} has {have} node{'s' if have != 1 else ''}, {g.count} asked")
    if p.node_count == 0:
        raise UserError(f"placement {code!r}: asks for no node at all")
    return p
