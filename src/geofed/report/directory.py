"""Report section for `geofed ops users sync` and `geofed bench directory`: what each sync
changed and refused, and the times at scale."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from geofed.records import Record
from geofed.report import esc, num, section, table


@section("directory.sync", "User directory: syncs of the federation's users", order=70)
def syncs(recs: list[Record], outdir: Path) -> str:
    rows, refused = [], []
    for r in recs:
        d = r.data
        c = d.counts
        rows.append([r.created, r.meta.get("federation", "-"),
                     ", ".join(f"{code}: {s['activated']}" for code, s in d.sites.items()),
                     d.merged_users, d.merged_groups,
                     f"+{c['add_users']} ~{c['modify_users']} -{c['delete_users']}",
                     f"+{c['add_groups']} ~{c['modify_groups']} -{c['delete_groups']}",
                     len(d.collisions), num(d.seconds["total"], ".2f")])
        refused += [[r.created, x["kind"], x["entry"], x["name"], x["detail"], "; ".join(x["sources"])]
                    for x in d.collisions]
    out = table(["when", "federation", "activated per site", "users", "groups", "user changes",
                 "group changes", "refused", "seconds"], rows)
    if refused:
        out += "<h3>Refused</h3>" + table(["when", "kind", "entry", "name", "why", "at home"], refused)
    return out


def _targets(d) -> str:
    """The time targets as the run set them: against the bulk-load floor (version 2) or in seconds."""
    t = d.targets_s
    if "first_floor_ratio" not in t:  # version 1
        return f"first sync &lt; {t['first']:g} s, re-sync &lt; {t['resync']:g} s"
    return (f"first sync &lt; {t['first_floor_ratio']:g} &times; the floor ({esc(d.floor.get('tool', ''))} of "
            f"{d.floor.get('entries', 0)} entries in {d.floor.get('seconds', 0):.2f} s), no change &lt; "
            f"{t['no_change']:g} s, 1 % changed &lt; {t['resync']:g} s")


@section("directory.bench", "User directory at scale: sync and re-sync", order=71, each=True)
def bench(r: Record, i: int, outdir: Path) -> Iterator[str]:
    d = r.data
    yield (f"<p class='meta'>{d.users_per_site} users and {d.groups_per_site} groups per site; servers up and "
           f"loaded in {d.servers_up_s:.1f} s; targets: {_targets(d)}: {'met' if d.ok else 'NOT met'}</p>")
    yield table(["run", "read [s]", "merge [s]", "write [s]", "files [s]", "total [s]", "changes", "users", "groups"],
                [[x["run"], num(x["seconds"]["read"], ".2f"), num(x["seconds"]["merge"], ".2f"),
                  num(x["seconds"]["write"], ".2f"), num(x["seconds"].get("files"), ".2f"),
                  num(x["seconds"]["total"], ".2f"), x["changes"], x["merged_users"], x["merged_groups"]]
                 for x in d.runs])
