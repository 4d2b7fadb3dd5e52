"""`users sync`: read the homes, merge, write the admin directory and the files.

Only what changed since the last sync where the sync's state holds (`syncstate`), else
everything (`users` reads, merges and plans; this module decides which and carries it out).
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

from geofed.federation import Federation
from geofed.ops import directory, syncstate, users
from geofed.testbed.host import HostError

# A first sync of at least this many entries into an admin directory holding none of
# ours loads them offline (slapadd) instead: 2,000 entries take well under a second
# either way, slapd's restart is a fixed cost.
OFFLINE_MIN = 2000


def sync(fed: Federation, dry_run: bool = False, out: Path | None = None, progress=lambda _m: None) -> dict:
    """Read the homes, merge, apply to the admin directory, write the files; the sync's record data.
    Only what changed since the last sync where its state holds (`syncstate`), else everything."""
    state = directory.require_up(fed)
    directory.enter(state)
    # Hundreds of thousands of dicts and strings, made and unpickled, none in a cycle:
    # the cyclic collector's passes over them are pure cost (pickle's load of the state
    # at 100,000 users per site: 11.2 s with it, 6.9 s without, on the loaded host).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _sync(fed, state, dry_run, out, progress)
    finally:
        if collecting:
            gc.enable()


def _sync(fed: Federation, state: dict, dry_run: bool, out: Path | None, progress) -> dict:
    t0 = time.monotonic()
    sites = {s.code: (s, directory.home(fed, state, s.code)) for s in fed.sites if s.directory}
    marks = syncstate.read_marks(fed, state, sites)
    summary = syncstate.load_summary(fed)
    why = syncstate.doubt(summary, marks)
    if why is None:
        try:
            return syncstate.sync_changes(fed, state, sites, marks, summary, dry_run, out, progress, t0)
        except syncstate.Doubtful as e:
            why = str(e)
    progress(f"reading everything: {why}")
    return _sync_full(fed, state, sites, marks, dry_run, out, progress, t0)


def _sync_full(fed: Federation, state: dict, sites: dict, marks: dict, dry_run: bool, out: Path | None, progress,
               t0: float) -> dict:
    homes, (owned_users, owned_groups, held), read_s = users.read_all(sites, state)
    for code, home in homes.items():
        progress(f"site {code}: {len(home.users)} users, {len(home.groups)} groups read")
    t_read = time.monotonic()
    # The cache's rows of the homes written meanwhile by a child (`syncstate.start_build`).
    building = None if dry_run else syncstate.start_build(fed, homes)
    try:
        m = users.merge(fed, homes, held)
        admin = state["servers"]["admin"]

        def fetch(kind: str, dns: list[str]) -> dict[str, dict]:
            return users.fetch_owned(admin, state["ca"], kind, dns)
        planning = users.planned(m, owned_users, owned_groups, admin["base"], fetch)
        # Nothing of ours there yet (the plan is all adds): a bulk load, if big enough; its
        # changes are made as slapadd takes them.
        offline = (not dry_run and not owned_users and not owned_groups and marks["admin"] is not None
                   and len(m.users) + len(m.groups) >= OFFLINE_MIN)
        changes = [] if offline else list(planning)
        t_plan = time.monotonic()
        settled = {}

        def settle() -> None:
            """passwd and group, and the state to keep, as the plan leaves the admin directory."""
            final = {"user": users.final_entries(m, owned_users, "user", fetch),
                     "group": users.final_entries(m, owned_groups, "group", fetch)}
            lines = {f: sorted(rows) for f, rows in users.file_lines({**held["users"], **final["user"]},
                                                                     {**held["groups"], **final["group"]}).items()}
            settled["paths"] = users.write_lines(out, lines) if out is not None else []
            owned = {kind: users.owned_after(have, changes, kind)
                     for kind, have in (("user", owned_users), ("group", owned_groups))}
            settled["state"] = syncstate.build(building, m, held, owned, lines)
        errors = []
        loaded = offline and _load_offline(fed, state, planning, len(m.users) + len(m.groups), changes,
                                           marks["admin"], settle, progress)
        changes.extend(planning)  # those an offline load did not take (it failed)
        if not dry_run and changes and not loaded:
            progress(f"writing {len(changes)} changes to the admin directory")
            errors = users.apply(admin, changes)
        t_apply = time.monotonic()
        paths = []
        if errors:
            syncstate.cancel(building)
            paths = syncstate.abandon(fed, state, out)
        elif not dry_run:
            if not settled:
                settle()
            paths = settled["paths"]
            marks = dict(marks, admin=syncstate.admin_mark(admin, state["ca"]) if changes else marks["admin"])
            syncstate.save(fed, marks, syncstate.summary_of(m.read, len(m.users), len(m.groups), m.collisions, out),
                           *settled["state"])
        seconds = {"read": t_read - t0, "merge": t_plan - t_read, "write": t_apply - t_plan,
                   "files": time.monotonic() - t_apply, "total": time.monotonic() - t0, "read_each": read_s}
        return users.result(dry_run, m.read, len(m.users), len(m.groups), changes, errors, m.collisions, seconds,
                            paths, incremental=False)
    except BaseException:
        if building is not None:
            syncstate.cancel(building)
        raise


def _load_offline(fed: Federation, state: dict, planning, count: int, changes: list, mark: list[str], meanwhile,
                  progress) -> bool:
    """The first sync's `count` adds, as `planning` makes them (each put in `changes`), loaded by
    slapadd (directory.load_admin_offline), `meanwhile` run once they are all made, while
    slapadd still loads; False where that was not done and they are still to write."""
    admin = state["servers"]["admin"]

    def entries():
        for c in planning:
            changes.append(c)
            yield c["dn"], c["attributes"], c["classes"]
    progress(f"loading {count} entries into the admin directory offline (slapadd; slapd stopped a moment)")
    try:
        done = directory.load_admin_offline(fed.name, state, entries(),
                                            lambda: syncstate.admin_mark(admin, state["ca"]) == mark, meanwhile)
    except HostError as e:  # all or nothing: ldapmodify names each refused entry
        progress(f"the offline load failed ({e}); writing the entries one by one")
        return False
    if not done:
        progress("the admin directory changed meanwhile; writing the entries one by one")
    return done
