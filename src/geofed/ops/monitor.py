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
from itertools import combinations
from pathlib import Path

from geofed.errors import JobFailed, UserError

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


def node_pair(fed, text: str, where: str) -> tuple[str, str]:
    """Two different nodes of `fed` written `W1-G1`; `where` names the text in an error."""
    names = {n.name for n in fed.nodes()}
    ends = tuple(str(text).strip().split("-"))
    if len(ends) != 2 or ends[0] == ends[1] or any(e not in names for e in ends):
        raise UserError(f"{where} {text!r}: expected two different nodes of {fed.name} like W1-G1")
    return ends


def pairs_for(fed, pairs: str | None, nrandom: int | None, rng: random.Random) -> list[tuple[str, str]]:
    if pairs:
        return [node_pair(fed, item, "--pairs") for item in pairs.split(",")]
    every = list(combinations([n.name for n in fed.nodes()], 2))
    return rng.sample(every, min(nrandom or 1, len(every)))


def placement_for(fed, pairs: list[tuple[str, str]]):
    """The smallest placement holding every node of the pairs (the first n of each site)."""
    from geofed.launch.placement import parse
    need: dict[str, int] = {}
    for node in {n for p in pairs for n in p}:
        n = fed.node(node)
        need[n.site] = max(need.get(n.site, 0), n.index)
    return parse("".join(f"{s}{k}" for s, k in need.items()), fed)


def sample_round(fed, pairs, budget: float, bw_size: str, hostfile: str | None, timeout: float) -> list[dict]:
    from geofed.launch import runner
    params = {"pairs": ",".join(f"{a}-{b}" for a, b in pairs), "budget": budget, "bw_size": bw_size}
    try:
        data = runner.run_ranks(fed, placement_for(fed, pairs), "matrix", params, hostfile=hostfile,
                                timeout=timeout, what="monitor sample")
    except (JobFailed, UserError) as e:
        return [{"a": a, "b": b, "error": str(e)} for a, b in pairs]
    return data["pairs"]


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
