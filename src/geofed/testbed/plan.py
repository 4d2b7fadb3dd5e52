"""What a testbed for a federation consists of: names, addresses, routes, emulators, CPU shares.

Pure data computed from the federation, so it can be checked without root. Everything
geofed creates on a host carries the prefix `geofed-<federation>.` (namespaces,
/etc/netns entries) or lives under `geofed/<federation>` (cgroups, /run state), so
`down` can find and remove exactly what is ours, also after a crash.

Topology: every node is a namespace with one interface `eth0` on its site's L2 segment
(a bridge in the site's namespace, which also routes). Sites are joined only through a
link namespace per long-haul link, where `geofed-linkemu` forwards frames between two
interfaces `a` and `b` with delay, rate, queue, jitter and loss, or credits. Addresses come from
198.18.0.0/15, the range set aside for network benchmarking (RFC 2544): nodes at
198.18.<site>.<node>, link ends at 198.19.<link>.1 and .2.
"""

from __future__ import annotations

from dataclasses import dataclass

from geofed.errors import UserError
from geofed.federation import Federation, Link, Node

NETNS_PREFIX = "geofed-"
CGROUP_ROOT = "geofed"
STATE_ROOT = "/run/geofed"
GATEWAY_HOST = 254
CPU_PERIOD_US = 100_000


def prefix(fed_name: str) -> str:
    """Every namespace of this federation's testbed starts with this."""
    return f"{NETNS_PREFIX}{fed_name}."


@dataclass(frozen=True)
class NodePlan:
    node: Node
    netns: str
    address: str  # without prefix length
    gateway: str
    cpu_quota_us: int  # per CPU_PERIOD_US
    egress_gbps: float | None  # local fabric rate, shaped at the node's interface (both ways)
    site_port: str  # the node's bridge port in the site namespace


@dataclass(frozen=True)
class SitePlan:
    code: str
    netns: str
    gateway: str
    routes: tuple[tuple[str, str, str], ...]  # (destination subnet, via, device)


@dataclass(frozen=True)
class LinkPlan:
    link: Link
    netns: str
    a_port: str  # interface in site a's namespace facing the link
    b_port: str
    a_address: str
    b_address: str


@dataclass(frozen=True)
class Plan:
    fed: Federation
    nodes: tuple[NodePlan, ...]
    sites: tuple[SitePlan, ...]
    links: tuple[LinkPlan, ...]

    @property
    def state_dir(self) -> str:
        return f"{STATE_ROOT}/{self.fed.name}"

    @property
    def cgroup(self) -> str:
        return f"{CGROUP_ROOT}/{self.fed.name}"

    def namespaces(self) -> list[str]:
        return [s.netns for s in self.sites] + [l.netns for l in self.links] + [n.netns for n in self.nodes]

    def node(self, name: str) -> NodePlan:
        for n in self.nodes:
            if n.node.name == name:
                return n
        raise KeyError(name)

    def hosts_file(self, node: NodePlan, hostname: str) -> str:
        """/etc/hosts for a node's namespace: node names resolve to testbed addresses.

        The host's own name (all namespaces share it) resolves to the node's address,
        as a real node's name does: MPI's proxies look it up, and without an entry
        each lookup waited 5 s for a DNS server the testbed cannot reach.
        """
        lines = ["127.0.0.1 localhost", f"{node.address} {hostname}"]
        lines += [f"{n.address} {n.node.name}" for n in self.nodes]
        return "\n".join(lines) + "\n"


# No DNS inside a federation: with no nameserver the resolver fails at once.
RESOLV_CONF = "# geofed testbed: no DNS server inside the federation\n"


def site_subnet(index: int) -> str:
    return f"198.18.{index}.0/24"


def make_plan(fed: Federation) -> Plan:
    pre = prefix(fed.name)
    site_index = {s.code: i for i, s in enumerate(fed.sites, start=1)}
    if len(fed.sites) > 250 or len(fed.links) > 250 or any(s.nodes > 250 for s in fed.sites):
        raise UserError(f"{fed.path}: too big for a testbed on one host: it holds at most 250 sites, "
                        f"250 links and 250 nodes per site")

    nodes = []
    for s in fed.sites:
        gw = f"198.18.{site_index[s.code]}.{GATEWAY_HOST}"
        quota = round(s.cores_per_node * s.speed * fed.cpu_per_core * CPU_PERIOD_US)
        for n in s.node_list():
            nodes.append(NodePlan(
                node=n,
                netns=f"{pre}{n.name}",
                address=f"198.18.{site_index[s.code]}.{n.index}",
                gateway=gw,
                cpu_quota_us=max(quota, 1000),
                egress_gbps=s.local.bandwidth_gbps,
                site_port=f"n-{n.name}",
            ))

    links = []
    for k, link in enumerate(fed.links, start=1):
        links.append(LinkPlan(
            link=link,
            netns=f"{pre}link-{link.a}{link.b}",
            a_port=f"to-{link.b}",
            b_port=f"to-{link.a}",
            a_address=f"198.19.{k}.1",
            b_address=f"198.19.{k}.2",
        ))

    sites = []
    for s in fed.sites:
        routes = []
        for d in fed.sites:
            if d.code == s.code:
                continue
            first = fed.route(s.code, d.code)[0]
            lp = next(l for l in links if l.link is first)
            if first.a == s.code:
                via, dev = lp.b_address, lp.a_port
            else:
                via, dev = lp.a_address, lp.b_port
            routes.append((site_subnet(site_index[d.code]), via, dev))
        sites.append(SitePlan(
            code=s.code,
            netns=f"{pre}site-{s.code}",
            gateway=f"198.18.{site_index[s.code]}.{GATEWAY_HOST}",
            routes=tuple(routes),
        ))
    return Plan(fed=fed, nodes=tuple(nodes), sites=tuple(sites), links=tuple(links))
