"""Record kinds of the federation's user directory."""

from __future__ import annotations

from geofed.records import Sanity, doc, kind


@kind("directory.sync")
class DirectorySync:
    """`geofed ops users sync`: what one sync of the federation's users changed and refused."""
    dry_run: bool = doc("changes shown, not made")
    sites: dict = doc("site -> what was read there (activated, ...)")
    merged_users: int = doc("users in the merged directory")
    merged_groups: int = doc("groups in the merged directory")
    changes: list = doc("per change: op, entry, name, attributes, ...")
    errors: list = doc("failures while applying")
    collisions: list = doc("refused entries: kind, entry, name, detail, sources")
    counts: dict = doc("changes by operation and entry (add_users, ...)")
    seconds: dict = doc("read, merge, write, files, total, read_each")
    files: list = doc("passwd and group files written")

    def sanity(self) -> Sanity:
        """every change applied without an error."""
        return Sanity(not self.errors, f"{len(self.errors)} change(s) failed" if self.errors else
                      f"{len(self.changes)} change(s) applied")


@kind("directory.bench")
class DirectoryBench:
    """`geofed bench directory`: sync and re-sync at scale against targets."""
    users_per_site: int = doc("users per site")
    groups_per_site: int = doc("groups per site")
    changed_fraction: float = doc("share of users changed before the last sync")
    servers_up_s: float = doc("time to bring the servers up and load them")
    runs: list = doc("per sync: run, seconds, changes, counts, merged_users, merged_groups, collisions, errors, "
                     "expected_changes")
    ok: bool = doc("the targets met and every sync made exactly the changes expected")
    targets_s: dict = doc("first, resync: the time targets")

    def sanity(self) -> Sanity:
        """every sync made exactly the changes expected, with no refusal and no error."""
        # the first sync creates everything; each one after it must change just what was changed
        bad = [r["run"] for i, r in enumerate(self.runs) if r["collisions"] or r["errors"]
               or (i and r["changes"] != r.get("expected_changes", 0))]
        return Sanity(not bad, f"unexpected changes or errors in: {', '.join(bad)}" if bad
                      else f"{len(self.runs)} syncs as expected")
