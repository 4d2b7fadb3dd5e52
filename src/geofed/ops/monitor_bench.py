"""`geofed bench monitor`: `monitor serve`'s accelerated schedule on a private copy of
the federation for a given time, with nothing injected. Every alert it raises is a
false alarm; what it counts (probe datagrams, MPI and throughput tests, excluded
periods, events) says how much the judgement was asked and how often it erred.

The accelerated schedule compresses months of monitoring into minutes: the probe at
1000 datagrams a second in periods of 5 s (enough datagrams for a loss of 0.1 % to
show within two periods, docs/monitor.md "Detection limits"), MPI latency and
bandwidth every 20 s, throughput every 5 minutes. tests/ops/test_monitor_serve.py
injects its steps under the same schedule.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from geofed.ops import monitor_serve
from geofed.ops.monitor_store import Store

ACCELERATED = """\
federation = "{federation}"
store = "{store}"
paths = [{paths}]
[owd]
rate_hz = 1000
period_s = 5
lost_after_s = 1
[mpi]
every_s = {mpi_every_s}
bw_size = "1M"
seconds = 0.5
timeout_s = 30
[throughput]
every_s = {throughput_every_s}
seconds = 2
warmup_s = 0.5
[judge]
reference_samples = 6
reference_tolerance = 0.2  # MPI and TCP tests: a loaded host moves a 1-byte ping-pong by 10 %
[judge.tolerances]
owd_ms = 0.05  # a re-route's +10 % of the fibre must show; the probe's own noise is far below
[alerts]
{alerts}
"""
MPI_EVERY_S = 20.0
THROUGHPUT_EVERY_S = 300.0


def accelerated(federation: str | Path, store: str | Path, paths: list[str], alerts: str,
                mpi_every_s: float = MPI_EVERY_S, throughput_every_s: float = THROUGHPUT_EVERY_S) -> str:
    """The accelerated schedule's text; `alerts` the lines of its [alerts] table."""
    return ACCELERATED.format(federation=federation, store=store, paths=", ".join(f'"{p}"' for p in paths),
                              mpi_every_s=mpi_every_s, throughput_every_s=throughput_every_s, alerts=alerts)


def link_paths(fed) -> list[str]:
    """A node pair across every link: the first node of each end."""
    first = {s.code: next(n.name for n in fed.nodes() if n.site == s.code) for s in fed.sites}
    return [f"{first[link.a]}-{first[link.b]}" for link in fed.links]


def run(base, minutes: float, progress, keep: Path | None = None, **link_changes) -> dict:
    """The quiet run on a private copy of `base` (its links changed as asked); `keep`:
    a directory to leave the schedule, the store, the alerts and the service's log in."""
    from geofed.testbed import core
    core.require_root("bench monitor")
    with tempfile.TemporaryDirectory(prefix="geofed-monitor-") as tmp, \
            core.owned_copy(base, "gfmonb", progress, **link_changes) as fed:
        where = keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        hook, schedule = where / "alerts.jsonl", where / "schedule.toml"
        hook.write_text("")  # this run's alerts only
        hook_line = f'command = "(cat; echo) >> {hook}"'  # the hook reads one JSON object, no line's end
        schedule.write_text(accelerated(fed.path, where / "m.sqlite", link_paths(fed), hook_line))
        s = monitor_serve.load(schedule)
        progress(f"serving the accelerated schedule on {', '.join(monitor_serve.path_name(*p) for p in s.paths)} "
                 f"for {minutes:g} min{f' (store, alerts and log in {keep})' if keep else ''}")
        started = time.time()
        with open(where / "serve.log", "w") as log:
            monitor_serve.Service(s, log=lambda line: print(line, file=log, flush=True)).run(
                until=started + minutes * 60)
        hours = (time.time() - started) / 3600
        store = Store(s.store, create=False)
        try:
            data = tally(store, s, hours)
        finally:
            store.close()
        data["alerts_sent"] = [json.loads(line) for line in hook.read_text().splitlines()] if hook.exists() else []
    data.update(federation=base.name, link_changes=link_changes, minutes=minutes)
    return data


def tally(store: Store, s: monitor_serve.Schedule, hours: float) -> dict:
    """What a run of the schedule measured and judged, per path and per hour."""
    per_dgram = s.judge.probe_datagrams
    paths = {}
    for a, b in s.paths:
        path = monitor_serve.path_name(a, b)

        def count(where: str, *args) -> int:
            return store.rows(f"SELECT COUNT(*) FROM samples WHERE path=? AND {where}", (path, *args))[0][0]

        (lost,) = store.rows("SELECT COALESCE(SUM(ROUND(value * ?)), 0) FROM samples WHERE path=? AND metric='loss'",
                             (per_dgram, path))[0]
        periods = count("metric='loss'")
        paths[path] = {"probe_periods": periods, "excluded_periods": count("metric='loss' AND during IS NOT NULL"),
                       "datagrams": int(periods * per_dgram), "lost": int(lost),
                       "mpi_tests": count("metric='latency_us'"), "mpi_failed": count("metric='latency_us' AND error IS NOT NULL"),
                       "throughput_tests": count("metric='throughput_Mbps'"),
                       "throughput_failed": count("metric='throughput_Mbps' AND error IS NOT NULL")}
    events = [{"path": p, "state": st, "reason": r, "opened": o, "cleared": c}
              for p, st, r, o, c in store.rows("SELECT path, state, reason, opened, cleared FROM events ORDER BY id")]
    total = {k: sum(p[k] for p in paths.values()) for k in ("datagrams", "lost", "mpi_tests", "throughput_tests")}
    return {"hours": hours, "paths": paths, "events": events,
            "schedule": {"owd_rate_hz": s.owd.rate_hz, "owd_period_s": s.owd.period_s, "mpi_every_s": s.mpi.every_s,
                         "throughput_every_s": s.throughput.every_s},
            "per_hour": {"alerts": len(events) / hours, **{k: v / hours for k, v in total.items()}}}


def table(data: dict) -> str:
    sch = data["schedule"]
    lines = [f"{data['minutes']:g} min quiet on a copy of {data['federation']}"
             + "".join(f", {k} {v:g}" for k, v in data["link_changes"].items())
             + f": probe {sch['owd_rate_hz']:g}/s in {sch['owd_period_s']:g} s periods, MPI every "
             f"{sch['mpi_every_s']:g} s, throughput every {sch['throughput_every_s']:g} s",
             f"{'path':<10} {'periods':>8} {'excluded':>8} {'datagrams':>10} {'lost':>6} {'MPI tests':>9} "
             f"{'failed':>6} {'throughput':>10} {'failed':>6}"]
    for path, p in data["paths"].items():
        lines.append(f"{path:<10} {p['probe_periods']:>8} {p['excluded_periods']:>8} {p['datagrams']:>10} "
                     f"{p['lost']:>6} {p['mpi_tests']:>9} {p['mpi_failed']:>6} {p['throughput_tests']:>10} "
                     f"{p['throughput_failed']:>6}")
    ph = data["per_hour"]
    lines.append(f"per hour: {ph['alerts']:.2f} alerts, {ph['datagrams']:.0f} datagrams, {ph['mpi_tests']:.0f} MPI "
                 f"tests, {ph['throughput_tests']:.0f} throughput tests")
    lines += [f"event: {e['path']} {e['state']} at {time.strftime('%H:%M:%S', time.localtime(e['opened']))}: "
              f"{e['reason']}" for e in data["events"]]
    return "\n".join(lines)
