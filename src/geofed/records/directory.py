"""Record kinds of the federation's user directory."""

from __future__ import annotations

from geofed.records import Sanity, kind


@kind("directory.sync", version=2, added={"incremental": False})
class DirectorySync:
    """`geofed ops users sync`: what one sync of the federation's users changed and refused.

    Attributes:
        dry_run: changes shown, not made
        incremental: only what changed since the last sync was read and merged (its state held); false in
            version 1
        sites: site -> what was read there (activated, ...)
        merged_users: users in the merged directory
        merged_groups: groups in the merged directory
        changes: per change: op, entry, name, attributes, ...
        errors: failures while applying
        collisions: refused entries: kind, entry, name, detail, sources
        counts: changes by operation and entry (add_users, ...)
        seconds: read, merge, write, files, total, read_each
        files: passwd and group files written
    """
    dry_run: bool
    incremental: bool
    sites: dict
    merged_users: int
    merged_groups: int
    changes: list
    errors: list
    collisions: list
    counts: dict
    seconds: dict
    files: list

    def sanity(self) -> Sanity:
        """every change applied without an error."""
        return Sanity(not self.errors, f"{len(self.errors)} change(s) failed" if self.errors else
                      f"{len(self.changes)} change(s) applied")


@kind("directory.bench", version=2, added={"floor": {}})
class DirectoryBench:
    """`geofed bench directory`: sync and re-sync at scale against targets.

    Attributes:
        users_per_site: users per site
        groups_per_site: groups per site
        changed_fraction: share of users changed before the last sync
        servers_up_s: time to bring the servers up and load them
        runs: per sync: run, seconds, changes, counts, merged_users, merged_groups, collisions, errors,
            expected_changes
        ok: the targets met and every sync made exactly the changes expected
        targets_s: first_floor_ratio (the first sync's time over the floor's), no_change, resync: the targets
        floor: tool, entries, seconds: the first sync's entries bulk-loaded offline into a fresh admin
            database (slapadd), timed in the same run; homes: each home's own offline load (tool, entries,
            seconds); empty in version 1
    """
    users_per_site: int
    groups_per_site: int
    changed_fraction: float
    servers_up_s: float
    runs: list
    ok: bool
    targets_s: dict
    floor: dict

    def sanity(self) -> Sanity:
        """every sync made exactly the changes expected, with no refusal and no error."""
        # the first sync creates everything; each one after it must change just what was changed
        bad = [r["run"] for i, r in enumerate(self.runs) if r["collisions"] or r["errors"]
               or (i and r["changes"] != r.get("expected_changes", 0))]
        return Sanity(not bad, f"unexpected changes or errors in: {', '.join(bad)}" if bad
                      else f"{len(self.runs)} syncs as expected")
