"""What `users sync` keeps between runs, and the reads of what changed at each home since.

At 100,000 users per site a full sync reads every entry at both homes and in the merged
directory and merges them all again (5-6 s of Python alone for the merge and the plan).
So a sync keeps, in the directory service's root-only run directory
(/run/geofed/<federation>/services/directory/, gone with the servers), what it read of
each home, what it merged and what the merged directory then held, with a mark of each
server's state at the time:

- an OpenLDAP home: its base entry's `contextCSN` (kept by the syncprov overlay that
  replicating servers run); entries changed since carry an `entryCSN` at least as large;
- an Active Directory home: the rootDSE's `highestCommittedUSN` (and `dsServiceName`,
  the server it belongs to); entries changed since carry a larger `uSNChanged`;
- the merged directory: its `contextCSN` once the sync has written (syncprov too).

The next sync reads the marks first (three one-entry searches). A home whose mark did
not move is not read at all. One that moved is read for the users and groups changed
since (modified, added, renamed, deactivated: the search does not ask for the activation
attribute) and for the DNs alone of its activated users and POSIX groups, which name
those deleted at home (a deletion leaves no entry to find by its CSN or USN, and AD's
tombstones are hidden from a reader account). At AD a changed group's members are read
again by memberOf (a member added or removed changes the group's USN, not the user's).
Only the names that changed are merged again, with the same rules as a full merge
(`users.merge` on those names, the other merged users beside them as possible members).

Anything that makes the state doubtful falls back to a full read, never to a merge from
a stale copy: no state or an unreadable one, another version of the federation file, a
home without a mark (an OpenLDAP server without syncprov) or whose mark went back or
belongs to another server, the merged directory's mark moved (someone wrote there by
hand), a listing naming an activated entry the changes did not (a home answering
inconsistently), and a sync whose writes were refused (the state is dropped).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from geofed.federation import Federation
from geofed.ops import directory, ldapcli, users

VERSION = 1
SUMMARY = "sync.json"  # the marks and the counts: all a sync with nothing changed reads
# What was read and merged (200,000 users at 100,000 per site): pickle loads it in half
# the time JSON does here; the file is root's, in a root-only directory, written by
# this code alone.
CACHE = "sync.pickle"


class Doubtful(Exception):
    """The state cannot be trusted for this sync: read everything."""


# ---------------------------------------------------------------- marks


def home_mark(kind: str, at: dict) -> dict | None:
    """The mark of a home's state now; None where the server keeps none (a full read)."""
    if kind == "ldap":
        found = ldapcli.search(at, at["ca"], at["base"], "(objectClass=*)", ["contextCSN"], scope="base")
        csns = sorted(found[0][1].get("contextCSN", [])) if found else []
        return {"csn": csns} if csns else None
    found = ldapcli.search(at, at["ca"], "", "(objectClass=*)", ["highestCommittedUSN", "dsServiceName"],
                           scope="base")
    a = found[0][1] if found else {}
    usn = users._int(users._one(a.get("highestCommittedUSN")))
    return {"usn": usn, "server": users._one(a.get("dsServiceName"))} if usn is not None else None


def admin_mark(server: dict, ca: str) -> list[str] | None:
    found = ldapcli.search(server, ca, server["base"], "(objectClass=*)", ["contextCSN"], scope="base")
    return sorted(found[0][1].get("contextCSN", [])) or None if found else None


def read_marks(fed: Federation, state: dict, sites: dict) -> dict:
    """Every home's mark and the merged directory's, read at once."""
    with ThreadPoolExecutor(len(sites) + 1) as pool:
        homes = {code: pool.submit(home_mark, s.directory.kind, at) for code, (s, at) in sites.items()}
        admin = pool.submit(admin_mark, state["servers"]["admin"], state["ca"])
        return {"homes": {code: f.result() for code, f in homes.items()}, "admin": admin.result()}


def moved_on(old: dict | None, new: dict | None) -> bool:
    """Whether `new` is a later mark of the same server as `old` (or the same one)."""
    if old is None or new is None:
        return False
    if "usn" in old:
        return old.get("server") == new.get("server") and new["usn"] >= old["usn"]
    return "csn" in new and min(new["csn"]) >= min(old["csn"])


# ---------------------------------------------------------------- the state's files


def _dir(fed: Federation) -> Path:
    return directory.run_dir(fed.name)


def load_summary(fed: Federation) -> dict | None:
    try:
        s = json.loads((_dir(fed) / SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    return s if s.get("version") == VERSION and s.get("sha256") == fed.sha256 else None


def load_cache(fed: Federation, summary: dict) -> dict:
    try:
        with open(_dir(fed) / CACHE, "rb") as f:
            cache = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError) as e:
        raise Doubtful(f"its cache cannot be read ({e})") from None
    if not isinstance(cache, dict) or cache.get("token") != summary.get("token"):
        raise Doubtful("its cache is not of the last sync")
    return cache


def pack(cache: dict) -> tuple[str, bytes]:
    """The cache as it is saved, with the token that ties it to its summary."""
    token = secrets.token_hex(16)
    return token, pickle.dumps(dict(cache, token=token), protocol=pickle.HIGHEST_PROTOCOL)


def save(fed: Federation, marks: dict, summary: dict, packed: tuple[str, bytes]) -> None:
    """Both files, the cache first (each replaced whole: a crash between them leaves a
    summary whose token the cache does not hold)."""
    d = _dir(fed)
    token, data = packed
    for name, text in ((CACHE, data), (SUMMARY, json.dumps(dict(summary, version=VERSION, sha256=fed.sha256,
                                                                marks=marks, token=token)).encode())):
        tmp = d / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(text)
        tmp.replace(d / name)


def drop(fed: Federation) -> None:
    """Forget the state: the next sync reads everything."""
    for name in (SUMMARY, CACHE):
        (_dir(fed) / name).unlink(missing_ok=True)


def abandon(fed: Federation, state: dict, out: Path | None) -> list[Path]:
    """After refused writes the admin directory is not what a state would say: the state is
    dropped (the next sync reads everything), passwd and group written from the admin
    directory as it is."""
    drop(fed)
    return users.files_from_admin(state, out) if out is not None else []


def files_digest(out: Path) -> str | None:
    """The digest of passwd and group in `out` as they are now; None if one is missing."""
    h = hashlib.sha256()
    for name in ("passwd", "group"):
        try:
            h.update((out / name).read_bytes())
        except OSError:
            return None
        h.update(b"\0")
    return h.hexdigest()


def summary_of(read: dict, merged_users: int, merged_groups: int, collisions: list, out: Path | None) -> dict:
    """What a sync that finds nothing changed reports (the state's summary)."""
    return {"sites": read, "merged_users": merged_users, "merged_groups": merged_groups, "collisions": collisions,
            "files": {"at": str(out), "digest": files_digest(out)} if out is not None else None}


# ---------------------------------------------------------------- the homes' changes


@dataclass
class HomeChanges:
    users: list[dict]  # changed since the mark (activated or not)
    groups: list[dict]  # changed since the mark (POSIX or not: gid None)
    user_dns: set[str]  # every activated user now (lower case)
    group_dns: set[str]  # every POSIX group now (lower case)
    members: dict[str, list[str]]  # AD: user DN -> memberOf, for the members of the changed groups


def read_changes(at: dict, d, old: dict) -> HomeChanges:
    """What changed at a home since its mark `old`, read at once (each its own ldapsearch)."""
    base, ca = at["base"], at["ca"]
    if d.kind == "ldap":
        since = f"(entryCSN>={min(old['csn'])})"
        reads = {"users": (f"(&(objectClass=posixAccount){since})", users.ldap_user_attrs(d)),
                 "groups": (f"(&{users.LDAP_GROUP_FILTER}{since})", users.LDAP_GROUP_ATTRS),
                 "user_dns": (users.ldap_user_filter(d), ["1.1"]),
                 "group_dns": (users.LDAP_GROUP_FILTER, ["1.1"])}
    else:
        since = f"(uSNChanged>={old['usn'] + 1})"
        reads = {"users": (f"(&{users.AD_USER_CLASS}{since})", users.ad_user_attrs(d)),
                 "groups": (f"(&(objectClass=group){since})", users.AD_GROUP_ATTRS),
                 "user_dns": (users.ad_user_filter(d), ["1.1"]),
                 "group_dns": (users.AD_GROUP_FILTER, ["1.1"])}
    with ThreadPoolExecutor(len(reads)) as pool:
        found = {k: pool.submit(ldapcli.search, at, ca, base, flt, attrs) for k, (flt, attrs) in reads.items()}
        found = {k: f.result() for k, f in found.items()}
    if d.kind == "ldap":
        changed_users = [users.ldap_user(dn, a, d) for dn, a in found["users"]]
        changed_groups = [users.ldap_group(dn, a) for dn, a in found["groups"]]
    else:
        changed_users = [users.ad_user(dn, a, d) for dn, a in found["users"]]
        changed_groups = [users.ad_group(dn, a) for dn, a in found["groups"]]
    user_dns = {dn.lower() for dn, _ in found["user_dns"]}
    group_dns = {dn.lower() for dn, _ in found["group_dns"]}
    members = {}
    if d.kind == "ad":
        # The users (activated) of the changed groups, with all their groups.
        dns = [g["dn"] for g in changed_groups if g["dn"].lower() in group_dns]
        for i in range(0, len(dns), users.FETCH):
            flt = "(|" + "".join(f"(memberOf={_escape(dn)})" for dn in dns[i:i + users.FETCH]) + ")"
            for dn, a in ldapcli.search(at, ca, base, f"(&{users.ad_user_filter(d)}{flt})", ["memberOf"]):
                members[dn.lower()] = [g.lower() for g in a.get("memberOf", [])]
    return HomeChanges(changed_users, changed_groups, user_dns, group_dns, members)


def _escape(value: str) -> str:
    from ldap3.utils.conv import escape_filter_chars
    return escape_filter_chars(value)


def apply_changes(home: dict, ch: HomeChanges, kind: str) -> tuple[set[str], set[str]]:
    """Bring a cached home ({"users": {dn: user}, "groups": {dn: group}}, DNs in lower
    case) to what the home holds now; the user names and the group names (unprefixed,
    lower case) whose entries changed, before or after."""
    names, group_names = set(), set()
    cached_users, cached_groups = home["users"], home["groups"]
    for u in ch.users:
        key = u["dn"].lower()
        old = cached_users.pop(key, None)
        if old is not None:
            names.add(old["name"])
        if u["activated"] and key in ch.user_dns:
            cached_users[key] = u
            names.add(u["name"])
    for key in [k for k in cached_users if k not in ch.user_dns]:  # deleted at home
        names.add(cached_users.pop(key)["name"])
    if len(cached_users) != len(ch.user_dns):
        raise Doubtful("a home lists activated users its changes did not name")
    for g in ch.groups:
        key = g["dn"].lower()
        old = cached_groups.pop(key, None)
        if old is not None:
            group_names.add(old["name"].lower())
        if g["gid"] is not None and key in ch.group_dns:
            cached_groups[key] = g
            group_names.add(g["name"].lower())
    for key in [k for k in cached_groups if k not in ch.group_dns]:
        group_names.add(cached_groups.pop(key)["name"].lower())
    if len(cached_groups) != len(ch.group_dns):
        raise Doubtful("a home lists groups its changes did not name")
    if kind == "ad":
        changed = {g["dn"].lower() for g in ch.groups}
        for key, u in cached_users.items():
            if key in ch.members:
                u["member_of"] = ch.members[key]
            elif changed.intersection(u["member_of"]):
                u["member_of"] = [g for g in u["member_of"] if g not in changed]
    return names, group_names


def home_read(kind: str, cached: dict) -> users.HomeRead:
    """A cached home as a full read returns it."""
    us, gs = list(cached["users"].values()), [dict(g) for g in cached["groups"].values()]
    if kind == "ad":
        users.ad_members(us, gs)
    return users.HomeRead(us, gs)


def cache_home(read: users.HomeRead) -> dict:
    return {"users": {u["dn"].lower(): u for u in read.users if u["activated"]},
            "groups": {g["dn"].lower(): g for g in read.groups if g["gid"] is not None}}


# ---------------------------------------------------------------- the incremental sync


def doubt(summary: dict | None, marks: dict) -> str | None:
    """Why the last sync's state cannot be used now; None when it can."""
    if summary is None:
        return "no state of an earlier sync (or of another version of the federation file)"
    if marks["admin"] is None or summary["marks"]["admin"] != marks["admin"]:
        return "the merged directory changed since the last sync (or keeps no contextCSN)"
    for code, mark in marks["homes"].items():
        if not moved_on(summary["marks"]["homes"].get(code), mark):
            return f"site {code} keeps no mark of its changes, or its mark went back"
    return None


def sync_changes(fed: Federation, state: dict, sites: dict, marks: dict, summary: dict, dry_run: bool,
                 out: Path | None, progress, t0: float) -> dict:
    """A sync from the last one's state: the homes whose mark moved read for their changes,
    the names those touch merged again, the rest kept. Raises Doubtful where the state
    turns out not to hold."""
    old = summary["marks"]
    files_now = files_digest(out) if out is not None else None
    files_ok = out is None or summary["files"] == {"at": str(out), "digest": files_now}
    if marks == old and files_ok:
        progress("nothing changed at any home nor in the merged directory")
        seconds = dict.fromkeys(("merge", "write", "files"), 0.0)
        t = time.monotonic() - t0
        return users.result(dry_run, summary["sites"], summary["merged_users"], summary["merged_groups"], [], [],
                            summary["collisions"], dict(seconds, read=t, total=t, read_each={}),
                            [out / "passwd", out / "group"] if out is not None else [], incremental=True)
    cache = load_cache(fed, summary)
    moved = {code: (s, at) for code, (s, at) in sites.items() if marks["homes"][code] != old["homes"][code]}
    found = {}
    if moved:
        with ThreadPoolExecutor(len(moved)) as pool:
            found = {code: pool.submit(users._timed, read_changes, at, s.directory, old["homes"][code])
                     for code, (s, at) in moved.items()}
            found = {code: f.result() for code, f in found.items()}
    read_s = {code: t for code, (_, t) in found.items()}
    names: set[str] = set()  # user names touched at any home
    group_names: set[str] = set()  # merged group names touched
    for code, (ch, _) in found.items():
        touched, groups = apply_changes(cache["homes"][code], ch, sites[code][0].directory.kind)
        progress(f"site {code}: {len(ch.users)} users and {len(ch.groups)} groups changed since the last sync")
        names |= touched
        group_names |= {sites[code][0].directory.prefix + g for g in groups}
    t_read = time.monotonic()
    prior = cache["merge"]
    reads = {code: home_read(s.directory.kind, cache["homes"][code]) for code, (s, _) in sites.items()}
    # Groups that list a touched user now, or listed one when merged last time.
    group_names |= {n for n, g in prior["groups"].items() if names.intersection(ldapcli.values(g.get("memberUid")))}
    for code, (s, _) in sites.items():
        group_names |= {s.directory.prefix + g["name"].lower() for g in reads[code].groups
                        if names.intersection(m.lower() for m in g["members"])}
    sub_homes = {code: users.HomeRead([u for u in reads[code].users if u["name"] in names],
                                      [g for g in reads[code].groups
                                       if s.directory.prefix + g["name"].lower() in group_names])
                 for code, (s, _) in sites.items()}
    outside = {n: u for n, u in prior["users"].items() if n not in names}
    held = cache["held"]
    sub = users.merge(fed, sub_homes, held, outside)
    admin = state["servers"]["admin"]

    def fetch(kind: str, dns: list[str]) -> dict[str, dict]:
        return users.fetch_owned(admin, state["ca"], kind, dns)
    owned = cache["owned"]
    changes = users.plan(sub, {n: owned["user"][n] for n in names if n in owned["user"]},
                         {n: owned["group"][n] for n in group_names if n in owned["group"]}, admin["base"], fetch)
    merged = {"users": {**outside, **{n: u["_site"] for n, u in sub.users.items()}},
              "groups": {**{n: g for n, g in prior["groups"].items() if n not in group_names}, **sub.groups},
              "refused_users": (prior["refused_users"] - names) | sub.refused_users,
              "refused_groups": (prior["refused_groups"] - group_names) | sub.refused_groups,
              "collisions": [c for c in prior["collisions"]
                             if c["name"] not in (names if c["entry"] == "user" else group_names)] + sub.collisions,
              "want": {kind: {**{n: w for n, w in prior["want"][kind].items() if n not in touched},
                              **sub.want(kind)}
                       for kind, touched in (("user", names), ("group", group_names))}}
    read = {code: {"activated": len(cache["homes"][code]["users"]), "groups": len(cache["homes"][code]["groups"])}
            for code in sites}
    t_plan = time.monotonic()
    errors = []
    if not dry_run and changes:
        progress(f"writing {len(changes)} changes to the admin directory")
        errors = users.apply(admin, changes)
    t_apply = time.monotonic()
    paths = []
    if errors:
        paths = abandon(fed, state, out)
    elif not dry_run:
        for kind, touched, refused in (("user", names, sub.refused_users), ("group", group_names, sub.refused_groups)):
            final, have, want = cache["final"][kind], owned[kind], sub.want(kind)
            for name in touched:
                if name in refused and name in have:
                    continue  # a refused name's entry stays as it was
                if name in want:
                    final[name] = want[name]
                else:
                    final.pop(name, None)
            owned[kind] = users.owned_after(have, changes, kind)
        if out is not None and (changes or not files_ok):
            paths = users.write_files(out, {**held["users"], **cache["final"]["user"]},
                                      {**held["groups"], **cache["final"]["group"]})
        elif out is not None:
            paths = [out / "passwd", out / "group"]
        cache["merge"] = merged
        marks = dict(marks, admin=admin_mark(admin, state["ca"]) if changes else marks["admin"])
        save(fed, marks, summary_of(read, len(merged["users"]), len(merged["groups"]), merged["collisions"], out),
             pack(cache))
    seconds = {"read": t_read - t0, "merge": t_plan - t_read, "write": t_apply - t_plan,
               "files": time.monotonic() - t_apply, "total": time.monotonic() - t0, "read_each": read_s}
    return users.result(dry_run, read, len(merged["users"]), len(merged["groups"]), changes, errors,
                        merged["collisions"], seconds, paths, incremental=True)
