"""`geofed monitor`: long-term link monitoring into SQLite, and level-shift events.

    geofed monitor run -f icm-task --pairs W1-G1 --interval 60 --duration 86400 --db links.sqlite
    geofed monitor show --db links.sqlite --out geofed-out/monitor

`run` takes one sample round every `interval` seconds: a short MPI job (the
`geofed.bench.matrix` rank program) measures latency and bandwidth between the
node pairs named, or between `--random K` pairs drawn anew each round (seed 001
watched random node pairs for months). Each round's rows are committed at once, so
a store stopped by Ctrl-C or a crash keeps every finished round. A round that fails
(a node unreachable, a hang stopped at its timeout) is stored as an error row and
monitoring goes on: a link that goes away is exactly what a monitor must record.

`show` reads a store, finds sustained level shifts per pair and metric
(geofed.ops.shifts), prints them and writes a `monitor.series` record for the report.
"""

from __future__ import annotations

import random
import sqlite3
import time
from itertools import combinations
from pathlib import Path

from geofed import federation, records
from geofed.errors import JobFailed, UserError
from geofed.records.ops import METRICS
from geofed.validate import nonnegative_float, nonnegative_int, positive_float, positive_int

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
    t REAL NOT NULL,              -- Unix time of the round
    federation TEXT NOT NULL,
    a TEXT NOT NULL, b TEXT NOT NULL, class TEXT,
    latency_us REAL, latency_min_us REAL, bw_MBps REAL,
    model_latency_us REAL, model_bw_MBps REAL,
    error TEXT                    -- why the round gave no numbers, else NULL
)"""


def open_db(path: str | Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(str(path))
        db.execute(SCHEMA)
    except sqlite3.Error as e:
        raise UserError(f"{path}: cannot use as a monitoring store: {e}") from None
    return db


def pairs_for(fed, pairs: str | None, nrandom: int | None, rng: random.Random) -> list[tuple[str, str]]:
    names = [n.name for n in fed.nodes()]
    if pairs:
        out = []
        for item in pairs.split(","):
            ends = tuple(item.strip().split("-"))
            if len(ends) != 2 or ends[0] == ends[1] or any(e not in names for e in ends):
                raise UserError(f"--pairs {item!r}: expected two different nodes of {fed.name} like W1-G1")
            out.append(ends)
        return out
    every = list(combinations(names, 2))
    return rng.sample(every, min(nrandom or 1, len(every)))


def placement_for(fed, pairs: list[tuple[str, str]]):
    """The smallest placement holding every node of the pairs (the first n of each site)."""
    from geofed.launch.placement import parse
    need: dict[str, int] = {}
    for node in {n for p in pairs for n in p}:
        n = fed.node(node)
        need[n.site] = max(need.get(n.site, 0), n.index)
    return parse("".join(f"{s}{k}" for s, k in need.items()), fed)


def sample_round(fed, pairs, args) -> list[dict]:
    from geofed.bench import jobs
    placement = placement_for(fed, pairs)
    argv = ["geofed.bench.matrix", "--pairs", ",".join(f"{a}-{b}" for a, b in pairs),
            "--budget", str(args.budget), "--bw-size", args.bw_size]
    try:
        rec = jobs.run_program(fed, placement, argv, hostfile=args.hostfile, timeout=args.timeout,
                               what="monitor sample", echo=False)
    except (JobFailed, UserError) as e:
        return [{"a": a, "b": b, "error": str(e)} for a, b in pairs]
    return rec.data.pairs


def cmd_run(args) -> int:
    fed = federation.load(args.federation)
    if args.count is None and args.duration is None:
        raise UserError("monitor run: give --count N or --duration SECONDS (or both): monitoring must end")
    from geofed.bench import suite
    suite.parse_size(args.bw_size)
    rng = random.Random(args.seed)
    pairs_for(fed, args.pairs, args.random, rng)  # bad pairs fail before the store is touched
    db = open_db(args.db)
    start = time.time()
    rounds = 0
    try:
        while True:
            t = time.time()
            rows = sample_round(fed, pairs_for(fed, args.pairs, args.random, rng), args)
            with db:
                db.executemany(
                    "INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [(t, fed.name, r["a"], r["b"], r.get("class"), r.get("latency_us"), r.get("latency_min_us"),
                      r.get("bw_MBps"), r.get("model_latency_us"), r.get("model_bw_MBps"), r.get("error"))
                     for r in rows])
            rounds += 1
            for r in rows:
                print(f"{time.strftime('%H:%M:%S', time.localtime(t))} {r['a']}-{r['b']} "
                      + (f"error: {r['error']}" if r.get("error") else
                         f"{r['latency_us']:.2f} us, {r['bw_MBps']:.1f} MB/s"), flush=True)
            if args.count is not None and rounds >= args.count:
                break
            next_t = start + rounds * args.interval
            if args.duration is not None and next_t - start >= args.duration:
                break
            # The schedule, not a synchronisation: rounds start every `interval` seconds.
            time.sleep(max(0.0, next_t - time.time()))
    finally:
        db.close()
    print(f"{rounds} round(s) stored in {args.db}")
    return 0


def read_series(db: sqlite3.Connection) -> dict[tuple[str, str, str], dict]:
    """(federation, a, b) -> {class, t, latency_us, bw_MBps, errors}."""
    series: dict = {}
    for row in db.execute("SELECT t, federation, a, b, class, latency_us, bw_MBps, error FROM samples ORDER BY t"):
        t, fed, a, b, pclass, lat, bw, err = row
        s = series.setdefault((fed, a, b), {"class": pclass, "t": [], "latency_us": [], "bw_MBps": [], "errors": []})
        if err:
            s["errors"].append({"t": t, "error": err})
            continue
        s["class"] = pclass
        s["t"].append(t)
        s["latency_us"].append(lat)
        s["bw_MBps"].append(bw)
    return series


def cmd_show(args) -> int:
    from geofed.ops.shifts import level_shifts
    if not Path(args.db).is_file():
        raise UserError(f"{args.db}: no such monitoring store")
    db = open_db(args.db)
    try:
        series = read_series(db)
    finally:
        db.close()
    if not series:
        raise UserError(f"{args.db}: the store has no samples yet")
    out = []
    print(f"{'pair':<10} {'metric':<11} {'samples':>7} {'errors':>6}  events")
    for (fed, a, b), s in sorted(series.items()):
        events = {}
        for metric in METRICS:
            events[metric] = level_shifts(s["t"], s[metric], run=args.run, k=args.k, rel=args.rel)
            text = "; ".join(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(e['start']))} "
                             f"{e['before']:.4g} -> {e['after']:.4g} ({(e['relative'] or 0) * 100:+.1f} %)"
                             for e in events[metric]) or "none"
            print(f"{a + '-' + b:<10} {metric:<11} {len(s['t']):>7} {len(s['errors']):>6}  {text}")
        out.append({"federation": fed, "a": a, "b": b, **s, "events": events})
    if args.out:
        rec = records.make("monitor.series", {"db": str(Path(args.db).resolve()), "run": args.run, "k": args.k,
                                              "rel": args.rel, "series": out})
        print(f"record: {records.save(rec, args.out)}")
    return 0


def register(commands, bench) -> None:
    mon = commands.add_parser("monitor", help="long-term link monitoring (SQLite) and level-shift events")
    sub = mon.add_subparsers(dest="action", required=True)
    p = sub.add_parser("run", help="sample latency and bandwidth between node pairs periodically")
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--pairs", help="node pairs like W1-G1,W2-G2")
    p.add_argument("--random", type=positive_int, help="instead: this many random node pairs, drawn anew each round")
    p.add_argument("--seed", type=nonnegative_int, help="seed for --random (reproducible draws)")
    p.add_argument("--interval", type=nonnegative_float, default=60.0, help="seconds between rounds (default 60)")
    p.add_argument("--count", type=positive_int, help="stop after this many rounds")
    p.add_argument("--duration", type=positive_float, help="stop after this many seconds")
    p.add_argument("--db", required=True, help="SQLite store (created if missing; rounds are appended)")
    p.add_argument("--budget", type=positive_float, default=0.2, help="seconds per measurement (default 0.2)")
    p.add_argument("--bw-size", default="1M", help="bandwidth message size (default 1M)")
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE'")
    p.add_argument("--timeout", type=positive_float, default=120, help="a round that takes longer is stopped and stored as an error")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("show", help="series and sustained level shifts from a store")
    p.add_argument("--db", required=True, help="SQLite store written by monitor run")
    p.add_argument("--run", type=positive_int, default=8, help="samples a shift must last (default 8)")
    p.add_argument("--k", type=positive_float, default=5.0, help="shift threshold in noise standard deviations (default 5)")
    p.add_argument("--rel", type=nonnegative_float, default=0.10, help="and at least this fraction of the level (default 0.10)")
    p.add_argument("--out", help="directory for the monitor.series record (time-series plot in the report)")
    p.set_defaults(func=cmd_show)

