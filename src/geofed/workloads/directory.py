"""`users sync` at the scale of two universities on a private copy of ma-hd: a first
sync, one that must change nothing, and a re-sync after changes at the homes, against
time targets (ops.dirbench, directory.bench)."""

from __future__ import annotations

import argparse

from geofed.params import Params, param
from geofed.records import Sanity
from geofed.validate import positive_float
from geofed.workloads import Context, Workload

BASE = "ma-hd"  # the federation copied: the generated homes are of its two sites' directories


def fraction(text: str) -> float:
    """A fraction above 0 and below 1."""
    v = positive_float(text)
    if v >= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction below 1, got {text!r}")
    return v


class DirectoryParams(Params):
    users: int = param(20000, "users per site")
    groups: int = param(2000, "groups per site")
    changed: float = param(0.01, "fraction of users changed before the re-sync", type=fraction)
    repeats: int = param(1, "times the three syncs run on the same loaded homes (the record: medians)")
    h_server: str = param("ad", "site H's server: Samba's AD DC, or OpenLDAP where loading Samba with that many "
                          "takes too long", choices=("ad", "ldap"))


class Directory(Workload, kind="directory.bench", Params=DirectoryParams, command="bench directory",
                needs_placement=False):
    """users sync at scale: N users and groups per site, sync and a re-sync (root)"""

    def check(self, ctx: Context, params: DirectoryParams) -> None:
        from geofed.ops import dirbench
        dirbench.check(params.users, params.groups)

    def run(self, ctx: Context, params: DirectoryParams):
        from geofed.ops import dirbench
        return dirbench.run(ctx.fed, params.users, params.groups, params.changed, ctx.progress, params.repeats,
                            params.h_server == "ad")

    def sanity(self, rec) -> Sanity:
        """every sync as expected (the record's check) and within the targets."""
        from geofed.ops import dirbench
        verdict, d = rec.sanity(), rec.data
        if verdict.ok and not d.ok:
            t, s = d.targets_s, [r["seconds"]["total"] for r in d.runs]
            return Sanity(False, f"first sync {s[0]:.1f} s = {dirbench.first_ratio(d):.2f} x the floor "
                                 f"({d.floor['seconds']:.1f} s), no change {s[1]:.1f} s, re-sync {s[-1]:.1f} s: "
                                 f"the targets are {t['first_floor_ratio']:g} x, {t['no_change']:g} s and "
                                 f"{t['resync']:g} s")
        return verdict

    def table(self, rec) -> str:
        from geofed.ops import dirbench
        return dirbench.format_table(rec)


WORKLOAD = Directory()
