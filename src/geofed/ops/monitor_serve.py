"""`geofed monitor serve SCHEDULE`: watch a federation's paths for as long as it runs.

What perfSONAR does between sites, on the testbed (docs/monitor.md):
- a one-way delay and loss probe on every path, both ways, all the time
  (ops/owd.py: several datagrams a second; one sample per direction and period);
- MPI latency and bandwidth (seed 001's IMB PingPong: the `pingpong` workload through
  launch.runner.run_ranks) between the paths' or random node pairs every few minutes;
- TCP throughput (geofed-probe) now and then;
- never two tests on one path at once (the probe is light and runs beside them, as
  perfSONAR's background latency tests do);
- every sample committed the moment it exists (ops/monitor_store.py), each stored
  sample logged with its id; each test's next due time kept in the store, so a
  restart resumes the schedule where it was;
- each path judged after every sample (ops/judge.py), alerts once per event and once
  when it clears (ops/alerts.py);
- raw samples older than the retention horizon folded into per-interval aggregates.
"""

from __future__ import annotations

import ctypes
import random
import signal
import subprocess
import sys
import threading
import time
import tomllib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from itertools import combinations
from pathlib import Path

from geofed import federation, validate
from geofed.errors import JobFailed, UserError
from geofed.ops import alerts, judge
from geofed.ops.monitor import node_pair
from geofed.ops.monitor_store import Sample, Store
from geofed.testbed import host

PR_SET_PDEATHSIG = 1
STALL_S = 30.0  # how long a period waits for a probe's ends to tell it before they count as lost


@dataclass(frozen=True)
class Owd:
    rate_hz: float = 10.0
    period_s: float = 10.0
    size: int = 64
    lost_after_s: float = 2.0


@dataclass(frozen=True)
class Mpi:
    every_s: float = 300.0  # 0: no MPI tests
    pairs: list = field(default_factory=list)  # node pairs like "W1-G1"; default: the paths
    random: int = 0  # instead: this many random node pairs, drawn anew each round
    seed: int = 0
    bw_size: str = "1M"
    seconds: float = 1.0
    timeout_s: float = 120.0


@dataclass(frozen=True)
class Throughput:
    every_s: float = 3600.0  # 0: no throughput tests
    seconds: float = 5.0
    warmup_s: float = 1.0
    streams: int = 4


@dataclass(frozen=True)
class Retention:
    raw_s: float = 7 * 86400.0
    aggregate_s: float = 3600.0
    every_s: float = 3600.0


@dataclass(frozen=True)
class Schedule:
    path: Path
    federation: str
    store: Path
    paths: list[tuple[str, str]]
    owd: Owd
    mpi: Mpi
    throughput: Throughput
    retention: Retention
    judge: judge.Settings
    alerts: alerts.Channels


def _table(cls, doc: dict, where: str):
    """A dataclass from a TOML table: unknown keys and wrong types refused by name."""
    if not isinstance(doc, dict):
        raise UserError(f"{where}: expected a table of settings, got {doc!r}")
    known = {f.name: f for f in fields(cls)}
    for k in doc:
        if k not in known:
            raise UserError(f"{where}.{k}: unknown key (known: {', '.join(known)})")
    defaults = cls()
    for k, v in doc.items():
        default = getattr(defaults, k)
        want = {float: (int, float), type(None): str}.get(type(default), type(default))
        if isinstance(v, bool) != isinstance(default, bool) or not isinstance(v, want):
            raise UserError(f"{where}.{k}: expected {want.__name__ if isinstance(want, type) else 'a number'}, "
                            f"got {v!r}")
        if isinstance(v, (int, float)) and v < 0:
            raise UserError(f"{where}.{k}: must not be negative, got {v!r}")
    return cls(**doc)


def load(path: str | Path) -> Schedule:
    """Read and check a schedule file (docs/monitor.md lists its keys)."""
    return loads(validate.read_text(path, "schedule"), Path(path))


def loads(text: str, path: Path) -> Schedule:
    """A schedule from its text; `path` names it in errors and anchors its relative paths."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not a valid TOML schedule: {e}") from None
    top = {"federation", "store", "paths", "owd", "mpi", "throughput", "retention", "judge", "alerts"}
    for k in doc:
        if k not in top:
            raise UserError(f"{path}: {k}: unknown key (known: {', '.join(sorted(top))})")
    for k in ("federation", "store", "paths"):
        if k not in doc:
            raise UserError(f"{path}: {k} is missing")
    for k in ("federation", "store"):
        if not isinstance(doc[k], str):
            raise UserError(f"{path}: {k}: expected a name or path in quotes, got {doc[k]!r}")
    fed_spec = doc["federation"]
    if fed_spec not in federation.shipped_names() and not Path(fed_spec).is_absolute():
        fed_spec = str(path.parent / fed_spec)  # a file beside the schedule
    fed = federation.load(fed_spec)
    if not isinstance(doc["paths"], list) or not doc["paths"]:
        raise UserError(f"{path}: paths: expected a list of node pairs like [\"W1-G1\"]")
    paths = [node_pair(fed, p, f"{path}: paths") for p in doc["paths"]]
    mpi = _table(Mpi, doc.get("mpi", {}), f"{path}: [mpi]")
    mpi = replace(mpi, pairs=[path_name(*node_pair(fed, p, f"{path}: [mpi] pairs")) for p in mpi.pairs])
    every_pair = len(list(combinations(fed.nodes(), 2)))
    if mpi.random > every_pair:
        raise UserError(f"{path}: [mpi] random = {mpi.random}: {fed.name} has {every_pair} node pairs")
    bw_bytes = validate.parse_size(mpi.bw_size, f"{path}: [mpi] bw_size")
    owd = _table(Owd, doc.get("owd", {}), f"{path}: [owd]")
    if owd.rate_hz <= 0 or owd.period_s <= 0:
        raise UserError(f"{path}: [owd] rate_hz and period_s must be positive")
    jdoc = dict(doc.get("judge", {}))
    per_metric = {table: jdoc.pop(table, {}) for table in ("thresholds", "tolerances")}
    for table, given in per_metric.items():
        if not isinstance(given, dict) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                              for v in given.values()):
            raise UserError(f"{path}: [judge.{table}]: expected metric = number, got {given!r}")
    settings = _table(judge.Settings, jdoc, f"{path}: [judge]")
    if min(settings.window, settings.loss_periods, settings.loss_spread, settings.down_after) < 1 \
            or settings.reference_samples < 2:
        raise UserError(f"{path}: [judge] window, loss_periods, loss_spread and down_after must be at least 1 "
                        "and reference_samples at least 2")
    if settings.loss_floor <= 0:
        raise UserError(f"{path}: [judge] loss_floor must be positive (a rate no path is held below)")
    settings = replace(settings, **per_metric, bw_bytes=bw_bytes, probe_datagrams=owd.rate_hz * owd.period_s,
                       stale_s=jdoc.get("stale_s", 3 * owd.period_s + owd.lost_after_s))
    store = Path(doc["store"])
    return Schedule(path=path, federation=str(fed.path), store=store if store.is_absolute() else path.parent / store,
                    paths=paths, owd=owd, mpi=mpi,
                    throughput=_table(Throughput, doc.get("throughput", {}), f"{path}: [throughput]"),
                    retention=_table(Retention, doc.get("retention", {}), f"{path}: [retention]"),
                    judge=settings, alerts=_table(alerts.Channels, doc.get("alerts", {}), f"{path}: [alerts]"))


def path_name(a: str, b: str) -> str:
    return f"{a}-{b}"


class PathScheduler:
    """Tests run on sets of resources (paths, a node's sink port), never two at once
    on one: a test whose resources are busy waits until all are free. It remembers
    which tests loaded a resource when (`held`), so a probe period a throughput test
    filled the queue of is known as such; a test that does not load it (a 1-byte
    ping-pong) is exclusive all the same but spoils no period."""

    HISTORY_S = 3600.0

    def __init__(self):
        self._busy: dict[str, tuple[str, float, bool]] = {}  # resource -> (test, since, loads)
        self._past: list[tuple[str, str, float, float]] = []  # (resource, test, start, end) of loading tests
        self._cond = threading.Condition()

    @contextmanager
    def holding(self, resources: set[str], test: str, loads: bool = True):
        with self._cond:
            self._cond.wait_for(lambda: not (resources & self._busy.keys()))
            since = time.time()
            self._busy.update({r: (test, since, loads) for r in resources})
        try:
            yield
        finally:
            with self._cond:
                end = time.time()
                for r in resources:
                    self._busy.pop(r)
                    if loads:
                        self._past.append((r, test, since, end))
                self._past = [p for p in self._past if p[3] > end - self.HISTORY_S]
                self._cond.notify_all()

    def held(self, resource: str, t0: float, t1: float) -> list[str]:
        """The tests that held `resource` at some time in [t0, t1)."""
        with self._cond:
            spans = self._past + [(r, test, since, float("inf")) for r, (test, since, loads) in self._busy.items()
                                  if loads]
            return sorted({test for r, test, start, end in spans if r == resource and start < t1 and end > t0})


def _die_with_parent() -> None:
    """In the child: end when the service ends, even by kill -9 (the kernel sends it)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class OwdProbe:
    """The one-way probe of one direction: a receiver at dst, a sender at src, their
    lines gathered by two threads; `period` makes one period's sample of them once both
    ends have told everything up to its end (`told`): a host too busy to read their
    lines for a while delays a sample, it does not lose datagrams."""

    def __init__(self, src, dst, owd: Owd):
        self.src, self.dst, self.owd = src, dst, owd
        self.sent: dict[int, int] = {}  # seq -> send time (ns)
        self.got: dict[int, tuple[int, int]] = {}  # seq -> (delay ns, bound ns)
        self.sent_until = self.seen_until = 0  # ns: the newest send, the newest arrival (or idle) told
        self.lock = threading.Lock()
        self.procs: list[subprocess.Popen] = []
        self.start()

    def _spawn(self, node, argv: list[str]) -> subprocess.Popen:
        return subprocess.Popen(host.in_netns(node.netns, [sys.executable, "-m", "geofed.ops.owd", *argv]),
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                preexec_fn=_die_with_parent)

    def start(self) -> None:
        self.stop()
        receiver = self._spawn(self.dst, ["receive", "--bind", self.dst.address])
        self.procs = [receiver]
        first = receiver.stdout.readline().split()  # `port N` once it listens
        if len(first) != 2 or first[0] != "port":
            raise UserError(f"the one-way probe's receiver at {self.dst.node.name} did not start")
        sender = self._spawn(self.src, ["send", "--to", f"{self.dst.address}:{first[1]}",
                                        "--rate", str(self.owd.rate_hz), "--size", str(self.owd.size)])
        self.procs.append(sender)
        threading.Thread(target=self._read, args=(sender, self._on_sent), daemon=True).start()
        threading.Thread(target=self._read, args=(receiver, self._on_received), daemon=True).start()

    def _read(self, proc: subprocess.Popen, handle) -> None:
        for line in proc.stdout:
            with self.lock:
                handle([int(x) for x in line.split()])

    def _on_sent(self, f: list[int]) -> None:
        self.sent[f[0]] = self.sent_until = f[1]

    def _on_received(self, f: list[int]) -> None:
        if len(f) == 1:  # idle: everything that arrived before this time was told
            self.seen_until = f[0]
            return
        seq, sent, arrived, bound = f
        self.got[seq] = (arrived - sent, bound)
        self.seen_until = max(self.seen_until, arrived)

    def told(self, t1: float) -> bool:
        """Whether both ends have told what was sent before t1 and what arrived in time."""
        with self.lock:
            return self.sent_until >= t1 * 1e9 and self.seen_until >= (t1 + self.owd.lost_after_s) * 1e9

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def stop(self) -> None:
        host.terminate([p.pid for p in self.procs])
        for p in self.procs:
            p.wait()

    def period(self, t0: float, t1: float) -> tuple[list[int], list[int], int]:
        """(delays ns, bounds ns, lost) of the datagrams sent in [t0, t1), a datagram
        later than `lost_after_s` lost; forgets them."""
        lo, hi, late = int(t0 * 1e9), int(t1 * 1e9), self.owd.lost_after_s * 1e9
        with self.lock:
            seqs = [s for s, at in self.sent.items() if lo <= at < hi]
            got = [self.got[s] for s in seqs if s in self.got and self.got[s][0] <= late]
            for s in [s for s, at in self.sent.items() if at < hi]:
                self.sent.pop(s)
            self.got = {s: v for s, v in self.got.items() if s in self.sent}  # the rest is told or too late
        return [d for d, _ in got], [b for _, b in got], len(seqs) - len(got)


def owd_samples(t0: float, path: str, src: str, dst: str, delays: list[int], bounds: list[int],
                lost: int, during: str | None) -> list[Sample]:
    """The period's median one-way delay (with the largest clock bound of its datagrams)
    and loss; `during`: the tests that ran on the path meanwhile."""
    sent = len(delays) + lost
    if not sent:
        return [Sample(t0, path, src, dst, "owd_ms", None, None, "the probe sent nothing (its sender stopped)",
                       during)]
    loss = Sample(t0, path, src, dst, "loss", lost / sent, during=during)
    if not delays:
        return [Sample(t0, path, src, dst, "owd_ms", None, None, f"none of {sent} datagrams arrived", during), loss]
    bound = None if any(b < 0 for b in bounds) else max(bounds) / 1e6
    delays.sort()
    return [Sample(t0, path, src, dst, "owd_ms", delays[len(delays) // 2] / 1e6, bound, during=during), loss]


def placement_of(fed, a: str, b: str):
    """The placement of exactly the nodes a and b, a first (rank 0)."""
    from geofed.launch.placement import parse
    na, nb = fed.node(a), fed.node(b)
    code = f"{na.site}[{na.index},{nb.index}]" if na.site == nb.site else \
        f"{na.site}[{na.index}]{nb.site}[{nb.index}]"
    return parse(code, fed)


def mpi_sample(fed, a: str, b: str, mpi: Mpi, metric: str, size: int) -> Sample:
    """IMB PingPong between a and b: the latency (1 byte) or the bandwidth of `size` bytes."""
    from geofed.launch import runner
    t, path = time.time(), path_name(a, b)
    try:
        data = runner.run_ranks(fed, placement_of(fed, a, b), "pingpong",
                                {"size": size, "seconds": mpi.seconds, "iterations": 1000},
                                timeout=mpi.timeout_s, what=f"monitor pingpong {path}")
    except (JobFailed, UserError) as e:
        return Sample(t, path, a, b, metric, None, None, str(e))
    half_rtt_s = data["pairs"][0]["median_ms"] / 2e3
    return Sample(t, path, a, b, metric, half_rtt_s * 1e6 if metric == "latency_us" else size / half_rtt_s / 1e6)


def throughput_sample(plan, a: str, b: str, tp: Throughput) -> Sample:
    from geofed.testbed import probe
    t = time.time()
    try:
        mbps = probe.throughput_mbps(plan.node(a), plan.node(b), tp.streams, tp.seconds, tp.warmup_s)
    except (host.HostError, subprocess.SubprocessError, ValueError) as e:
        return Sample(t, path_name(a, b), a, b, "throughput_Mbps", None, None, str(e).splitlines()[0])
    return Sample(t, path_name(a, b), a, b, "throughput_Mbps", mbps)


class Service:
    def __init__(self, schedule: Schedule, log=print):
        from geofed.testbed import core
        self.s = schedule
        self.log = log
        self.fed = federation.load(schedule.federation)
        self.plan = core.require_up(self.fed)
        self.store = Store(schedule.store)
        self.store.set_meta("federation", str(self.fed.path))
        self.store.set_meta("judge", asdict(schedule.judge))
        self.scheduler = PathScheduler()
        self.judging = threading.Lock()
        self.running: dict[tuple[str, str], threading.Thread] = {}
        self.rng = random.Random(schedule.mpi.seed)
        self.bw_bytes = schedule.judge.bw_bytes
        self.due: dict[tuple[str, str], float] = {}  # (test, key) -> when it runs next

    def keep(self, sample: Sample) -> None:
        sid = self.store.add(sample)
        value = sample.error if sample.error else f"{sample.value:.6g}"
        self.log(f"stored sample {sid}: {sample.path} {sample.metric} {sample.src}>{sample.dst} {value}")

    def judge(self, path: str) -> None:
        with self.judging:
            judge.learn(self.store, self.s.judge, path)
            state, reason = judge.assess_path(self.store, self.s.judge, self.fed, path)
            alerts.reconcile(self.store, self.s.alerts, self.fed.name, path, state, reason, self.log)

    def spoiled(self, a: str, b: str, t0: float, t1: float) -> str | None:
        """What spoils the probe's datagrams of path a-b sent in [t0, t1), if anything:
        tests that loaded the path, a restart of a link's emulator on it (the datagrams
        in flight and those arriving meanwhile are lost)."""
        from geofed.testbed import core
        what = self.scheduler.held(path_name(a, b), t0, t1)
        links = self.fed.route(self.fed.node(a).site, self.fed.node(b).site)
        if any(stopped - self.s.owd.lost_after_s < t1 and started > t0
               for link in links for stopped, started in core.restarts(self.plan, link.name)):
            what.append("link restart")
        return ",".join(what) or None

    def keep_link_changes(self) -> None:
        """Store the live changes (`testbed set`) of the links the paths cross, as the
        testbed's state recorded them, so that the dashboard shows what moved a series."""
        from geofed.testbed import core, live
        links = {link.name for a, b in self.s.paths
                 for link in self.fed.route(self.fed.node(a).site, self.fed.node(b).site)}
        changes = [c | {"old": live.show(c["old"]), "new": live.show(c["new"])}
                   for c in (core.read_state(self.plan) or {}).get("changes", []) if c["link"] in links]
        if changes and self.store.add_link_changes(changes):
            self.log(f"link changes: {len(self.store.link_changes())} kept")

    def tests(self) -> list[tuple[str, str, float]]:
        """(test, key, every_s) of every scheduled exclusive test."""
        out = []
        if self.s.mpi.every_s:
            if self.s.mpi.random:
                out.append(("mpi", "random", self.s.mpi.every_s))
            else:
                pairs = self.s.mpi.pairs or [path_name(a, b) for a, b in self.s.paths]
                out += [("mpi", p, self.s.mpi.every_s) for p in pairs]
        if self.s.throughput.every_s:
            out += [("throughput", path_name(a, b), self.s.throughput.every_s) for a, b in self.s.paths]
        return out

    def run_test(self, test: str, key: str, due: float, every: float) -> None:
        if test == "mpi":
            pairs = [tuple(key.split("-"))] if key != "random" else \
                self.rng.sample(list(combinations([n.name for n in self.fed.nodes()], 2)), self.s.mpi.random)
            for a, b in pairs:
                for metric, size in (("latency_us", 1), ("bw_MBps", self.bw_bytes)):
                    with self.scheduler.holding({path_name(a, b)}, "mpi", loads=size > 1):
                        self.keep(mpi_sample(self.fed, a, b, self.s.mpi, metric, size))
                self.judge(path_name(a, b))
        else:
            a, b = key.split("-")
            with self.scheduler.holding({key, f"sink@{b}"}, "throughput"):
                self.keep(throughput_sample(self.plan, a, b, self.s.throughput))
            self.judge(key)
        next_t = due + every
        while next_t <= time.time():
            next_t += every  # missed rounds are missed, not run in a burst
        self.store.set_due(test, key, next_t)
        self.due[(test, key)] = next_t
        self.log(f"{test} {key} done; next at {time.strftime('%H:%M:%S', time.localtime(next_t))}")

    def dispatch(self, now: float) -> None:
        """Start every test that is due and not still running."""
        for test, key, every in self.tests():
            at = self.due.setdefault((test, key), now)
            t = self.running.get((test, key))
            if at <= now and (t is None or not t.is_alive()):
                thread = threading.Thread(target=self.run_test, args=(test, key, at, every),
                                          name=f"geofed-monitor-{test}-{key}", daemon=True)
                self.running[(test, key)] = thread
                thread.start()

    def run(self, until: float = float("inf")) -> None:
        """Serve until stopped (KeyboardInterrupt) or until the Unix time `until`."""
        s = self.s
        probes = {}
        try:
            for a, b in s.paths:
                for src, dst in ((a, b), (b, a)):
                    probes[(a, b, src, dst)] = OwdProbe(self.plan.node(src), self.plan.node(dst), s.owd)
            self.due = self.store.due()
            for (test, key), t in self.due.items():
                self.log(f"resuming: {test} {key} next at {time.strftime('%H:%M:%S', time.localtime(t))}")
            period = s.owd.period_s
            p0 = (time.time() // period + 1) * period  # the first whole period the probes see
            next_fold = time.time()
            self.log(f"serving {len(s.paths)} path(s) of {self.fed.name} into {s.store}")
            while (now := time.time()) < until:
                told = all(probe.told(p0 + period) for probe in probes.values())
                if now >= p0 + period + s.owd.lost_after_s and (told or now >= p0 + period + STALL_S):
                    for (a, b, src, dst), probe in probes.items():
                        during = self.spoiled(a, b, p0, p0 + period)
                        for sample in owd_samples(p0, path_name(a, b), src, dst, *probe.period(p0, p0 + period),
                                                  during):
                            self.keep(sample)
                        if not probe.alive():
                            self.log(f"restarting the one-way probe {src}>{dst}")
                            probe.start()
                    self.keep_link_changes()
                    for a, b in s.paths:
                        self.judge(path_name(a, b))
                    p0 += period
                self.dispatch(now)
                if now >= next_fold:
                    folded = self.store.fold(now - s.retention.raw_s, s.retention.aggregate_s)
                    if folded:
                        self.log(f"retention: {folded} raw sample(s) folded into {s.retention.aggregate_s:g} s "
                                 f"aggregates")
                    next_fold = now + s.retention.every_s
                # The schedule, not a synchronisation: wake for the next period's end or a due test.
                time.sleep(0.1)
        finally:
            for probe in probes.values():
                probe.stop()
            for thread in self.running.values():
                thread.join()
            self.store.close()


def serve(schedule: Schedule, log=print) -> int:
    # systemd's stop (SIGTERM) ends it as Ctrl-C does, probes and tests ended: the CLI's handler
    try:
        Service(schedule, log).run()
    except KeyboardInterrupt:
        log("stopped")
    return 0
