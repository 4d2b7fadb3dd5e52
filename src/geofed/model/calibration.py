"""Per-node constants fitted from one-site runs, kept in a small TOML file.

`geofed model calibrate -f F RECORDS...` reads the records geofed already writes
(bench.mpi, mdfs.sweep, bench.obstacle) and keeps only what was measured inside one
site: the MPI latency curve and local rate, MDFS's cost per tuple, the obstacle
solver's cost per iteration. Records of runs that crossed a link are skipped, so the
inter-site side of every prediction comes from the federation file alone. Three
constants are the testbed's, not a node's: what its host adds to a crossing between
sites (a bridge and the link emulator's packet sockets beyond a path inside one
site), from a `testbed verify` record: the probe's floor on the link (its round trip
with the emulator holding nothing of the fibre) less its round trip inside a site;
that the emulator stores each GSO super-frame (up to 64 KiB) whole before the
link serialises it; and the host CPU the emulator spends per byte it forwards (a TCP
stream's host CPU per byte across the link less inside a site) with the host's core
count: on a host with no core left over for the emulator, that CPU delays the ranks.
On a real federation there is no such record and the crossing costs nothing beyond
the link's description.

The file lives next to the federation file (`<file>.calibration.toml`); for a
shipped federation named without a path, in the current directory
(`<name>.calibration.toml`); a shipped federation may ship one too
(`geofed/federations/calibration/`), used when there is none of the user's own.
A constant missing for a site is taken from another
site of the federation, scaled by the sites' speeds where it is compute; the
prediction says so.
"""

from __future__ import annotations

import bisect
import math
import statistics
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from geofed.errors import UserError
from geofed.launch.placement import read
from geofed.records import Record, load_dir
from geofed.records.hpl import flops

TCP_WMEM = Path("/proc/sys/net/ipv4/tcp_wmem")
DEFAULT_TCP_WINDOW_BYTES = 4 << 20  # Linux's default net.ipv4.tcp_wmem maximum
TRANSPORTS = ("tcp", "infiniband")  # what MPI's messages travel over between nodes
# The testbed's emulator forwards what the kernel hands its packet socket: a GSO
# super-frame of up to 64 KiB, stored whole before the link serialises it.
GSO_MAX_BYTES = 65536
COMPUTE_KEYS = ("mdfs_tuple_us", "mdfs_overhead_s", "obstacle_iter_s", "grayscott_compute_ms")


def default_path(spec: str) -> Path:
    """Where the calibration of the federation named or stored at `spec` is written."""
    p = Path(spec)
    if p.suffix == ".toml" or p.exists():
        return p.with_name(p.stem + ".calibration.toml")
    return Path(f"{spec}.calibration.toml")


def find(spec: str) -> Path:
    """The calibration to read for `spec`: the user's own, else the one shipped with a shipped federation."""
    own = default_path(spec)
    shipped = Path(str(resources.files("geofed") / "federations" / "calibration" / own.name))
    return shipped if not own.exists() and shipped.exists() else own


@dataclass
class Calibration:
    federation: str
    sites: dict[str, dict] = field(default_factory=dict)
    tcp_window_bytes: int = DEFAULT_TCP_WINDOW_BYTES  # the host's largest TCP send buffer
    # MPI over TCP (geofed's MPICH, on the testbed and on Ethernet clusters) pays slow
    # start and a round trip per full send buffer; over InfiniBand neither applies.
    transport: str = "tcp"
    crossing_us: float = 0.0  # the testbed host's one-way cost of crossing between sites
    crossing_frame_bytes: int = 0  # the most of a message the testbed's emulator stores before forwarding
    crossing_cpu_ns_per_byte: float = 0.0  # the testbed host's CPU per byte crossing between sites
    crossing_cpu_us_per_message: float = 0.0  # and per MPI message crossing, beyond its bytes (`bench apps`)
    host_cores: int = 0  # the testbed host's cores, which its ranks and link emulator share
    sources: list[str] = field(default_factory=list)
    speeds: dict[str, float] = field(default_factory=dict)  # site speed from the federation file
    notes: list[str] = field(default_factory=list)  # what was borrowed from another site

    # ------------------------------------------------------------ lookup
    def value(self, site: str, key: str, what: str):
        """The constant `key` of `site`, or another site's (scaled by speed for compute)."""
        own = self.sites.get(site, {})
        if key in own:
            return own[key]
        for other, consts in self.sites.items():
            if key in consts:
                v = consts[key]
                if key in COMPUTE_KEYS and self.speeds.get(site) and self.speeds.get(other):
                    v = v * self.speeds[other] / self.speeds[site]
                note = f"{what} at site {site} taken from site {other}"
                if note not in self.notes:
                    self.notes.append(note)
                return v
        raise UserError(f"calibration of {self.federation}: no {what} measured ({key}); "
                        f"run the one-site measurement and `geofed model calibrate` (docs/model.md)")

    def local_latency_s(self, site: str, nbytes: float) -> float:
        """One-way MPI time of a message inside `site`, interpolated log-log in size."""
        sizes = self.value(site, "mpi_sizes", "MPI latency inside a site")
        us = self.value(site, "mpi_latency_us", "MPI latency inside a site")
        n = max(nbytes, 1)
        if n <= sizes[0]:
            return us[0] / 1e6
        if n >= sizes[-1]:  # beyond the curve: add serialisation at the local rate
            return us[-1] / 1e6 + (n - sizes[-1]) / self.local_rate_Bps(site)
        i = bisect.bisect_left(sizes, n)
        x0, x1, y0, y1 = math.log(sizes[i - 1]), math.log(sizes[i]), us[i - 1], us[i]
        return (y0 + (y1 - y0) * (math.log(n) - x0) / (x1 - x0)) / 1e6

    def crossing_cpu_s(self, link_bytes: float, ranks: int, compute_s: float, run_s: float,
                       link_messages: int = 0) -> float:
        """Time the testbed's link emulator takes from a job's ranks to forward `link_bytes`
        in `link_messages` messages.

        Its CPU lands on the host's cores and delays the run where the ranks' computation
        needs every core: the share ranks x compute / (cores x run) of the cores' time, at
        most all of it. A core left over takes the emulator for free: nothing with fewer
        ranks than cores. Zero on a real federation (no such constant)."""
        cpu_s = (link_bytes * self.crossing_cpu_ns_per_byte / 1e9
                 + link_messages * self.crossing_cpu_us_per_message / 1e6)
        if not cpu_s or ranks < self.host_cores:
            return 0.0
        computing = min(1.0, ranks * compute_s / (self.host_cores * run_s))
        return cpu_s / self.host_cores * computing

    def local_rate_Bps(self, site: str) -> float:
        return self.value(site, "mpi_bw_MBps", "MPI bandwidth inside a site") * 1e6

    def local_gap_s(self, site: str, nbytes: float) -> float:
        """Time between back-to-back messages of `nbytes` inside `site` (OSU bw's window):
        at small sizes the per-message cost, not the rate, sets it. From the one-site
        bw curve, interpolated log-log; without one, the size at the peak rate."""
        own = self.sites.get(site, {})
        if "mpi_bw_sizes" not in own and not any("mpi_bw_sizes" in c for c in self.sites.values()):
            return nbytes / self.local_rate_Bps(site)
        sizes = self.value(site, "mpi_bw_sizes", "MPI bandwidth curve inside a site")
        rates = self.value(site, "mpi_bw_curve_MBps", "MPI bandwidth curve inside a site")
        gaps = [n / (r * 1e6) for n, r in zip(sizes, rates)]
        n = max(nbytes, 1)
        if n <= sizes[0]:
            return gaps[0]
        if n >= sizes[-1]:
            return gaps[-1] + (n - sizes[-1]) / self.local_rate_Bps(site)
        i = bisect.bisect_left(sizes, n)
        x0, x1 = math.log(sizes[i - 1]), math.log(sizes[i])
        y0, y1 = math.log(gaps[i - 1]), math.log(gaps[i])
        return math.exp(y0 + (y1 - y0) * (math.log(n) - x0) / (x1 - x0))

    # ------------------------------------------------------------ file
    def save(self, path: Path) -> Path:
        lines = [f"# geofed calibration of federation {self.federation}: constants measured inside one site",
                 f"federation = {_toml(self.federation)}",
                 f"tcp_window_bytes = {self.tcp_window_bytes}",
                 f"transport = {_toml(self.transport)}",
                 f"crossing_us = {_toml(float(self.crossing_us))}",
                 f"crossing_frame_bytes = {self.crossing_frame_bytes}",
                 f"crossing_cpu_ns_per_byte = {_toml(float(self.crossing_cpu_ns_per_byte))}",
                 f"crossing_cpu_us_per_message = {_toml(float(self.crossing_cpu_us_per_message))}",
                 f"host_cores = {self.host_cores}",
                 f"sources = {_toml(self.sources)}"]
        for site in sorted(self.sites):
            lines.append(f"\n[site.{site}]")
            lines += [f"{k} = {_toml(v)}" for k, v in sorted(self.sites[site].items())]
        path.write_text("\n".join(lines) + "\n")
        return path


def _toml(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(int(v))


def load(path: Path, fed) -> Calibration:
    """Read a calibration file for federation `fed`; one-line errors for everything wrong."""
    if not path.exists():
        raise UserError(f"{path}: no calibration for federation {fed.name}; "
                        f"run `geofed model calibrate -f {fed.name} RECORDS...` first")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: not a calibration file ({e})") from None
    if doc.get("federation") != fed.name:
        raise UserError(f"{path}: calibration of {doc.get('federation')!r}, not of federation {fed.name}")
    cal = Calibration(fed.name, speeds={s.code: s.speed for s in fed.sites})
    cal.tcp_window_bytes = int(_number(doc.get("tcp_window_bytes", DEFAULT_TCP_WINDOW_BYTES), path, "tcp_window_bytes"))
    cal.sources = [str(s) for s in doc.get("sources", [])]
    cal.transport = doc.get("transport", "tcp")
    crossing = doc.get("crossing_us", 0.0)
    cal.crossing_us = 0.0 if crossing == 0 else float(_number(crossing, path, "crossing_us"))
    frame = doc.get("crossing_frame_bytes", 0)
    cal.crossing_frame_bytes = 0 if frame == 0 else int(_number(frame, path, "crossing_frame_bytes"))
    cpu = doc.get("crossing_cpu_ns_per_byte", 0.0)
    cal.crossing_cpu_ns_per_byte = 0.0 if cpu == 0 else float(_number(cpu, path, "crossing_cpu_ns_per_byte"))
    per_message = doc.get("crossing_cpu_us_per_message", 0.0)
    cal.crossing_cpu_us_per_message = (0.0 if per_message == 0 else
                                       float(_number(per_message, path, "crossing_cpu_us_per_message")))
    cores = doc.get("host_cores", 0)
    cal.host_cores = 0 if cores == 0 else int(_number(cores, path, "host_cores"))
    if cal.transport not in TRANSPORTS:
        raise UserError(f"{path}: transport: expected one of {', '.join(TRANSPORTS)}, got {cal.transport!r}")
    for site, consts in doc.get("site", {}).items():
        if site not in cal.speeds:
            raise UserError(f"{path}: [site.{site}]: federation {fed.name} has no site {site}")
        for k, v in consts.items():
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                _number(x, path, f"site.{site}.{k}")
        cal.sites[site] = dict(consts)
    return cal


def found_or_empty(spec: str, fed) -> Calibration:
    """The calibration found for `spec`, else an empty one (the federation file and this
    host's TCP send buffer only), for a model whose input carries its own measurements."""
    path = find(spec)
    if path.exists():
        return load(path, fed)
    return Calibration(fed.name, speeds={s.code: s.speed for s in fed.sites}, tcp_window_bytes=host_tcp_window())


def _number(x, path, where):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise UserError(f"{path}: {where}: expected a positive finite number, got {x!r}")
    return x


# ------------------------------------------------------------ fitting


@dataclass
class Curves:
    """What the one-site records measured, gathered over all of them before the medians
    go into the calibration: site -> size -> MPI latencies and rates, site -> N -> HPL's
    seconds per flop."""
    latency: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    bandwidth: dict[str, list[float]] = field(default_factory=dict)
    bw_curve: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    hpl: dict[str, dict[int, list[float]]] = field(default_factory=dict)

    def into(self, cal: Calibration) -> None:
        for site, by_size in self.latency.items():
            sizes = sorted(by_size)
            consts = cal.sites.setdefault(site, {})
            consts["mpi_sizes"] = sizes
            consts["mpi_latency_us"] = [round(statistics.median(by_size[s]), 3) for s in sizes]
        for site, values in self.bandwidth.items():
            cal.sites.setdefault(site, {})["mpi_bw_MBps"] = round(max(values), 1)
        for site, by_size in self.bw_curve.items():
            sizes = [s for s in sorted(by_size) if statistics.median(by_size[s]) > 0]
            consts = cal.sites.setdefault(site, {})
            consts["mpi_bw_sizes"] = sizes
            consts["mpi_bw_curve_MBps"] = [round(statistics.median(by_size[s]), 4) for s in sizes]
        for site, by_n in self.hpl.items():
            consts = cal.sites.setdefault(site, {})
            consts["hpl_n"] = sorted(by_n)
            consts["hpl_flop_ns"] = [round(statistics.median(by_n[n]) * 1e9, 6) for n in sorted(by_n)]


# Record kind -> what its one-site runs tell the calibration: fit(cal, data, curves) is
# True when the record was used. A model whose workload writes a new kind registers here.
FITS: dict[str, Callable[[Calibration, object, Curves], bool]] = {}


def fits(kind: str):
    def register(fn):
        FITS[kind] = fn
        return fn
    return register


def fit(fed, recs: list[Record]) -> Calibration:
    """Constants from records of one-site runs; inter-site records are skipped."""
    cal = Calibration(fed.name, speeds={s.code: s.speed for s in fed.sites}, tcp_window_bytes=host_tcp_window())
    curves, used = Curves(), set()
    for rec in recs:
        fit_kind = FITS.get(rec.kind)
        if fit_kind and fit_kind(cal, rec.data, curves):
            used.add(rec.path or rec.created)
    curves.into(cal)
    cal.sources = sorted(used)
    if not cal.sources:
        raise UserError(f"no one-site run of a known kind ({', '.join(FITS)}) in the records given")
    return cal


def fit_found(fed, spec: str, directory: Path) -> Calibration | None:
    """On first use: the calibration fitted from the one-site records of this very
    federation file (name and sha256) in `directory`, saying so in its notes (`spec`:
    the federation as the user named it); None when there are none."""
    if not directory.is_dir():
        return None
    recs = [r for r in load_dir(directory)
            if r.federation == fed.name and r.meta.get("federation_sha256") == fed.sha256 and r.kind in FITS]
    try:
        cal = fit(fed, recs)
    except UserError:  # records, but none of a one-site run
        return None
    cal.notes.append(f"calibrated from the {len(cal.sources)} one-site record(s) of {fed.name} in {directory}; "
                     f"`geofed model calibrate -f {spec} {directory}` keeps them in a file")
    return cal


@fits("bench.mpi")
def _fit_mpi(cal: Calibration, data, curves: Curves) -> bool:
    """Latency and bandwidth per message size inside one site: the MPI models' local path."""
    if len(data.sites) != 1:
        return False
    site, found = data.sites[0], False
    for res in data.results:
        if res.get("class") != "intra-site":
            continue
        if res.get("benchmark") == "latency":
            for row in res.get("sizes", []):
                curves.latency.setdefault(site, {}).setdefault(int(row["size"]), []).append(float(_stat(row)))
            found = True
        elif res.get("benchmark") == "bw":
            curves.bandwidth.setdefault(site, []).append(max(float(_stat(r)) for r in res["sizes"]))
            for row in res.get("sizes", []):
                curves.bw_curve.setdefault(site, {}).setdefault(int(row["size"]), []).append(float(_stat(row)))
            found = True
    return found


@fits("testbed.verify")
def _fit_testbed(cal: Calibration, data, curves: Curves) -> bool:
    """The testbed host's own costs of crossing a link: time per frame and CPU per byte."""
    found = False
    crossing = _crossing_us(data)
    if crossing is not None:
        cal.crossing_us = crossing
        cal.crossing_frame_bytes = GSO_MAX_BYTES
        found = True
    cpu = _crossing_cpu_ns_per_byte(data)
    if cpu is not None:
        cal.crossing_cpu_ns_per_byte, cal.host_cores = cpu, data.host_cores
        found = True
    return found


def host_tcp_window() -> int:
    """This host's largest TCP send buffer: the most a connection keeps in flight."""
    try:
        return int(TCP_WMEM.read_text().split()[2])
    except (OSError, ValueError, IndexError):
        return DEFAULT_TCP_WINDOW_BYTES


def _crossing_us(data) -> float | None:
    """One-way host cost of a crossing: the links' probe floor less the round trip inside a site, halved."""
    pairs = data.pairs
    inside = [p["rtt_ms"]["median"] for p in pairs if p.get("class") == "intra-site"]
    floors = [p["link"]["floor_rtt_ms"] for p in pairs if p.get("class") == "inter-site" and p.get("link")]
    if not inside or not floors:
        return None
    return round(max(0.0, statistics.median(floors) - statistics.median(inside)) / 2 * 1e3, 3)


def _crossing_cpu_ns_per_byte(data) -> float | None:
    """Host CPU per byte the link adds: a stream's across it less one inside a site (ms/MB = ns/B)."""
    pairs = data.pairs
    cost = {cls: [p["host_cpu_ms_per_MB"] for p in pairs if p.get("class") == cls and p.get("host_cpu_ms_per_MB")
                  is not None] for cls in ("intra-site", "inter-site")}
    if not all(cost.values()) or not data.host_cores:
        return None
    return round(max(0.0, statistics.median(cost["inter-site"]) - statistics.median(cost["intra-site"])), 3)


def _stat(row: dict) -> float:
    """The row's median sample (predictions are of medians), else its mean."""
    stats = row.get("stats") or {}
    value = stats.get("p50", row.get("value"))
    if value is None:
        raise UserError(f"bench.mpi row of size {row.get('size')} has no value")
    return value


@fits("mdfs.sweep")
def _fit_mdfs(cal: Calibration, data, curves: Curves) -> bool:
    """Cost per counted tuple and the per-run overhead, from one-node rows; staging inside the storage site."""
    found = False
    storage = data.storage
    staging: dict[int, list[float]] = {}
    for row in data.rows:
        sites = row.get("sites") or []
        if len(sites) != 1:
            continue
        site = sites[0]
        if row["nodes"] == 1:
            share = row["shares"][0]
            consts = cal.sites.setdefault(site, {})
            consts["mdfs_tuple_us"] = round(share["count_s"] / share["tuples"] * 1e6, 6)
            consts["mdfs_overhead_s"] = round(max(row["compute_s"] - share["count_s"], 1e-6), 6)
            consts["mdfs_tuples"] = int(sum(s["tuples"] for s in row["shares"]))
            found = True
        if site == storage:
            staging.setdefault(row["nodes"], []).append(row["staging_s"])
    if staging:
        consts = cal.sites.setdefault(storage, {})
        nodes = sorted(staging)
        consts["mdfs_staging_nodes"] = nodes
        consts["mdfs_staging_s"] = [round(statistics.median(staging[n]), 6) for n in nodes]
        consts["mdfs_staging_bytes"] = int(max(r["staging_bytes"] for r in data.rows))
    return found


@fits("bench.obstacle")
def _fit_obstacle(cal: Calibration, data, curves: Curves) -> bool:
    """Per-iteration compute (async runs never wait) and communication per scheme, inside one site."""
    found = False
    for row in data.solver or []:
        if row.get("across_link"):
            continue
        codes = read(row["placement"]).sites()
        if len(codes) != 1:
            continue
        consts = cal.sites.setdefault(codes[0], {})
        compute = row["async_s"] / row["async_iterations"]
        consts["obstacle_n"] = data.n
        consts["obstacle_iter_s"] = round(compute, 9)
        consts["obstacle_async_iterations"] = int(row["async_iterations"])
        for scheme in ("sync", "mpi"):
            per_iter = row[f"{scheme}_s"] / row[f"{scheme}_iterations"]
            consts[f"obstacle_{scheme}_iterations"] = int(row[f"{scheme}_iterations"])
            consts[f"obstacle_{scheme}_comm_s"] = round(max(per_iter - compute, 1e-9), 9)
        found = True
    return found


@fits("bench.hpl")
def _fit_hpl_run(cal: Calibration, data, curves: Curves) -> bool:
    """HPL's time per flop by N on one node (one rank), from a single run."""
    found = False
    if data.ranks == 1:
        (site,) = data.ranks_per_site
        for r in data.rows:
            if r["passed"]:
                curves.hpl.setdefault(site, {}).setdefault(int(r["n"]), []).append(r["time_s"] / flops(r["n"]))
                found = True
    return found


@fits("bench.hpl.sweep")
def _fit_hpl_sweep(cal: Calibration, data, curves: Curves) -> bool:
    """HPL's time per flop by N on one node, from a sweep's one-node rows."""
    found = False
    for r in data.rows:
        if r["nodes"] == 1:
            curves.hpl.setdefault(r["sites"][0], {}).setdefault(int(r["n"]), []).append(r["time_s"] / flops(r["n"]))
            found = True
    return found


@fits("bench.grayscott")
def _fit_grayscott(cal: Calibration, data, curves: Curves) -> bool:
    """Stencil time per step by L (staging off) and local staging per MB, from a one-site run."""
    if data.sim_site != data.analysis_site or not data.cases:
        return False
    cases = sorted(data.cases, key=lambda c: c["L"])
    consts = cal.sites.setdefault(data.sim_site, {})
    consts["grayscott_L"] = [int(c["L"]) for c in cases]
    consts["grayscott_compute_ms"] = [round(c["off"]["per_step_ms"], 6) for c in cases]
    consts["grayscott_ranks"] = data.sim_ranks
    consts["grayscott_stage_ms_per_mb"] = round(statistics.median(
        c["on"]["staging_ms"] * c["plotgap"] / (c["bytes_per_output"] / 1e6) for c in cases), 6)
    return True
