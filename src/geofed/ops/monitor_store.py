"""The store of `geofed monitor serve`: one SQLite file in WAL mode, every sample
committed on its own the moment it is measured (a kill -9 loses none: a committed
transaction is in the log before `commit` returns), and what the service must
remember across a restart: when each scheduled test is due next, each path's
reference levels, the open and cleared events and whether their alerts went out,
and the judgement settings `monitor status` reads; and the live changes of the
monitored links, which the dashboard draws beside the series they moved.

Retention folds raw samples older than a horizon into one row per interval (count,
errors, min, mean, max) and deletes them, in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from geofed.errors import UserError

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    t REAL NOT NULL,                -- Unix time the sample stands for (a probe period's start)
    path TEXT NOT NULL,             -- the node pair, A-B
    src TEXT NOT NULL, dst TEXT NOT NULL,
    metric TEXT NOT NULL,           -- owd_ms, loss, latency_us, bw_MBps, throughput_Mbps
    value REAL,                     -- NULL when the test failed
    bound REAL,                     -- the value's error bound in its unit (clock error), NULL: unknown or none
    error TEXT,                     -- why there is no value
    during TEXT                     -- tests that ran on the path meanwhile (a probe's period), judged apart
);
CREATE INDEX IF NOT EXISTS samples_series ON samples (path, src, dst, metric, t);
CREATE TABLE IF NOT EXISTS aggregates (
    t0 REAL NOT NULL, seconds REAL NOT NULL,
    path TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, metric TEXT NOT NULL,
    n INTEGER NOT NULL, errors INTEGER NOT NULL, min REAL, mean REAL, max REAL,
    PRIMARY KEY (t0, path, src, dst, metric)
);
CREATE TABLE IF NOT EXISTS due (test TEXT NOT NULL, key TEXT NOT NULL, next_t REAL NOT NULL,
                                PRIMARY KEY (test, key));
CREATE TABLE IF NOT EXISTS reference (
    path TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, metric TEXT NOT NULL,
    level REAL NOT NULL, spread REAL NOT NULL, n INTEGER NOT NULL, t REAL NOT NULL,
    PRIMARY KEY (path, src, dst, metric)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL,
    opened REAL NOT NULL, cleared REAL,
    alerted INTEGER NOT NULL DEFAULT 0, clear_alerted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS link_changes (   -- live changes of a monitored link (`testbed set`)
    t REAL NOT NULL, link TEXT NOT NULL,
    way TEXT NOT NULL,                      -- M->H
    key TEXT NOT NULL, old TEXT NOT NULL, new TEXT NOT NULL,
    PRIMARY KEY (t, link, way, key)
);
"""


@dataclass(frozen=True)
class Sample:
    t: float
    path: str
    src: str
    dst: str
    metric: str
    value: float | None
    bound: float | None = None
    error: str | None = None
    during: str | None = None


class Store:
    """One connection shared by the service's threads, one writer at a time."""

    def __init__(self, path: str | Path, create: bool = True):
        if not create and not Path(path).is_file():
            raise UserError(f"{path}: no such monitoring store")
        try:
            self.db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")  # committed survives a power cut too
            self.db.executescript(SCHEMA)
        except sqlite3.Error as e:
            raise UserError(f"{path}: cannot use as a monitoring store: {e}") from None
        self.lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def write(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        """One statement, committed when this returns."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                cur = self.db.execute(sql, args)
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
            return cur

    def rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.db.execute(sql, args).fetchall()

    def add(self, s: Sample) -> int:
        """Store a sample and commit it; its id."""
        return self.write("INSERT INTO samples (t, path, src, dst, metric, value, bound, error, during) "
                          "VALUES (?,?,?,?,?,?,?,?,?)",
                          (s.t, s.path, s.src, s.dst, s.metric, s.value, s.bound, s.error, s.during)).lastrowid

    def latest(self, path: str, src: str, dst: str, metric: str, n: int) -> list[Sample]:
        """The newest n samples of a series taken while no other test ran on its path, oldest first."""
        rows = self.rows("SELECT t, path, src, dst, metric, value, bound, error, during FROM samples "
                         "WHERE path=? AND src=? AND dst=? AND metric=? AND during IS NULL "
                         "ORDER BY t DESC, id DESC LIMIT ?", (path, src, dst, metric, n))
        return [Sample(*r) for r in reversed(rows)]

    def series_keys(self) -> list[tuple[str, str, str, str]]:
        return self.rows("SELECT DISTINCT path, src, dst, metric FROM samples ORDER BY path, src, dst, metric")

    def due(self) -> dict[tuple[str, str], float]:
        return {(test, key): t for test, key, t in self.rows("SELECT test, key, next_t FROM due")}

    def set_due(self, test: str, key: str, next_t: float) -> None:
        self.write("INSERT INTO due VALUES (?,?,?) ON CONFLICT (test, key) DO UPDATE SET next_t=excluded.next_t",
                   (test, key, next_t))

    def reference(self, path: str, src: str, dst: str, metric: str) -> tuple[float, float] | None:
        """(level, spread) of a series' reference."""
        rows = self.rows("SELECT level, spread FROM reference WHERE path=? AND src=? AND dst=? AND metric=?",
                         (path, src, dst, metric))
        return rows[0] if rows else None

    def set_reference(self, path: str, src: str, dst: str, metric: str, level: float, spread: float, n: int) -> None:
        self.write("INSERT OR REPLACE INTO reference VALUES (?,?,?,?,?,?,?,?)",
                   (path, src, dst, metric, level, spread, n, time.time()))

    def add_link_changes(self, changes: list[dict]) -> int:
        """Keep live changes of links as testbed/live.py records them (time, link, way,
        key, and old and new as text); those kept before are skipped. How many were new."""
        rows = [(c["time"], c["link"], c["way"], c["key"], c["old"], c["new"]) for c in changes]
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            before = self.db.total_changes
            self.db.executemany("INSERT OR IGNORE INTO link_changes VALUES (?,?,?,?,?,?)", rows)
            added = self.db.total_changes - before
            self.db.execute("COMMIT")
        return added

    def link_changes(self) -> list[tuple[float, str, str, str, str, str]]:
        """(t, link, way, key, old, new) of every live change kept, oldest first."""
        return self.rows("SELECT t, link, way, key, old, new FROM link_changes ORDER BY t, link, way, key")

    def meta(self, key: str):
        rows = self.rows("SELECT value FROM meta WHERE key=?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def set_meta(self, key: str, value) -> None:
        self.write("INSERT OR REPLACE INTO meta VALUES (?,?)", (key, json.dumps(value)))

    def fold(self, before: float, seconds: float) -> int:
        """Fold raw samples older than `before` into per-`seconds` aggregates (merged with
        what earlier folds left in the same interval) and delete them; how many."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute("""
                    INSERT INTO aggregates
                    SELECT CAST(t / :s AS INTEGER) * :s, :s, path, src, dst, metric, COUNT(value),
                           COUNT(*) - COUNT(value), MIN(value), AVG(value), MAX(value)
                    FROM samples WHERE t < :before GROUP BY 1, path, src, dst, metric
                    ON CONFLICT (t0, path, src, dst, metric) DO UPDATE SET
                        mean = (COALESCE(mean * n, 0) + COALESCE(excluded.mean * excluded.n, 0))
                               / NULLIF(n + excluded.n, 0),
                        n = n + excluded.n, errors = errors + excluded.errors,
                        min = MIN(COALESCE(min, excluded.min), COALESCE(excluded.min, min)),
                        max = MAX(COALESCE(max, excluded.max), COALESCE(excluded.max, max))""",
                                {"s": seconds, "before": before})
                n = self.db.execute("DELETE FROM samples WHERE t < ?", (before,)).rowcount
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
            return n
