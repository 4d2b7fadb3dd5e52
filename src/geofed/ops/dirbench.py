"""`geofed bench directory`: `users sync` at the scale of two universities.

A private copy of ma-hd (named dirbench) gets generated homes of N users and G groups
per site (every tenth user not activated; each user in its primary group and one
more), loaded offline (slapadd, ldbadd) before the servers start. Then: the first
sync into the empty admin directory, a second one that must change nothing, and a
re-sync after a fraction of each site's users changed at home over LDAP (a third
get another login shell, a third is deactivated, a third newly activated). Each
sync's time is split into reading the homes and the admin directory (in parallel),
merging, writing to the admin server, and writing passwd and group. The floor: the
same entries the first sync added, loaded by slapadd into a fresh database of the admin
server's configuration, timed in the same run; beside it the homes' own offline loads
(slapadd, ldbadd). Targets (issue 35) at 100,000 users and 10,000 groups per site: the
first sync within twice the floor, no change under 3 s, 1 % changed under 5 s.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import tomllib
from pathlib import Path

from geofed import federation, records
from geofed.errors import UserError
from geofed.ops import directory, userbase, users
from geofed.testbed import core, host

NAME = "dirbench"
# Targets (issue 35): the first sync within twice the floor (slapadd of the same entries
# into a fresh admin database), a sync with nothing changed under 3 s, one after 1 % of
# the users changed under 5 s.
FIRST_SYNC_FLOOR_RATIO = 2.0
NO_CHANGE_TARGET_S = 3.0
RESYNC_TARGET_S = 5.0
# Each site's id range in the private copy (ma-hd's are 100,000 wide): 100,000 users
# per site and more fit.
ID_RANGE = 1_000_000


def check(n_users: int, n_groups: int) -> None:
    limit = ID_RANGE - userbase.GENERATED_FIRST_ID
    if n_users > limit:
        raise UserError(f"bench directory: --users {n_users}: at most {limit} (the generated ids must stay "
                        f"in a site's range)")
    if n_groups > n_users:  # each group has a user whose primary group it is
        raise UserError(f"bench directory: --groups {n_groups}: at most --users ({n_users})")


def private_copy(base, tmp: Path) -> federation.Federation:
    """`base` under the benchmark's name, each site's directory with a range of ID_RANGE ids."""
    path = federation.derive(base, tmp, NAME)
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    for i, site in enumerate(s for s in doc["site"] if "directory" in s):
        site["directory"].update(offset=(i + 1) * ID_RANGE, id_range=ID_RANGE)
    path.write_text(federation.to_toml(doc))
    return federation.load(path)


def run(base, n_users: int, n_groups: int, changed: float, progress) -> records.Record:
    """The three syncs on a private copy of `base` (ma-hd) with generated homes."""
    left = directory.read_state(NAME)
    if left is not None and host.alive(left["by"]["pid"]):
        raise UserError(f"bench directory: its servers ({NAME}) are in use by {core.describe(left['by'])}; "
                        f"wait for that run to end")
    tmp = Path(tempfile.mkdtemp(prefix="geofed-dirbench-"))
    try:
        fed = private_copy(base, tmp)
        homes = {"M": userbase.generated(n_users, n_groups, "ma"), "H": userbase.generated(n_users, n_groups, "hd")}
        if left is not None:
            directory.down(NAME)  # a run's servers left by a crash: these homes are loaded afresh
        t0 = time.monotonic()
        directory.up(fed, progress, homes=homes)
        up_s = time.monotonic() - t0
        state = directory.read_state(NAME)
        homes_load = {code: state["servers"][code]["load"] for code in homes}
        progress("first sync")
        first = users.sync(fed, out=tmp)  # passwd and group too: they are part of a sync
        runs = [_summary("first sync", first)]
        progress(f"the floor: slapadd of the first sync's {len(first['changes'])} entries into a fresh admin database")
        added = [(c["dn"], {"objectClass": c["classes"], **c["attributes"]}) for c in first["changes"] if c["op"] == "add"]
        floor = {"tool": "slapadd", "entries": len(added),
                 "seconds": directory.bulk_load_floor(state, added, tmp / "floor"), "homes": homes_load}
        shutil.rmtree(tmp / "floor")
        del first, added
        progress("no change")
        runs.append(_sync(fed, "no change", tmp))
        n_changed = max(3, round(n_users * changed))
        progress(f"changing {n_changed} users at each home")
        expected = _change(fed, homes, n_changed)
        runs.append(_sync(fed, f"{changed:.0%} changed", tmp))
        runs[-1]["expected_changes"] = expected
    finally:
        if directory.read_state(NAME) is not None:
            directory.down(NAME)
        shutil.rmtree(tmp)
    ok = (runs[0]["seconds"]["total"] < FIRST_SYNC_FLOOR_RATIO * floor["seconds"] and runs[1]["changes"] == 0
          and runs[1]["seconds"]["total"] < NO_CHANGE_TARGET_S
          and runs[2]["seconds"]["total"] < RESYNC_TARGET_S and runs[2]["changes"] == expected
          and all(not r["collisions"] and not r["errors"] for r in runs))
    return records.make("directory.bench", {
        "users_per_site": n_users, "groups_per_site": n_groups, "changed_fraction": changed,
        "servers_up_s": up_s, "runs": runs, "ok": ok, "floor": floor,
        "targets_s": {"first_floor_ratio": FIRST_SYNC_FLOOR_RATIO, "no_change": NO_CHANGE_TARGET_S,
                      "resync": RESYNC_TARGET_S},
    }, **records.federation_meta(fed))


def _sync(fed, what: str, out: Path) -> dict:
    return _summary(what, users.sync(fed, out=out))  # passwd and group too: they are part of a sync


def _summary(what: str, data: dict) -> dict:
    """What the record keeps of a sync: its times and counts, not its changes."""
    return {"run": what, "seconds": data["seconds"], "changes": len(data["changes"]), "counts": data["counts"],
            "merged_users": data["merged_users"], "merged_groups": data["merged_groups"],
            "collisions": data["collisions"], "errors": data["errors"]}


def _change(fed, homes: dict, n: int) -> int:
    """Change n users at each home over LDAP; the number of merged entries this must change."""
    state = directory.read_state(NAME)
    expected = 0
    for code, home in homes.items():
        d = fed.site(code).directory
        conn = users.connect(state["servers"][code], state["ca"])
        dn = userbase.ldap_user_dn if d.kind == "ldap" else userbase.ad_user_dn
        active = [u for u in home.users if u.activated]
        inactive = [u for u in home.users if not u.activated]
        shells, gone, new = active[: n // 3], active[n // 3: 2 * (n // 3)], inactive[: n - 2 * (n // 3)]
        for u in shells:
            conn.modify(dn(d, u.name), {"loginShell": [("MODIFY_REPLACE", ["/bin/zsh"])]})
        for u in gone:
            conn.modify(dn(d, u.name), {d.activation_attribute: [("MODIFY_DELETE", [])]})
        for u in new:
            conn.modify(dn(d, u.name), {d.activation_attribute: [("MODIFY_REPLACE", [d.activation_value])]})
        conn.unbind()
        # Each user changes its entry; a deactivated or new one also its two groups' member lists.
        groups = {g.name for u in gone + new for g in home.groups if u.name in g.members}
        expected += len(shells) + len(gone) + len(new) + len(groups)
    return expected


def first_ratio(d) -> float:
    """The first sync's time over the floor's."""
    return d.runs[0]["seconds"]["total"] / d.floor["seconds"]


def format_table(rec: records.Record) -> str:
    d = rec.data
    lines = [f"users sync: {d.users_per_site} users and {d.groups_per_site} groups per site; servers up and "
             f"loaded in {d.servers_up_s:.1f} s",
             f"{'run':<14} {'read [s]':>9} {'merge [s]':>9} {'write [s]':>9} {'files [s]':>9} {'total [s]':>9} {'changes':>8} "
             f"{'users':>7} {'groups':>7}"]
    for r in d.runs:
        s = r["seconds"]
        lines.append(f"{r['run']:<14} {s['read']:>9.2f} {s['merge']:>9.2f} {s['write']:>9.2f} {s['files']:>9.2f} "
                     f"{s['total']:>9.2f} "
                     f"{r['changes']:>8} {r['merged_users']:>7} {r['merged_groups']:>7}")
    lines.append("each read [s]: " + "; ".join(f"{r['run']}: " + ", ".join(f"{k} {v:.2f}" for k, v in
                                                                      r["seconds"].get("read_each", {}).items())
                                               for r in d.runs))
    f = d.floor
    lines.append(f"floor: {f['tool']} of the first sync's {f['entries']} entries into a fresh admin database "
                 f"{f['seconds']:.2f} s; first sync / floor = {first_ratio(d):.2f}; the homes' own loads: "
                 + ", ".join(f"{code} {h['tool']} {h['entries']} entries {h['seconds']:.1f} s"
                             for code, h in f["homes"].items()))
    t = d.targets_s
    lines.append(f"targets: first sync < {t['first_floor_ratio']:g} x floor, no change < {t['no_change']:g} s, "
                 f"re-sync < {t['resync']:g} s: {'met' if d.ok else 'NOT met'}")
    return "\n".join(lines)
