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
attribute) and for what was deleted there, which leaves no entry to find by its CSN or
USN: an OpenLDAP home whose syncprov keeps a session log names the entryUUIDs of the
activated users and POSIX groups that left since the mark (an RFC 4533 refresh from a
cookie of it); any other home is listed, the DNs alone of its activated users and POSIX
groups (AD's tombstones are hidden from a reader account). At AD a changed group's members are read
again by memberOf (a member added or removed changes the group's USN, not the user's).
Only the names that changed are merged again, with the same rules as a full merge
(`users.merge` on those names, the other merged users beside them as possible members).

The state is two files: `sync.json` (the marks, the counts, a token) and `sync.sqlite`
(the homes' entries, their group memberships indexed by member, the merged names with
the admin directory's entries of sync, and the lines of passwd and group, a row each,
with the same token). A full sync writes the cache afresh; an incremental one changes only
the rows its changes touch, in one transaction, and rewrites passwd and group from the
lines in their order.

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
import secrets
import signal
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from geofed.federation import Federation
from geofed.ops import directory, ldapcli, users
from geofed.testbed.host import HostError

VERSION = 4  # 3: the homes' entryUUIDs kept (what a refresh names); 4: merged and owned names one table
SUMMARY = "sync.json"  # the marks and the counts: all a sync with nothing changed reads
# What was read, merged and written, an entry a row (SQLite), so that a sync after a few
# changes reads and rewrites only the rows they touch: version 1 kept it in one pickle,
# loaded and written whole by every such sync (105 MB at 100,000 users per site, three
# quarters of the 1 % sync's time).
CACHE = "sync.sqlite"
OLD_CACHE = "sync.pickle"  # version 1's: its summary is refused, the file removed


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


# The cache's tables. Keys are DNs in lower case; names of home groups in lower case
# (`lname`) as the merge prefixes them. home_member: a home's group memberships as the
# merge sees them (an OpenLDAP group's memberUid in lower case; at AD the cached users'
# memberOf), looked up by member for the groups a touched user is in. merged: the merged
# users' and groups' sites (NULL: not merged) and the admin directory's entries of sync
# (DN and digest; NULL: none), a row for both, as they mostly are the same names (a
# refused name keeps its entry; a table each held all 200,000 names of a first sync
# twice); line: passwd's and group's lines (the hand-made entries' too), in the files' order.
TABLES = """
CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
CREATE TABLE home_user(site TEXT, key TEXT, name TEXT, dn TEXT, uid INTEGER, gid INTEGER, gecos TEXT, home TEXT,
                       shell TEXT, uuid TEXT, PRIMARY KEY (site, key)) WITHOUT ROWID;
CREATE TABLE home_group(site TEXT, key TEXT, lname TEXT, name TEXT, dn TEXT, gid INTEGER, uuid TEXT,
                        PRIMARY KEY (site, key)) WITHOUT ROWID;
CREATE TABLE home_member(site TEXT, grp TEXT, name TEXT, PRIMARY KEY (site, grp, name)) WITHOUT ROWID;
CREATE TABLE merged(kind TEXT, name TEXT, site TEXT, dn TEXT, digest TEXT, PRIMARY KEY (kind, name)) WITHOUT ROWID;
CREATE TABLE line(file TEXT, id INTEGER, name TEXT, text TEXT, PRIMARY KEY (file, id, name)) WITHOUT ROWID;
"""
# Made after the rows go in (faster than kept up row by row): the homes' with their rows
# (`start_build`), the lines' with theirs.
HOME_INDEXES = ["CREATE INDEX home_user_name ON home_user(name)",
                "CREATE INDEX home_group_lname ON home_group(site, lname)",
                "CREATE INDEX home_member_name ON home_member(name, site)"]
LINE_INDEX = "CREATE INDEX line_name ON line(file, name)"
# How a full sync's homes go in: the memberships a group at a time, its members as one
# JSON list that SQLite splits (400,000 rows at 100,000 users per site, each bound from
# Python, took about twice as long).
HOME_INSERTS = {"home_user": "INSERT INTO home_user VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                "home_group": "INSERT INTO home_group VALUES (?, ?, ?, ?, ?, ?, ?)",
                "home_member": "INSERT INTO home_member SELECT ?, ?, value FROM json_each(?)"}
MERGED_INSERT = "INSERT INTO merged VALUES (?, ?, ?, ?, ?)"
FILES = {"user": "passwd", "group": "group"}


def _connect(path: Path, mode: str) -> sqlite3.Connection:
    """The cache at `path` (`mode` "rw": as it is, "rwc": made if missing), its
    transactions by hand (BEGIN, COMMIT) and without fsync: it lives under /run, as the
    servers' data does, and a crash leaves a cache the summary's token does not name."""
    db = sqlite3.connect(f"{path.as_uri()}?mode={mode}", uri=True, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")  # raises where the file is no SQLite database
    return db


def open_cache(fed: Federation, summary: dict) -> sqlite3.Connection:
    """The last sync's cache, in a transaction (closed without COMMIT, nothing in it changes)."""
    path = _dir(fed) / CACHE
    if not path.exists():
        raise Doubtful("its cache is gone")
    db = None
    try:
        db = _connect(path, "rw")
        db.execute("BEGIN IMMEDIATE")
        token = meta(db, "token")
    except (sqlite3.DatabaseError, TypeError, ValueError) as e:  # not SQLite, no such table or row, not JSON
        if db is not None:
            db.close()
        raise Doubtful(f"its cache cannot be read ({e})") from None
    if token != summary.get("token"):
        db.close()
        raise Doubtful("its cache is not of the last sync")
    db.execute("CREATE TEMP TABLE touched(kind TEXT, name TEXT, PRIMARY KEY (kind, name)) WITHOUT ROWID")
    return db


def meta(db: sqlite3.Connection, key: str):
    """A value of the cache's own (token, held, collisions, refused_users, refused_groups)."""
    return json.loads(db.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()[0])


def set_meta(db: sqlite3.Connection, **values) -> None:
    """Set values of the cache's own (JSON)."""
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in values.items()])


def _home_rows(code: str, kind: str, read: users.HomeRead) -> dict[str, list[tuple]]:
    """A full read of a home as `HOME_INSERTS` takes it (its activated users, its POSIX
    groups, their members)."""
    groups = {g["dn"].lower(): g for g in read.groups if g["gid"] is not None}
    active = [u for u in read.users if u["activated"]]
    if kind == "ad":
        members: dict[str, set[str]] = {}
        for u in active:
            for g in u["member_of"]:
                if g in groups:
                    members.setdefault(g, set()).add(u["name"])
    else:
        members = {key: {m.lower() for m in g["members"]} for key, g in groups.items()}
    # In the key's order: SQLite appends to the table's B-tree instead of inserting here and there.
    return {"home_user": [_user_row(code, u) for u in active],
            "home_group": [_group_row(code, g) for g in groups.values()],
            "home_member": [(code, key, json.dumps(sorted(members[key]))) for key in sorted(members)]}


def _user_row(code: str, u: dict) -> tuple:
    return code, u["dn"].lower(), u["name"], u["dn"], u["uid"], u["gid"], u["gecos"], u["home"], u["shell"], u.get("uuid")


def _group_row(code: str, g: dict) -> tuple:
    return code, g["dn"].lower(), g["name"].lower(), g["name"], g["dn"], g["gid"], g.get("uuid")


@dataclass
class Building:
    """A full sync's cache as it is written beside the last one: the homes' rows by a
    child process (`start_build`), the rest by `build` once the merge is written."""
    path: Path
    pid: int | None  # the child writing the homes' rows, until it is waited for


def start_build(fed: Federation, homes: dict[str, users.HomeRead]) -> Building:
    """Begin a full sync's cache with the homes' rows (600,000 of its 1.2 million at 100,000
    users per site), written by a forked child while this process merges and makes the
    entries (the merge takes one core, the child the other). `build`
    finishes it, `cancel` throws it away."""
    path = _dir(fed) / f".{CACHE}.tmp"
    path.unlink(missing_ok=True)
    pid = os.fork()
    if pid == 0:  # the child: never back into the caller's frames, whatever happens
        status = 1
        try:
            # Below the sync's own processes: slapadd, which the first sync waits for, shares
            # the two cores with this child and the parent making its LDIF.
            os.nice(10)
            db = _connect(path, "rwc")
            # A new file, thrown away if this fails: no rollback journal; and its pages kept in
            # memory while the rows go in (the default cache of 2 MB holds a sliver of 100 MB).
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA cache_size = -262144")
            db.executescript(TABLES)
            db.execute("BEGIN")
            for code, read in homes.items():
                for table, rows in _home_rows(code, fed.site(code).directory.kind, read).items():
                    db.executemany(HOME_INSERTS[table], rows)
            for index in HOME_INDEXES:
                db.execute(index)
            db.execute("COMMIT")
            db.close()
            status = 0
        except BaseException as e:  # noqa: BLE001 (Ctrl-C too: the parent cleans up)
            os.write(2, f"geofed: the sync's cache of the homes: {e}\n".encode())
        finally:
            os._exit(status)
    return Building(path, pid)


def _wait(b: Building) -> None:
    """Wait for the child writing the homes' rows; HostError where it failed."""
    status = os.waitstatus_to_exitcode(os.waitpid(b.pid, 0)[1])
    b.pid = None  # only once waited for: interrupted before, `cancel` still stops it
    if status != 0:
        raise HostError(f"writing the sync's cache {b.path} failed (status {status})")


def cancel(b: Building) -> None:
    """Stop writing the cache and remove what was written (a sync that failed or was refused)."""
    if b.pid is not None:
        os.kill(b.pid, signal.SIGKILL)
        os.waitpid(b.pid, 0)
        b.pid = None
    b.path.unlink(missing_ok=True)


def build(b: Building, m: users.Merge, held: dict, owned: dict,
          lines: dict[str, list[tuple[int, str, str]]]) -> tuple[str, Path]:
    """The full sync's cache `b` finished with what was merged and written, and the token
    that ties it to its summary (`save` puts it in its place). `owned`: kind -> {name:
    {"dn", "geofedDigest"}} as the plan leaves them; `lines`: file -> (id, name, line) of
    passwd and group."""
    _wait(b)
    token = secrets.token_hex(16)
    db = _connect(b.path, "rw")
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA cache_size = -262144")
        db.execute("BEGIN")
        for kind, entries in (("user", m.users), ("group", m.groups)):
            db.executemany(MERGED_INSERT, _merged_rows(kind, entries, owned[kind]))
        for file, rows in lines.items():
            db.executemany("INSERT INTO line VALUES (?, ?, ?, ?)", ((file, *row) for row in rows))
        set_meta(db, token=token, held={k: {str(n): v for n, v in d.items()} for k, d in held.items()},
                 collisions=m.collisions, refused_users=sorted(m.refused_users),
                 refused_groups=sorted(m.refused_groups))
        db.execute(LINE_INDEX)
        db.execute("COMMIT")
    finally:
        db.close()
    return token, b.path


def _merged_rows(kind: str, entries: dict, have: dict) -> list[tuple]:
    """The merged table's rows of a kind: the merged `entries` and the owned ones (`have`)."""
    rows = [(kind, n, entries[n]["geofedSite"] if n in entries else None, h["dn"], h["geofedDigest"])
            for n, h in have.items()]
    rows += [(kind, n, e["geofedSite"], None, None) for n, e in entries.items() if n not in have]
    rows.sort()  # in the key's order (SQLite appends to the B-tree)
    return rows


def _held(db: sqlite3.Connection) -> dict:
    """The hand-made entries of the admin directory as the last full read found them (the
    merged directory's mark has not moved since: they are as they were)."""
    held = meta(db, "held")
    return dict(held, uids={int(k): v for k, v in held["uids"].items()},
                gids={int(k): v for k, v in held["gids"].items()})


def save(fed: Federation, marks: dict, summary: dict, token: str, built: Path | None = None) -> None:
    """The summary, naming the cache by its token; a full sync's cache (`built`) put in
    place first. A crash between them leaves a summary whose token the cache does not hold."""
    d = _dir(fed)
    if built is not None:
        built.replace(d / CACHE)
    (d / OLD_CACHE).unlink(missing_ok=True)
    tmp = d / f".{SUMMARY}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(dict(summary, version=VERSION, sha256=fed.sha256, marks=marks, token=token)))
    tmp.replace(d / SUMMARY)


def drop(fed: Federation) -> None:
    """Forget the state: the next sync reads everything."""
    for name in (SUMMARY, CACHE, OLD_CACHE, f".{CACHE}.tmp"):
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
    # Every activated user and POSIX group now (DNs, lower case): the listing that names
    # what was deleted; None where the home named what left instead (`*_left`).
    user_dns: set[str] | None
    group_dns: set[str] | None
    members: dict[str, list[str]]  # AD: user DN -> memberOf, for the members of the changed groups
    users_left: set[str] = field(default_factory=set)  # entryUUIDs that left the activated users
    groups_left: set[str] = field(default_factory=set)  # and the POSIX groups


def read_changes(at: dict, d, old: dict, by_uuid: bool = False) -> HomeChanges:
    """What changed at a home since its mark `old`, read at once (each its own ldapsearch).

    What was deleted leaves no entry to find by its CSN or USN. An OpenLDAP home whose
    syncprov keeps a session log names what left since the mark (`ldapcli.left_since`:
    0.2 s where listing 90,000 activated users took 0.6 s alone and 3-4 s beside the
    other reads, here), when the cache knows its entries' entryUUIDs (`by_uuid`); any
    other home is listed (the DNs of its activated users and POSIX groups)."""
    base, ca = at["base"], at["ca"]
    if d.kind == "ldap":  # the users and groups made as a full read makes them
        since = f"(entryCSN>={min(old['csn'])})"
        reads = {"users": (f"(&(objectClass=posixAccount){since})", users.ldap_user_attrs(d), users.ldap_users(d)),
                 "groups": (f"(&{users.LDAP_GROUP_FILTER}{since})", users.LDAP_GROUP_ATTRS, users.ldap_groups)}
        listings = {"user_dns": (users.ldap_user_filter(d), ["1.1"]), "group_dns": (users.LDAP_GROUP_FILTER, ["1.1"])}
    else:
        since = f"(uSNChanged>={old['usn'] + 1})"
        reads = {"users": (f"(&{users.AD_USER_CLASS}{since})", users.ad_user_attrs(d), None),
                 "groups": (f"(&(objectClass=group){since})", users.AD_GROUP_ATTRS, None)}
        listings = {"user_dns": (users.ad_user_filter(d), ["1.1"]), "group_dns": (users.AD_GROUP_FILTER, ["1.1"])}
    refresh = d.kind == "ldap" and by_uuid
    with ThreadPoolExecutor(len(reads) + len(listings)) as pool:
        found = {k: pool.submit(ldapcli.search, at, ca, base, flt, attrs, records=records)
                 for k, (flt, attrs, records) in reads.items()}
        found.update({k: pool.submit(ldapcli.search, at, ca, base, flt, attrs)
                      for k, (flt, attrs) in ({} if refresh else listings).items()})
        left = {k: pool.submit(ldapcli.left_since, at, ca, base, listings[k][0], old["csn"])
                for k in listings} if refresh else {}
        left = {k: f.result() for k, f in left.items()}
        # A home that cannot name what left is listed after all.
        found.update({k: pool.submit(ldapcli.search, at, ca, base, *listings[k]) for k, v in left.items() if v is None})
        found = {k: f.result() for k, f in found.items()}
    if d.kind == "ldap":
        changed_users, changed_groups = found["users"], found["groups"]
    else:
        changed_users = [users.ad_user(dn, a, d) for dn, a in found["users"]]
        changed_groups = [users.ad_group(dn, a) for dn, a in found["groups"]]
    dns = {k: {dn.lower() for dn, _ in found[k]} if k in found else None for k in listings}
    members = {}
    if d.kind == "ad":
        # The users (activated) of the changed groups, with all their groups.
        changed = [g["dn"] for g in changed_groups if g["dn"].lower() in dns["group_dns"]]
        for i in range(0, len(changed), users.FETCH):
            flt = "(|" + "".join(f"(memberOf={_escape(dn)})" for dn in changed[i:i + users.FETCH]) + ")"
            for dn, a in ldapcli.search(at, ca, base, f"(&{users.ad_user_filter(d)}{flt})", ["memberOf"]):
                members[dn.lower()] = [g.lower() for g in a.get("memberOf", [])]
    return HomeChanges(changed_users, changed_groups, dns["user_dns"], dns["group_dns"], members,
                       left.get("user_dns") or set(), left.get("group_dns") or set())


def _uuids_kept(db: sqlite3.Connection, code: str) -> bool:
    """Whether the cache knows the entryUUID of each of a home's entries (not at AD, nor
    where the reader may not read it): then a refresh's UUIDs name what left."""
    return not db.execute("SELECT EXISTS(SELECT 1 FROM home_user WHERE site = ? AND uuid IS NULL) OR "
                          "EXISTS(SELECT 1 FROM home_group WHERE site = ? AND uuid IS NULL)", (code, code)).fetchone()[0]


def _escape(value: str) -> str:
    from ldap3.utils.conv import escape_filter_chars
    return escape_filter_chars(value)


def _follow(cached: dict[str, tuple[str, str | None]], changed: list[dict], listed: set[str] | None,
            left: set[str], now, name_of) -> tuple[list[tuple[str, str]], dict[str, dict]]:
    """A home's cached entries of a kind (key -> (name, entryUUID)) brought to what it holds
    now: the keys gone with their names, and the entries now there (key -> entry) among
    the changed ones (`now(entry)`: activated, or a POSIX group; `name_of(entry)`: as
    cached). What left is named by `listed` (every such entry's key now) where the home
    was listed, else by `left` (entryUUIDs) and by a changed entry's entryUUID cached
    under another DN (renamed)."""
    gone, new = [], {}
    if listed is None:
        keys = {uuid: key for key, (_, uuid) in cached.items()}
        went = {keys[u] for u in left if u in keys}
        went |= {keys[e["uuid"]] for e in changed if e.get("uuid") in keys and keys[e["uuid"]] != e["dn"].lower()}
        gone += [(key, cached.pop(key)[0]) for key in went]
    for e in changed:
        key = e["dn"].lower()
        old = cached.pop(key, None)
        if old is not None:
            gone.append((key, old[0]))
        if listed is None and now(e) and e.get("uuid") in left:
            raise Doubtful("a home's changes hold an entry its refresh says left")
        if now(e) and (key in listed if listed is not None else e.get("uuid") not in left):
            cached[key] = (name_of(e), e.get("uuid"))
            new[key] = e
    if listed is not None:
        gone += [(key, cached.pop(key)[0]) for key in [k for k in cached if k not in listed]]  # deleted at home
        if len(cached) != len(listed):
            raise Doubtful("a home lists entries its changes did not name")
    return gone, new


def apply_changes(db: sqlite3.Connection, code: str, ch: HomeChanges,
                  kind: str) -> tuple[set[str], set[str], list[tuple[str, list]], dict]:
    """What a home's changes since the last sync do to its cached rows: the user names and
    the group names (unprefixed, lower case) whose entries changed, before or after, the
    writes that bring the rows to what the home holds now, and its counts then."""
    cached_users = {k: (n, u) for k, n, u in db.execute("SELECT key, name, uuid FROM home_user WHERE site = ?",
                                                         (code,))}
    cached_groups = {k: (n, u) for k, n, u in db.execute("SELECT key, lname, uuid FROM home_group WHERE site = ?",
                                                          (code,))}
    gone_users, new_users = _follow(cached_users, ch.users, ch.user_dns, ch.users_left, lambda u: u["activated"],
                                    lambda u: u["name"])
    names = {name for _, name in gone_users} | {u["name"] for u in new_users.values()}
    gone, new_groups = _follow(cached_groups, ch.groups, ch.group_dns, ch.groups_left,
                               lambda g: g["gid"] is not None, lambda g: g["name"].lower())
    gone_groups = [key for key, _ in gone]
    group_names = {lname for _, lname in gone} | {g["name"].lower() for g in new_groups.values()}
    cached_users = {k: name for k, (name, _) in cached_users.items()}
    cached_groups = {k: lname for k, (lname, _) in cached_groups.items()}
    member = "INSERT OR IGNORE INTO home_member VALUES (?, ?, ?)"
    by_group = "DELETE FROM home_member WHERE site = ? AND grp = ?"
    writes = [("DELETE FROM home_user WHERE site = ? AND key = ?", [(code, k) for k, _ in gone_users]),
              ("INSERT INTO home_user VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               [_user_row(code, u) for u in new_users.values()]),
              ("DELETE FROM home_group WHERE site = ? AND key = ?", [(code, k) for k in gone_groups]),
              ("INSERT INTO home_group VALUES (?, ?, ?, ?, ?, ?, ?)", [_group_row(code, g) for g in new_groups.values()])]
    if kind == "ldap":  # a group's memberUid
        writes += [(by_group, [(code, k) for k in gone_groups]),
                   (member, [(code, k, m.lower()) for k, g in new_groups.items() for m in g["members"]])]
    else:  # the users' memberOf: a changed user's own, then the members of the changed groups read again
        by_user = "DELETE FROM home_member WHERE site = ? AND name = ?"
        changed = {g["dn"].lower() for g in ch.groups} | set(gone_groups)
        again = {cached_users[k]: of for k, of in ch.members.items() if k in cached_users}
        writes += [(by_user, [(code, name) for _, name in gone_users]),
                   (member, [(code, g, u["name"]) for u in new_users.values() for g in u["member_of"]
                             if g in cached_groups]),
                   (by_group, [(code, k) for k in changed]),
                   (by_user, [(code, name) for name in again]),
                   (member, [(code, g, name) for name, of in again.items() for g in of if g in cached_groups])]
    return names, group_names, writes, {"activated": len(cached_users), "groups": len(cached_groups)}


# The queries below start from the touched names and reach the tables by their indexes:
# `CROSS JOIN` makes SQLite join in the order written (without statistics it chose to
# scan a site's 200,000 memberships for the touched groups' members).


def _touch(db: sqlite3.Connection, kind: str, names) -> None:
    """Put names of a kind in the sync's temporary table of touched names."""
    db.executemany("INSERT OR IGNORE INTO touched VALUES (?, ?)", ((kind, n) for n in names))


def _groups_listing(db: sqlite3.Connection, sites: dict) -> set[str]:
    """The merged names of the home groups that list a touched user."""
    prefix = {code: s.directory.prefix for code, (s, _) in sites.items()}
    return {prefix[site] + lname for site, lname in db.execute(
        "SELECT m.site, g.lname FROM touched t CROSS JOIN home_member m ON m.name = t.name "
        "CROSS JOIN home_group g ON g.site = m.site AND g.key = m.grp WHERE t.kind = 'user'") if site in prefix}


def _sub_homes(db: sqlite3.Connection, sites: dict, group_names: set[str]) -> dict[str, users.HomeRead]:
    """The homes' touched users and the groups named `group_names`, as a full read has them."""
    homes = {code: users.HomeRead([], []) for code in sites}
    for site, *row in db.execute("SELECT h.site, h.name, h.dn, h.uid, h.gid, h.gecos, h.home, h.shell FROM touched t "
                                 "CROSS JOIN home_user h ON h.name = t.name WHERE t.kind = 'user'"):
        if site in homes:
            homes[site].users.append(dict(zip(("name", "dn", "uid", "gid", "gecos", "home", "shell"), row),
                                          activated=True))
    for code, (s, _) in sites.items():
        prefix = s.directory.prefix
        _touch(db, f"home:{code}", (n[len(prefix):] for n in group_names if n.startswith(prefix)))
        groups = {key: {"name": name, "dn": dn, "gid": gid, "members": []} for key, name, dn, gid in db.execute(
            "SELECT g.key, g.name, g.dn, g.gid FROM touched t CROSS JOIN home_group g INDEXED BY home_group_lname "
            "ON g.site = ? AND g.lname = t.name WHERE t.kind = ?", (code, f"home:{code}"))}
        for key, name in db.execute("SELECT m.grp, m.name FROM touched t CROSS JOIN home_group g ON g.site = ? "
                                    "AND g.lname = t.name CROSS JOIN home_member m ON m.site = g.site "
                                    "AND m.grp = g.key WHERE t.kind = ?", (code, f"home:{code}")):
            groups[key]["members"].append(name)
        homes[code].groups.extend(groups.values())
    return homes


def _owned(db: sqlite3.Connection, kind: str) -> dict[str, dict]:
    """The owned entries (DN, digest) of the touched names of a kind."""
    return {name: {"dn": dn, "geofedDigest": digest, "partial": True} for name, dn, digest in db.execute(
        "SELECT o.name, o.dn, o.digest FROM touched t CROSS JOIN merged o ON o.kind = t.kind AND o.name = t.name "
        "WHERE t.kind = ? AND o.dn IS NOT NULL", (kind,))}


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
    db = open_cache(fed, summary)
    try:
        return _patch(fed, db, state, sites, marks, summary, dry_run, out, files_ok, progress, t0)
    finally:
        db.close()  # without a commit (a dry run, refused writes, a doubt): the cache as it was


def _patch(fed: Federation, db: sqlite3.Connection, state: dict, sites: dict, marks: dict, summary: dict,
           dry_run: bool, out: Path | None, files_ok: bool, progress, t0: float) -> dict:
    old = summary["marks"]
    moved = {code: (s, at) for code, (s, at) in sites.items() if marks["homes"][code] != old["homes"][code]}
    found = {}
    if moved:
        with ThreadPoolExecutor(len(moved)) as pool:
            found = {code: pool.submit(users._timed, read_changes, at, s.directory, old["homes"][code],
                                       _uuids_kept(db, code)) for code, (s, at) in moved.items()}
            found = {code: f.result() for code, f in found.items()}
    read_s = {code: t for code, (_, t) in found.items()}
    read = dict(summary["sites"])
    names: set[str] = set()  # user names touched at any home
    group_names: set[str] = set()  # merged group names touched
    writes = []
    for code, (ch, _) in found.items():
        touched, groups, rows, read[code] = apply_changes(db, code, ch, sites[code][0].directory.kind)
        progress(f"site {code}: {len(ch.users)} users and {len(ch.groups)} groups changed since the last sync")
        names |= touched
        group_names |= {sites[code][0].directory.prefix + g for g in groups}
        writes += rows
    _touch(db, "user", names)
    # Groups that listed a touched user when merged last time (the homes' rows before the
    # changes: the last merge's groups came from them), and those that list one now.
    group_names |= _groups_listing(db, sites)
    for sql, rows in writes:
        db.executemany(sql, rows)
    group_names |= _groups_listing(db, sites)
    _touch(db, "group", group_names)
    t_read = time.monotonic()
    sub_homes = _sub_homes(db, sites, group_names)
    _touch(db, "member", {m.lower() for h in sub_homes.values() for g in h.groups for m in g["members"]} - names)
    outside = dict(db.execute("SELECT m.name, m.site FROM touched t CROSS JOIN merged m ON m.kind = 'user' "
                              "AND m.name = t.name WHERE t.kind = 'member' AND m.site IS NOT NULL"))
    held = _held(db)
    sub = users.merge(fed, sub_homes, held, outside)
    admin = state["servers"]["admin"]

    def fetch(kind: str, dns: list[str]) -> dict[str, dict]:
        return users.fetch_owned(admin, state["ca"], kind, dns)
    owned = {kind: _owned(db, kind) for kind in ("user", "group")}
    changes = users.plan(sub, owned["user"], owned["group"], admin["base"], fetch)
    refused = {"user": (set(meta(db, "refused_users")) - names) | sub.refused_users,
               "group": (set(meta(db, "refused_groups")) - group_names) | sub.refused_groups}
    collisions = [c for c in meta(db, "collisions")
                  if c["name"] not in (names if c["entry"] == "user" else group_names)] + sub.collisions
    t_plan = time.monotonic()
    paths = []
    with ThreadPoolExecutor(1) as pool:
        # The admin server makes the changes while this process brings the cache and the
        # files to what they leave (both undone below if a change was refused).
        writing = None
        if not dry_run and changes:
            progress(f"writing {len(changes)} changes to the admin directory")
            writing = pool.submit(users.apply, admin, changes)
        merged = {}
        for kind, touched, entries in (("user", names, sub.users), ("group", group_names, sub.groups)):
            # The touched names' rows as the changes leave them (a dry run: their entries as they are).
            after = owned[kind] if dry_run else users.owned_after(owned[kind], changes, kind)
            db.executemany("DELETE FROM merged WHERE kind = ? AND name = ?", ((kind, n) for n in touched))
            db.executemany(MERGED_INSERT, _merged_rows(kind, entries, after))
            merged[kind] = db.execute("SELECT count(*) FROM merged WHERE kind = ? AND site IS NOT NULL",
                                      (kind,)).fetchone()[0]
            if not dry_run:
                _settle(db, kind, touched, owned[kind], sub, held)
        if not dry_run and out is not None and (changes or not files_ok):
            paths = users.write_lines(out, {f: db.execute("SELECT id, name, text FROM line WHERE file = ? "
                                                          "ORDER BY id, name", (f,)) for f in ("passwd", "group")})
        elif not dry_run and out is not None:
            paths = [out / "passwd", out / "group"]
        errors = writing.result() if writing is not None else []
    t_apply = time.monotonic()
    if errors:
        db.close()
        paths = abandon(fed, state, out)
    elif not dry_run:
        marks = dict(marks, admin=admin_mark(admin, state["ca"]) if changes else marks["admin"])
        token = secrets.token_hex(16)
        set_meta(db, token=token, collisions=collisions, refused_users=sorted(refused["user"]),
                 refused_groups=sorted(refused["group"]))
        db.execute("COMMIT")
        save(fed, marks, summary_of(read, merged["user"], merged["group"], collisions, out), token)
    seconds = {"read": t_read - t0, "merge": t_plan - t_read, "write": t_apply - t_plan,
               "files": time.monotonic() - t_apply, "total": time.monotonic() - t0, "read_each": read_s}
    return users.result(dry_run, read, merged["user"], merged["group"], changes, errors, collisions, seconds, paths,
                        incremental=True)


def _settle(db: sqlite3.Connection, kind: str, touched: set[str], have: dict, sub: users.Merge,
            held: dict) -> None:
    """The files' lines of the touched names of a kind as the changes leave them: the
    merge's, a refused name's as an earlier sync made it, else a hand-made entry's."""
    refused, want = sub.refused_users if kind == "user" else sub.refused_groups, sub.want(kind)
    hand = held["users" if kind == "user" else "groups"]
    for name in touched:
        if name in refused and name in have:
            continue  # a refused name's entry stays as it was
        db.execute("DELETE FROM line WHERE file = ? AND name = ?", (FILES[kind], name))
        entry = want.get(name) or hand.get(name)
        if entry is not None:
            db.execute("INSERT INTO line VALUES (?, ?, ?, ?)", (FILES[kind], *users.file_line(kind, name, entry)))
