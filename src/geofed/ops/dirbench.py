"""`geofed bench directory`: `users sync` at the scale of two universities.

A private copy of ma-hd (named dirbench) gets generated homes of N users and G groups
per site (every tenth user not activated; each user in its primary group and one
more), loaded offline (slapadd, ldbadd) before the servers start. Then: the first
sync into the empty admin directory, a second one that must change nothing, and a
re-sync after a fraction of each site's users changed at home over LDAP (a third
get another login shell, a third is deactivated, a third newly activated). Each
sync's time is split into reading the homes and the admin directory (in parallel),
merging, writing to the admin server, and writing passwd and group. Targets (issue 14):
first sync under 60 s and the re-sync under 10 s at 20,000 users and 2,000 groups.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from geofed import federation, records
from geofed.errors import UserError
from geofed.ops import directory, userbase, users
from geofed.testbed import core, host

NAME = "dirbench"
FIRST_SYNC_TARGET_S = 60.0
RESYNC_TARGET_S = 10.0


def check(base, n_users: int) -> None:
    limit = base.site("M").directory.id_range - userbase.GENERATED_FIRST_ID
    if n_users > limit:
        raise UserError(f"bench directory: --users {n_users}: the generated ids must stay in a site's range "
                        f"(at most {limit} users)")


def run(base, n_users: int, n_groups: int, changed: float, progress) -> records.Record:
    """The three syncs on a private copy of `base` (ma-hd) with generated homes."""
    left = directory.read_state(NAME)
    if left is not None and host.alive(left["by"]["pid"]):
        raise UserError(f"bench directory: its servers ({NAME}) are in use by {core.describe(left['by'])}; "
                        f"wait for that run to end")
    tmp = Path(tempfile.mkdtemp(prefix="geofed-dirbench-"))
    try:
        fed = federation.load(federation.derive(base, tmp, NAME))
        homes = {"M": userbase.generated(n_users, n_groups, "ma"), "H": userbase.generated(n_users, n_groups, "hd")}
        if left is not None:
            directory.down(NAME)  # a run's servers left by a crash: these homes are loaded afresh
        t0 = time.monotonic()
        directory.up(fed, progress, homes=homes)
        up_s = time.monotonic() - t0
        runs = []
        for what in ("first sync", "no change"):
            progress(f"{what}")
            runs.append(_sync(fed, what, tmp))
        n_changed = max(3, round(n_users * changed))
        progress(f"changing {n_changed} users at each home")
        expected = _change(fed, homes, n_changed)
        runs.append(_sync(fed, f"{changed:.0%} changed", tmp))
        runs[-1]["expected_changes"] = expected
    finally:
        if directory.read_state(NAME) is not None:
            directory.down(NAME)
        shutil.rmtree(tmp)
    ok = (runs[0]["seconds"]["total"] < FIRST_SYNC_TARGET_S and runs[1]["changes"] == 0
          and runs[2]["seconds"]["total"] < RESYNC_TARGET_S and runs[2]["changes"] == expected
          and all(not r["collisions"] and not r["errors"] for r in runs))
    return records.make("directory.bench", {
        "users_per_site": n_users, "groups_per_site": n_groups, "changed_fraction": changed,
        "servers_up_s": up_s, "runs": runs, "ok": ok,
        "targets_s": {"first": FIRST_SYNC_TARGET_S, "resync": RESYNC_TARGET_S},
    }, **records.federation_meta(fed))


def _sync(fed, what: str, out: Path) -> dict:
    data = users.sync(fed, out=out)  # passwd and group too: they are part of a sync
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
    lines.append(f"targets: first sync < {d.targets_s['first']:g} s, re-sync < {d.targets_s['resync']:g} s: "
                 f"{'met' if d.ok else 'NOT met'}")
    return "\n".join(lines)
