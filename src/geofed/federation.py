"""The federation model: sites, nodes, links and storage, loaded from TOML.

This is the one source of truth every other part of geofed reads. The physics of
long-haul links lives here too (seed 000, eq. 1: light travels 200 km per ms in glass).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path

from geofed.errors import UserError

LIGHT_IN_FIBRE_KM_PER_MS = 200.0
# The emulator forwards 64 KiB GSO frames; a queue smaller than a few of them drops
# whole TCP bursts on short links, which a real buffer counted in cells would not.
MIN_QUEUE_BYTES = 256 * 1024
# TCP's payload per byte on an Ethernet wire of MTU 1500: 1448 bytes (1500 less IP, TCP
# and its timestamp option) in every 1514-byte frame. A link's rate is the wire's.
TCP_PAYLOAD_PER_WIRE_BYTE = 1448 / 1514
# The largest frame on the emulated wire (Ethernet, MTU 1500): a credit is held from its
# first bit on the wire, so a credit's round trip also pays one frame's serialisation.
WIRE_FRAME_BYTES = 1514
# How a link meets more traffic than it carries: a router's tail-drop queue, or the
# credit-based flow control of an InfiniBand range extender (lossless: a sender sends
# only into buffer the far end advertised).
FLOWS = ("queue", "credit")
# In front of a credit link's wire, frames wait for credits; the emulator cannot push
# back onto a sender's socket across a veth, so this wait is bounded: room for four
# testbed TCP windows (16 MiB each). Its overflow is a violation, counted by the emulator.
CREDIT_WAIT_BYTES = 64 * 1024 * 1024

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
CODE_RE = re.compile(r"^[A-Z]$")
FS_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
# A site's user directory (seed 001, slides 13-14): group names get the site's prefix,
# user and group ids its offset; ids stay below 2^31 (POSIX id_t as a signed int).
DIRECTORY_KINDS = ("ldap", "ad")
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
ATTRIBUTE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
REALM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(\.[A-Za-z0-9][A-Za-z0-9-]*)+$")
DN_RE = re.compile(r"^[A-Za-z]+=[^,=]+(,[A-Za-z]+=[^,=]+)*$")
LDAP_URI_RE = re.compile(r"^ldaps?://[A-Za-z0-9.-]+(:\d{1,5})?/?$")
SERVER_KEYS = ("uri", "bind_dn", "password_file", "ca_file")
MAX_ID = 2**31 - 1


def fibre_one_way_ms(fibre_km: float) -> float:
    """One-way propagation delay of light through `fibre_km` of fibre."""
    return fibre_km / LIGHT_IN_FIBRE_KM_PER_MS


def bdp_bytes(bandwidth_gbps: float, rtt_ms: float) -> int:
    """Bandwidth-delay product: bytes in flight needed to keep the link full."""
    return int(bandwidth_gbps * 1e9 / 8 * rtt_ms / 1e3)


@dataclass(frozen=True)
class Extender:
    """An InfiniBand range extender whose buffer, lent to the far end as credits, is
    licensed by distance: it keeps `licensed_km` of fibre full at the link's rate."""

    device: str
    licensed_km: float

    def credits_bytes(self, bandwidth_gbps: float) -> int:
        """The licensed buffer: the BDP of `licensed_km` of fibre, there and back, at the rate."""
        return bdp_bytes(bandwidth_gbps, 2 * fibre_one_way_ms(self.licensed_km))


# The seeds' devices, for `extender = "NAME"` on a [[link]] (docs/federation.md).
EXTENDERS = {
    # seed 001, slide 9: "License for 10 km is not sufficient" for MA-HD's 28 km
    "longbow-10km": Extender("Obsidian Longbow", 10.0),
    # seed 001, slide 9: "Obsidian needs a license for 40 km"
    "longbow-40km": Extender("Obsidian Longbow", 40.0),
    # seed 000: "Total buffer capacity allows extending InfiniBand connection up to 15,000 km"
    "ibex-g40": Extender("Vcinity IBEX G40", 15000.0),
}


@dataclass(frozen=True)
class LocalFabric:
    """The network inside one site (InfiniBand or Ethernet switch)."""

    latency_us: float
    bandwidth_gbps: float | None


@dataclass(frozen=True)
class Node:
    site: str
    index: int  # 1-based within its site

    @property
    def name(self) -> str:
        return f"{self.site}{self.index}"


@dataclass(frozen=True)
class SiteDirectory:
    """A site's own user directory, whose activated users the federation merges.

    `kind` "ldap" is an OpenLDAP server with the POSIX schema under `base`; "ad" an
    Active Directory domain `realm` (NetBIOS name `domain`) with RFC 2307 ids. A user
    is activated when its `activation_attribute` holds `activation_value`.
    """

    kind: str
    base: str  # the naming context (for AD: the realm's DC=... form)
    realm: str | None  # AD only
    domain: str | None  # AD only: the NetBIOS domain name
    prefix: str  # put before the site's group names
    offset: int  # added to the site's user and group ids
    id_range: int  # a site's ids must stay below this, so [offset, offset + id_range) is the site's
    activation_attribute: str
    activation_value: str
    # A centre's own server (all four, or none: then `ops directory up` starts the
    # fixture's): its URI, a read-only bind account, the file holding its password,
    # and the CA its certificate is checked against.
    uri: str | None = None
    bind_dn: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None

    def merged_id(self, local_id: int) -> int | None:
        """The federation's id for a home id, or None where it leaves the site's range."""
        if not 0 <= local_id < self.id_range:
            return None
        return self.offset + local_id


@dataclass(frozen=True)
class AdminDirectory:
    """The federation's own directory (seed 001's "Adminserver"): the merged users and groups."""

    base: str
    site: str  # the site whose login node serves it on the testbed


@dataclass(frozen=True)
class FileSystem:
    """A file system of a site: `shared` is one directory every node of the site sees
    (the site's parallel or network file system), otherwise a directory per node
    (node-local scratch). The storage site's shared file systems are exported to the
    other sites, which reach them across the long-haul link (docs/storage.md)."""

    name: str
    shared: bool


DEFAULT_FILESYSTEMS = (FileSystem("scratch", False), FileSystem("data", True))


@dataclass(frozen=True)
class Site:
    name: str
    code: str
    nodes: int
    cores_per_node: int
    speed: float  # relative CPU speed of one core; 1.0 = the reference node
    memory_gb: float
    local: LocalFabric
    directory: SiteDirectory | None = None
    filesystems: tuple[FileSystem, ...] = DEFAULT_FILESYSTEMS

    def filesystem(self, name: str) -> FileSystem:
        for f in self.filesystems:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def login_node(self) -> Node:
        """The node users log in to and the site's services run on: its first."""
        return Node(self.code, 1)

    def node_list(self) -> list[Node]:
        return [Node(self.code, i) for i in range(1, self.nodes + 1)]


@dataclass(frozen=True)
class Way:
    """One direction of a link: what a frame meets on its way from one site to the other."""

    propagation_ms: float  # one-way, fibre only
    one_way_ms: float  # node to node: propagation plus the local fabrics' latency
    bandwidth_gbps: float
    queue_bytes: int
    jitter_us: float
    loss: float
    credits_bytes: int | None  # a credit link's window (None: a router's tail-drop queue)
    credit_rtt_ms: float | None  # the fibre there and back, which a credit travels

    @property
    def ceiling_gbps(self) -> float:
        """What the way carries at most: its rate, and on a credit link no more than its
        credits per credit round trip (held from a frame's first bit to its credit's return)."""
        if self.credits_bytes is None:
            return self.bandwidth_gbps
        loop_s = self.credit_rtt_ms / 1e3 + WIRE_FRAME_BYTES * 8 / (self.bandwidth_gbps * 1e9)
        return min(self.bandwidth_gbps, self.credits_bytes * 8 / loop_s / 1e9)


@dataclass(frozen=True)
class Link(Way):
    """A long-haul link between two sites. It is the way from `a` to `b`, and the way
    back too unless `back` says otherwise (an asymmetric link)."""

    a: str
    b: str
    fibre_km: float | None
    back: Way | None = None  # from b to a, where it differs
    extender: str | None = None  # the EXTENDERS profile its credits come from

    def way(self, src: str) -> Way:
        """The direction that leaves site `src`."""
        if src == self.b and self.back is not None:
            return self.back
        if src not in (self.a, self.b):
            raise KeyError(src)
        return Way(**{f.name: getattr(self, f.name) for f in fields(Way)})

    @property
    def rtt_ms(self) -> float:
        return self.one_way_ms + self.way(self.b).one_way_ms

    @property
    def propagation_rtt_ms(self) -> float:
        """The fibre's share of a round trip, both ways."""
        return self.propagation_ms + self.way(self.b).propagation_ms

    @property
    def bdp_bytes(self) -> int:
        return bdp_bytes(self.bandwidth_gbps, self.rtt_ms)

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    def joins(self, x: str, y: str) -> bool:
        return {self.a, self.b} == {x, y}


@dataclass(frozen=True)
class Hop:
    """One element of a path between two nodes: what it adds to a message's one-way
    latency, and the rate it carries at most (None: it caps nothing)."""

    name: str
    latency_ms: float
    gbps: float | None


@dataclass(frozen=True)
class NetworkPath:
    """The way from a node at site `src` to a node at site `dst`, hop by hop."""

    src: str
    dst: str
    hops: tuple[Hop, ...]
    ways: tuple[Way, ...]  # the links' directions crossed, in order

    @property
    def one_way_ms(self) -> float:
        return sum(h.latency_ms for h in self.hops)

    @property
    def bandwidth_gbps(self) -> float | None:
        """The narrowest hop's rate (a credit link's ceiling counts), None when no hop caps."""
        return None if self.bottleneck is None else self.bottleneck.gbps

    @property
    def links_gbps(self) -> float | None:
        """The narrowest link's ceiling: what every flow crossing the links shares (None: no link)."""
        return min((w.ceiling_gbps for w in self.ways), default=None)

    @property
    def bottleneck(self) -> Hop | None:
        """The hop that sets `bandwidth_gbps` (the first of equals, from the source)."""
        capped = [h for h in self.hops if h.gbps is not None]
        return min(capped, key=lambda h: h.gbps) if capped else None

    @property
    def loss(self) -> float:
        """The probability that a frame is lost somewhere on the way."""
        return 1 - math.prod(1 - w.loss for w in self.ways)


@dataclass(frozen=True)
class Federation:
    name: str
    description: str
    path: Path
    sha256: str
    sites: tuple[Site, ...]
    links: tuple[Link, ...]
    storage: str
    cpu_per_core: float  # host cores that emulate one core of speed 1.0 on the testbed
    scale: dict = field(default_factory=dict)
    directory: AdminDirectory | None = None  # set when at least one site declares a directory
    # [scheduler]: a job spans sites only when its predicted slowdown across the link is below this
    max_span_slowdown: float = 0.10

    def site(self, code: str) -> Site:
        for s in self.sites:
            if s.code == code:
                return s
        raise KeyError(code)

    def nodes(self) -> list[Node]:
        return [n for s in self.sites for n in s.node_list()]

    def node(self, name: str) -> Node:
        for n in self.nodes():
            if n.name == name:
                return n
        raise KeyError(name)

    def route(self, src: str, dst: str) -> list[Link]:
        """Links crossed from site `src` to site `dst`, by least one-way delay."""
        if src == dst:
            return []
        best = {src: 0.0}
        prev: dict[str, tuple[str, Link]] = {}
        todo = [(0.0, src)]
        while todo:
            d, s = heapq.heappop(todo)
            if s == dst:
                break
            if d > best[s]:
                continue
            for link in self.links:
                if s not in (link.a, link.b):
                    continue
                other = link.b if link.a == s else link.a
                nd = d + link.one_way_ms
                if nd < best.get(other, float("inf")):
                    best[other] = nd
                    prev[other] = (s, link)
                    heapq.heappush(todo, (nd, other))
        if dst not in prev:
            raise KeyError(f"no route from {src} to {dst}")
        path = []
        s = dst
        while s != src:
            s, link = prev[s]
            path.append(link)
        return path[::-1]

    def path_between(self, src: str, dst: str) -> NetworkPath:
        """Every hop from a node at site `src` to a node at site `dst`: the source node's
        interface on its site's fabric, each link on the routed path (its direction, at its
        ceiling) and the fabric of every site it passes through, and the destination
        node's interface. Inside a site the two interfaces are the whole path."""
        src_fabric, dst_fabric = self.site(src).local, self.site(dst).local
        # A node reaches its site's switch (or gateway) in half the node-to-node latency.
        hops = [Hop(f"{src} node's interface out", src_fabric.latency_us / 2e3, src_fabric.bandwidth_gbps)]
        ways, here = [], src
        for link in self.route(src, dst):
            if here != src:
                # Traffic in transit is routed by the site's gateway, not sent by a node:
                # it pays the fabric's latency, and no node's interface caps it.
                hops.append(Hop(f"{here} gateway in transit", self.site(here).local.latency_us / 1e3, None))
            way = link.way(here)
            ways.append(way)
            hops.append(Hop(f"link {link.name}", way.propagation_ms, way.ceiling_gbps))
            here = link.b if here == link.a else link.a
        hops.append(Hop(f"{dst} node's interface in", dst_fabric.latency_us / 2e3, dst_fabric.bandwidth_gbps))
        return NetworkPath(src, dst, tuple(hops), tuple(ways))

    def one_way_ms(self, src: str, dst: str) -> float:
        """Modelled one-way latency between nodes at sites `src` and `dst` (their path's)."""
        return self.path_between(src, dst).one_way_ms

    def bandwidth_gbps(self, src: str, dst: str) -> float | None:
        """Modelled bandwidth cap between nodes at sites `src` and `dst` (their path's narrowest hop)."""
        return self.path_between(src, dst).bandwidth_gbps

    def rtt_ms(self, src: str, dst: str) -> float:
        """Modelled round trip between nodes at sites `src` and `dst`: the one RTT of a site pair."""
        return self.one_way_ms(src, dst) + self.one_way_ms(dst, src)

    def bdp_bytes(self, src: str, dst: str) -> int | None:
        """Bytes in flight that keep the path from `src` to `dst` full (None: no bandwidth cap)."""
        gbps = self.bandwidth_gbps(src, dst)
        return None if gbps is None else bdp_bytes(gbps, self.rtt_ms(src, dst))


def credit_summary(link: Link) -> str:
    """A credit link's window and the ceiling it sets (each way where they differ), in one line."""
    source = ""
    if link.extender:
        e = EXTENDERS[link.extender]
        source = f" ({link.extender}: {e.device} licensed for {e.licensed_km:g} km)"

    def window(w: Way) -> str:
        return f"credits {w.credits_bytes / 1e6:.4g} MB, ceiling {w.ceiling_gbps:.4g} of {w.bandwidth_gbps:g} Gb/s"
    ways = ([f"each way {window(link)}"] if link.back is None else
            [f"{link.a}->{link.b} {window(link)}", f"{link.b}->{link.a} {window(link.back)}"])
    return (f"credit flow control{source} over a {link.credit_rtt_ms:.4g} ms fibre round trip: " + "; ".join(ways)
            + "; the queue is where frames wait for credits")


def path_summary(fed: Federation, src: str, dst: str) -> str:
    """The path between nodes at two sites in one line: its hops, latency, narrowest hop and BDP."""
    path = fed.path_between(src, dst)
    gbps = path.bandwidth_gbps
    cap = "not capped" if gbps is None else f"{gbps:.4g} Gb/s at {path.bottleneck.name}"
    bdp = fed.bdp_bytes(src, dst)
    return (f"path {src}->{dst}: {' + '.join(h.name for h in path.hops)}; one-way {path.one_way_ms * 1e3:.1f} us, "
            f"RTT {fed.rtt_ms(src, dst):.4g} ms, {cap}" + ("" if bdp is None else f", BDP {bdp / 1e6:.3g} MB"))


# ---------------------------------------------------------------- loading


def shipped_names() -> list[str]:
    root = resources.files("geofed") / "federations"
    return sorted(p.name.removesuffix(".toml") for p in root.iterdir() if p.name.endswith(".toml"))


def resolve(spec: str | Path) -> Path:
    """A federation file path, or the name of a shipped example (icm-task, ma-hd, ...)."""
    path = Path(spec)
    try:
        if path.is_file():
            return path
    except OSError as e:  # a directory on the way that this user may not enter
        raise UserError(f"{spec}: cannot read federation file: {e.strerror}") from None
    if str(spec) in shipped_names():
        return Path(str(resources.files("geofed") / "federations" / f"{spec}.toml"))
    raise UserError(
        f"{spec}: no such federation file, and no shipped federation of that name "
        f"(shipped: {', '.join(shipped_names())})"
    )


def load(spec: str | Path) -> Federation:
    path = resolve(spec)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read federation file: {e.strerror}") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None
    return _Parser(path, raw).federation(doc)


LINK_CHANGES = ("fibre_km", "rtt_ms", "bandwidth_gbps", "queue_bytes", "jitter_us", "loss")


def derive(fed: Federation, directory: str | Path, name: str, **link_changes) -> Path:
    """Write a copy of `fed`'s file under another name (and with every link changed) into `directory`.

    Testbeds are named after their federation, so a private copy keeps a run from
    touching a shipped federation's testbed. `fibre_km` and `rtt_ms` replace each other;
    a change applies to both ways of an asymmetric link.
    """
    if not NAME_RE.match(name):
        raise UserError(f"federation name {name!r}: expected lowercase letters, digits and '-', at most 32")
    unknown = sorted(set(link_changes) - set(LINK_CHANGES))
    if unknown:
        raise UserError(f"derive: unknown link setting {', '.join(unknown)}; known: {', '.join(LINK_CHANGES)}")
    doc = tomllib.loads(fed.path.read_text(encoding="utf-8"))
    doc["name"] = name
    for site in doc["site"]:  # a centre's server's files stay where the original names them
        for key in ("password_file", "ca_file"):
            if key in site.get("directory", {}):
                site["directory"][key] = str(getattr(fed.site(site["code"]).directory, key))
    for link in doc.get("link", []):
        for key in ("fibre_km", "rtt_ms"):
            if key in link_changes:
                link.pop("rtt_ms" if key == "fibre_km" else "fibre_km", None)
        link.update(link_changes)
        # A change sets both ways: the way back inherits what it no longer overrides.
        for key in link_changes:
            link.get("back", {}).pop("fibre_km" if key == "rtt_ms" else key, None)
    path = Path(directory) / f"{name}.toml"
    path.write_text(to_toml(doc))
    load(path)  # the copy must be as valid as its original
    return path


def to_toml(doc: dict, prefix: str = "") -> str:
    """TOML text of a parsed federation document (scalars, lists, tables, arrays of tables)."""
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        return repr(v)
    scalars = [f"{k} = {value(v)}" for k, v in doc.items()
               if not isinstance(v, dict) and not (isinstance(v, list) and v and isinstance(v[0], dict))]
    out = ["\n".join(scalars)] if scalars else []
    for k, v in doc.items():
        if isinstance(v, dict):
            out.append(f"[{prefix}{k}]\n" + to_toml(v, f"{prefix}{k}.").strip())
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out += [f"[[{prefix}{k}]]\n" + to_toml(item, f"{prefix}{k}.").strip() for item in v]
    return "\n\n".join(x for x in out if x) + "\n"


class _Parser:
    def __init__(self, path: Path, raw: bytes):
        self.path = path
        self.raw = raw

    def fail(self, key: str, msg: str) -> UserError:
        return UserError(f"{self.path}: {key}: {msg}")

    def keys(self, table: dict, where: str, allowed: set[str]) -> None:
        for k in table:
            if k not in allowed:
                prefix = f"{where}." if where else ""
                raise self.fail(f"{prefix}{k}", f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def lookup(self, table: dict, key: str, where: str, default):
        """(the key's full name, its value or the default, whether the file gave it)."""
        full = f"{where}.{key}" if where else key
        if key in table:
            return full, table[key], True
        if default is None:
            raise self.fail(full, "missing")
        return full, default, False

    def number(self, table: dict, key: str, where: str, *, default=None, minimum=None,
               positive=False, below=None, integer=False):
        full, v, given = self.lookup(table, key, where, default)
        if not given:
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
            raise self.fail(full, f"must be {'an integer' if integer else 'a number'}, got {v!r}")
        if not math.isfinite(v):
            raise self.fail(full, f"must be a finite number, got {v}")
        if positive and v <= 0:
            raise self.fail(full, f"must be positive, got {v}")
        if minimum is not None and v < minimum:
            raise self.fail(full, f"must be at least {minimum}, got {v}")
        if below is not None and v >= below:
            raise self.fail(full, f"must be below {below}, got {v}")
        return v

    def string(self, table: dict, key: str, where: str, *, default=None) -> str:
        full, v, given = self.lookup(table, key, where, default)
        if given and not isinstance(v, str):
            raise self.fail(full, f"must be a string, got {v!r}")
        return v

    def local(self, table: dict, where: str, default: LocalFabric | None) -> LocalFabric:
        self.keys(table, where, {"latency_us", "bandwidth_gbps"})
        lat_default = default.latency_us if default else None
        latency = self.number(table, "latency_us", where, default=lat_default, minimum=0)
        bw = table.get("bandwidth_gbps", default.bandwidth_gbps if default else None)
        if bw is not None:
            bw = self.number({"bandwidth_gbps": bw}, "bandwidth_gbps", where, positive=True)
        return LocalFabric(float(latency), None if bw is None else float(bw))

    def federation(self, doc: dict) -> Federation:
        self.keys(doc, "", {"name", "description", "source", "storage", "local", "scale", "testbed", "site", "link",
                            "directory", "scheduler"})
        name = self.string(doc, "name", "")
        if not NAME_RE.match(name):
            raise self.fail("name", f"must be 1-32 lowercase letters, digits or '-', got {name!r}")

        local_doc = doc.get("local", {})
        if not isinstance(local_doc, dict):
            raise self.fail("local", "must be a table")
        default_local = self.local(local_doc, "local", LocalFabric(2.0, None))

        testbed = doc.get("testbed", {})
        if not isinstance(testbed, dict):
            raise self.fail("testbed", "must be a table")
        self.keys(testbed, "testbed", {"cpu_per_core"})
        cpu_per_core = float(self.number(testbed, "cpu_per_core", "testbed", default=1.0, positive=True))

        scheduler = doc.get("scheduler", {})
        if not isinstance(scheduler, dict):
            raise self.fail("scheduler", "must be a table")
        self.keys(scheduler, "scheduler", {"max_span_slowdown_percent"})
        max_span_slowdown = float(self.number(scheduler, "max_span_slowdown_percent", "scheduler", default=10.0,
                                              minimum=0)) / 100

        scale = doc.get("scale", {})
        if not isinstance(scale, dict):
            raise self.fail("scale", "must be a table")

        site_docs = doc.get("site")
        if not isinstance(site_docs, list) or not site_docs:
            raise self.fail("site", "at least one [[site]] is needed")
        sites = [self.site(s, f"site[{i}]", default_local) for i, s in enumerate(site_docs)]
        codes = [s.code for s in sites]
        for i, c in enumerate(codes):
            if c in codes[:i]:
                raise self.fail(f"site[{i}].code", f"duplicate site code {c!r}")
        by_code = {s.code: s for s in sites}

        link_docs = doc.get("link", [])
        if not isinstance(link_docs, list):
            raise self.fail("link", "must be an array of tables ([[link]])")
        links: list[Link] = []
        for i, l in enumerate(link_docs):
            link = self.link(l, f"link[{i}]", by_code)
            if any(o.joins(link.a, link.b) for o in links):
                raise self.fail(f"link[{i}].sites", f"a second link between {link.a} and {link.b}")
            links.append(link)

        storage = self.string(doc, "storage", "", default=sites[0].code)
        if storage not in by_code:
            raise self.fail("storage", f"unknown site {storage!r} (sites: {', '.join(codes)})")

        directory = self.admin_directory(doc.get("directory"), name, sites, storage)

        fed = Federation(
            name=name,
            description=self.string(doc, "description", "", default=""),
            path=self.path.resolve(),
            sha256=hashlib.sha256(self.raw).hexdigest(),
            sites=tuple(sites),
            links=tuple(links),
            storage=storage,
            cpu_per_core=cpu_per_core,
            scale=dict(scale),
            directory=directory,
            max_span_slowdown=max_span_slowdown,
        )
        for s in sites[1:]:
            try:
                fed.route(sites[0].code, s.code)
            except KeyError:
                raise self.fail("link", f"site {s.code} is not joined to site {sites[0].code} by any link") from None
        return fed

    def admin_directory(self, d, name: str, sites: list[Site], storage: str) -> AdminDirectory | None:
        homes = [(i, s) for i, s in enumerate(sites) if s.directory]
        if d is None and not homes:
            return None
        d = {} if d is None else d
        if not isinstance(d, dict):
            raise self.fail("directory", "must be a table")
        self.keys(d, "directory", {"base", "site"})
        if not homes:
            raise self.fail("directory", "the federation's directory merges the sites' ones, but no [site.directory] "
                                         "is declared")
        base = self.string(d, "base", "directory", default=f"o=geofed-{name}")
        if not DN_RE.match(base):
            raise self.fail("directory.base", f"must be a DN like o=bwgrid or dc=bwgrid,dc=de, got {base!r}")
        site = self.string(d, "site", "directory", default=storage)
        if site not in {s.code for s in sites}:
            raise self.fail("directory.site", f"unknown site {site!r} (sites: {', '.join(s.code for s in sites)})")
        for n, (i, s) in enumerate(homes):
            for j, t in homes[:n]:
                a, b = s.directory, t.directory
                if a.prefix == b.prefix:
                    raise self.fail(f"site[{i}].directory.prefix", f"{a.prefix!r} is site {t.code}'s prefix too")
                if a.offset < b.offset + b.id_range and b.offset < a.offset + a.id_range:
                    raise self.fail(f"site[{i}].directory.offset",
                                    f"ids {a.offset}-{a.offset + a.id_range - 1} overlap site {t.code}'s "
                                    f"{b.offset}-{b.offset + b.id_range - 1}")
                if a.base.lower() == base.lower() or b.base.lower() == base.lower():
                    raise self.fail("directory.base", f"{base!r} is a site's own naming context")
        return AdminDirectory(base=base, site=site)

    def site_directory(self, d, where: str) -> SiteDirectory:
        if not isinstance(d, dict):
            raise self.fail(where, "must be a table")
        self.keys(d, where, {"kind", "base", "realm", "domain", "prefix", "offset", "id_range", "activation",
                             *SERVER_KEYS})
        kind = self.string(d, "kind", where)
        if kind not in DIRECTORY_KINDS:
            raise self.fail(f"{where}.kind", f"must be one of {', '.join(DIRECTORY_KINDS)}, got {kind!r}")
        realm = domain = None
        if kind == "ldap":
            for key in ("realm", "domain"):
                if key in d:
                    raise self.fail(f"{where}.{key}", "only an Active Directory (kind = \"ad\") has one")
            base = self.string(d, "base", where)
            if not DN_RE.match(base):
                raise self.fail(f"{where}.base", f"must be a DN like dc=uni-mannheim,dc=de, got {base!r}")
        else:
            if "base" in d:
                raise self.fail(f"{where}.base", "an Active Directory's base follows from its realm; give realm")
            realm = self.string(d, "realm", where)
            if not REALM_RE.match(realm):
                raise self.fail(f"{where}.realm", f"must be a DNS domain like ad.uni-heidelberg.de, got {realm!r}")
            realm = realm.upper()
            domain = self.string(d, "domain", where, default=realm.split(".")[0])
            if not re.match(r"^[A-Za-z][A-Za-z0-9-]{0,14}$", domain):
                raise self.fail(f"{where}.domain", f"must be a NetBIOS name of 1-15 letters, digits or '-', got {domain!r}")
            domain = domain.upper()
            base = ",".join(f"DC={label}" for label in realm.lower().split("."))
        prefix = self.string(d, "prefix", where)
        if not PREFIX_RE.match(prefix):
            raise self.fail(f"{where}.prefix", f"must be 1-8 lowercase letters or digits, starting with a letter, "
                                               f"got {prefix!r}")
        offset = self.number(d, "offset", where, integer=True, minimum=1)
        id_range = self.number(d, "id_range", where, default=100000, integer=True, minimum=1)
        if offset + id_range - 1 > MAX_ID:
            raise self.fail(f"{where}.offset", f"ids up to {offset + id_range - 1} exceed {MAX_ID}")
        activation = self.string(d, "activation", where, default="employeeType=hpc")
        attr, eq, value = activation.partition("=")
        if not eq or not ATTRIBUTE_RE.match(attr) or not value:
            raise self.fail(f"{where}.activation", f"must be ATTRIBUTE=VALUE like employeeType=hpc, got {activation!r}")
        return SiteDirectory(kind=kind, base=base, realm=realm, domain=domain, prefix=prefix, offset=offset,
                             id_range=id_range, activation_attribute=attr, activation_value=value,
                             **self.site_server(d, where))

    def site_server(self, d: dict, where: str) -> dict:
        """A centre's own server: uri, bind_dn, password_file and ca_file, together or not at all
        (files relative to the federation file; read when used, as root may be the only reader)."""
        if not any(k in d for k in SERVER_KEYS):
            return {}
        for k in SERVER_KEYS:
            if k not in d:
                raise self.fail(f"{where}.{k}", f"missing: {', '.join(SERVER_KEYS)} name a site's own server together")
        uri = self.string(d, "uri", where)
        if not LDAP_URI_RE.match(uri):
            raise self.fail(f"{where}.uri", f"must be ldap://HOST[:PORT] or ldaps://HOST[:PORT], got {uri!r}")
        bind_dn = self.string(d, "bind_dn", where)
        if not DN_RE.match(bind_dn):
            raise self.fail(f"{where}.bind_dn", f"must be a DN like cn=geofed-reader,dc=uni-mannheim,dc=de, "
                                                f"got {bind_dn!r}")
        files = {}
        for k in ("password_file", "ca_file"):
            v = self.string(d, k, where)
            if not v:
                raise self.fail(f"{where}.{k}", "must be a file's path, got an empty string")
            files[k] = self.path.resolve().parent / Path(v).expanduser()
        return {"uri": uri.rstrip("/"), "bind_dn": bind_dn, **files}

    def site(self, d, where: str, default_local: LocalFabric) -> Site:
        if not isinstance(d, dict):
            raise self.fail(where, "must be a table")
        self.keys(d, where, {"name", "code", "nodes", "cores_per_node", "speed", "memory_gb", "local", "directory",
                             "filesystem"})
        code = self.string(d, "code", where)
        if not CODE_RE.match(code):
            raise self.fail(f"{where}.code", f"must be one capital letter, got {code!r}")
        local_doc = d.get("local", {})
        if not isinstance(local_doc, dict):
            raise self.fail(f"{where}.local", "must be a table")
        return Site(
            name=self.string(d, "name", where, default=code),
            code=code,
            nodes=self.number(d, "nodes", where, integer=True, minimum=1),
            cores_per_node=self.number(d, "cores_per_node", where, default=1, integer=True, minimum=1),
            speed=float(self.number(d, "speed", where, default=1.0, positive=True)),
            memory_gb=float(self.number(d, "memory_gb", where, default=1.0, positive=True)),
            local=self.local(local_doc, f"{where}.local", default_local),
            directory=self.site_directory(d["directory"], f"{where}.directory") if "directory" in d else None,
            filesystems=self.filesystems(d["filesystem"], f"{where}.filesystem") if "filesystem" in d
            else DEFAULT_FILESYSTEMS,
        )

    def filesystems(self, docs, where: str) -> tuple[FileSystem, ...]:
        if not isinstance(docs, list) or not docs:
            raise self.fail(where, "must be an array of tables ([[site.filesystem]])")
        out = []
        for i, d in enumerate(docs):
            w = f"{where}[{i}]"
            if not isinstance(d, dict):
                raise self.fail(w, "must be a table")
            self.keys(d, w, {"name", "shared"})
            name = self.string(d, "name", w)
            if not FS_NAME_RE.match(name):
                raise self.fail(f"{w}.name", f"must be 1-32 lowercase letters, digits or '-', got {name!r}")
            if any(f.name == name for f in out):
                raise self.fail(f"{w}.name", f"a second file system named {name!r}")
            shared = d.get("shared", False)
            if not isinstance(shared, bool):
                raise self.fail(f"{w}.shared", f"must be true or false, got {shared!r}")
            out.append(FileSystem(name, shared))
        return tuple(out)

    def link(self, d, where: str, sites: dict[str, Site]) -> Link:
        if not isinstance(d, dict):
            raise self.fail(where, "must be a table")
        self.keys(d, where, {"sites", "fibre_km", "rtt_ms", "bandwidth_gbps", "queue_bytes", "jitter_us", "loss",
                             "back", "flow", "credits_bytes", "extender"})
        ends = d.get("sites")
        if not (isinstance(ends, list) and len(ends) == 2 and all(isinstance(e, str) for e in ends)):
            raise self.fail(f"{where}.sites", f"must be two site codes like [\"W\", \"G\"], got {ends!r}")
        for e in ends:
            if e not in sites:
                raise self.fail(f"{where}.sites", f"unknown site {e!r} (sites: {', '.join(sites)})")
        a, b = ends
        if a == b:
            raise self.fail(f"{where}.sites", f"a link joins two different sites, got {a!r} twice")
        if "fibre_km" not in d and "rtt_ms" not in d:
            raise self.fail(where, "needs fibre_km or rtt_ms (or both)")
        fibre_km = None
        if "fibre_km" in d:
            fibre_km = float(self.number(d, "fibre_km", where, positive=True))
        local_one_way_ms = (sites[a].local.latency_us + sites[b].local.latency_us) / 2 / 1e3
        if "rtt_ms" in d:
            rtt = float(self.number(d, "rtt_ms", where, positive=True))
            propagation = rtt / 2 - local_one_way_ms
            if propagation <= 0:
                raise self.fail(f"{where}.rtt_ms", f"{rtt} ms is not more than the local fabrics' latency alone")
            if fibre_km is not None and propagation < fibre_one_way_ms(fibre_km) * 0.999:
                raise self.fail(
                    f"{where}.rtt_ms",
                    f"{rtt} ms is faster than light through {fibre_km} km of fibre "
                    f"(at least {2 * (fibre_one_way_ms(fibre_km) + local_one_way_ms):.4g} ms)",
                )
        else:
            propagation = fibre_one_way_ms(fibre_km)
        back_doc = d.get("back")
        if back_doc is not None:
            if not isinstance(back_doc, dict):
                raise self.fail(f"{where}.back", "must be a table (the way from the second site to the first)")
            self.keys(back_doc, f"{where}.back", {"fibre_km", "bandwidth_gbps", "queue_bytes", "jitter_us", "loss"})
            if "fibre_km" in back_doc and fibre_km is None:
                raise self.fail(f"{where}.back.fibre_km", "needs the link's own fibre_km (rtt_ms describes both ways)")
        back_propagation = (fibre_one_way_ms(float(self.number(back_doc, "fibre_km", f"{where}.back", positive=True)))
                            if back_doc and "fibre_km" in back_doc else propagation)
        flow = self.flow(d, where, propagation + back_propagation)
        forward = self.way(d, where, propagation, local_one_way_ms, None, flow)
        back = None if back_doc is None else self.way(back_doc, f"{where}.back", back_propagation, local_one_way_ms,
                                                      forward, flow)
        return Link(a=a, b=b, fibre_km=fibre_km, back=back, extender=flow.extender, **asdict(forward))

    def flow(self, d: dict, where: str, round_trip_ms: float) -> _Flow:
        """The link's flow control: `flow = "credit"` with `credits_bytes` or an `extender` profile."""
        flow = self.string(d, "flow", where, default="credit" if "extender" in d else "queue")
        if flow not in FLOWS:
            raise self.fail(f"{where}.flow", f"must be \"queue\" (a router's tail-drop queue) or \"credit\" "
                                             f"(an InfiniBand range extender's buffer credits), got {flow!r}")
        if flow == "queue":
            for key in ("credits_bytes", "extender"):
                if key in d:
                    raise self.fail(f"{where}.{key}", "only a credit link has one; add flow = \"credit\"")
            return _Flow(None, None, None)
        if ("credits_bytes" in d) == ("extender" in d):
            raise self.fail(where, "flow = \"credit\" needs credits_bytes or extender (one of them)")
        if "credits_bytes" in d:
            return _Flow(int(self.number(d, "credits_bytes", where, integer=True, minimum=9000)), None, round_trip_ms)
        name = self.string(d, "extender", where)
        if name not in EXTENDERS:
            raise self.fail(f"{where}.extender", f"unknown extender {name!r} (known: {', '.join(EXTENDERS)})")
        return _Flow(None, name, round_trip_ms)

    def way(self, d: dict, where: str, propagation: float, local_one_way_ms: float, forward: Way | None,
            flow: _Flow) -> Way:
        """One direction's rate, queue, jitter, loss and credits; the way back takes what it leaves out from
        `forward`."""
        def given(key, **checks):
            if forward is not None and key not in d:
                return getattr(forward, key)
            return self.number(d, key, where, **checks)
        bandwidth = float(given("bandwidth_gbps", positive=True))
        one_way = propagation + local_one_way_ms
        credits = EXTENDERS[flow.extender].credits_bytes(bandwidth) if flow.extender else flow.credits_bytes
        queue = self.number(d, "queue_bytes", where, default=-1, integer=True)
        if queue == -1:
            queue = CREDIT_WAIT_BYTES if flow.is_credit else max(bdp_bytes(bandwidth, 2 * one_way), MIN_QUEUE_BYTES)
        elif queue < 9000:
            raise self.fail(f"{where}.queue_bytes", f"must hold at least one jumbo frame (9000 bytes), got {queue}")
        loss = float(given("loss", default=0.0, minimum=0, below=1))
        if flow.is_credit and loss:
            raise self.fail(f"{where}.loss", "a credit link is lossless (frames wait for credits, none is dropped): "
                                             "leave loss out or use flow = \"queue\"")
        return Way(propagation_ms=propagation, one_way_ms=one_way, bandwidth_gbps=bandwidth, queue_bytes=int(queue),
                   jitter_us=float(given("jitter_us", default=0.0, minimum=0)), loss=loss,
                   credits_bytes=credits, credit_rtt_ms=flow.round_trip_ms)


@dataclass(frozen=True)
class _Flow:
    """A [[link]]'s flow control as written: credits given, or the extender they come from."""

    credits_bytes: int | None
    extender: str | None
    round_trip_ms: float | None  # set on a credit link: the fibre there and back

    @property
    def is_credit(self) -> bool:
        return self.round_trip_ms is not None


def layout(fed: Federation) -> dict:
    """The federation as plain data, for what may not import this module (the report's
    overview): its sites, which site each node is in, and its links."""
    return {"name": fed.name, "description": fed.description,
            "sites": [{"code": s.code, "name": s.name, "nodes": s.nodes} for s in fed.sites],
            "nodes": {n.name: n.site for n in fed.nodes()},
            "links": [{"a": link.a, "b": link.b, "rtt_ms": link.rtt_ms, "bandwidth_gbps": link.bandwidth_gbps,
                       "fibre_km": link.fibre_km} for link in fed.links]}


def layouts(named: set[tuple[str, str | None]]) -> dict[str, dict]:
    """name -> layout of the federations records name (their file if it is still there,
    else the shipped federation of that name); those found neither way are left out."""
    out = {}
    for name, file in sorted(named, key=str):
        for spec in (s for s in (file, name) if s):
            try:
                out[name] = layout(load(spec))
                break
            except UserError:
                continue
    return out
