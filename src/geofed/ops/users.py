"""`geofed ops users sync|check`: one user database for the federation from the sites' directories.

    geofed ops users sync -f ma-hd [--dry-run] [--out DIR]
    geofed ops users check kredel -f ma-hd < password

`sync` (seed 001, slides 13-14) reads every site's directory at its URI (a centre's own
server named in the federation file, or the fixture's: `directory.home`) over StartTLS
or LDAPS, bound as a read-only account (OpenLDAP's ldapsearch, the certificate checked
against the site's CA; see `ldapcli` for why not ldap3 here); it never writes there.
It takes the activated users (the site's activation attribute holds its value; at an AD site the
account must also be enabled), gives user and group ids the site's offset and group
names its prefix, and writes the result into the federation's own directory and as
passwd and group files. Every entry it makes carries the auxiliary class geofedEntry
(its site and the DN at home): it adds, changes and deletes only those, so an entry
made by hand in the admin directory survives every sync. What cannot be merged
safely is refused and named, never guessed: the same activated name at two sites, an
id that would leave the site's range, a group name that clashes after prefixing, a
missing uidNumber or gidNumber, a name or id held by a hand-made entry, a name that
is no POSIX name. A refused name's entry from an earlier sync stays as it was. A
second run changes nothing.

`check` authenticates a merged user against the home directory (a simple bind to
slapd or to Samba's AD with the DN at home); the merged directory holds no password.
"""

from __future__ import annotations

import ssl
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from geofed.federation import Federation, SiteDirectory
from geofed.ops import directory, ldapcli
from geofed.ops.userbase import UF_ACCOUNTDISABLE
from geofed.testbed.host import HostError

OWNED_CLASS = "geofedEntry"
USER_CLASSES = ["account", "posixAccount", OWNED_CLASS]
GROUP_CLASSES = ["posixGroup", OWNED_CLASS]
USER_ATTRS = ("cn", "uidNumber", "gidNumber", "homeDirectory", "loginShell", "gecos", "geofedSite", "geofedSource",
              "geofedDigest")
GROUP_ATTRS = ("gidNumber", "memberUid", "geofedSite", "geofedSource", "geofedDigest")
FETCH = 200  # DNs in one search's filter at a home (an AD user's groups by memberOf)
# Names in one search for whole owned entries at the admin server (geofed's own slapd):
# each search is an ldapsearch process, and 4,614 stale entries took 23 of them (0.5 s).
OWNED_FETCH = 1000
# ldapmodify processes writing to the admin server at once: 40,000 adds took 14.2 s in
# one and 11.1 s in two here (2 cores); slapd commits one write at a time anyway.
STREAMS = 2


# ---------------------------------------------------------------- connections


def connect(server: dict, ca: str, user: str | None = None, password: str | None = None, ldaps: bool = False,
            bind: bool = True):
    """An ldap3 connection to `server` over TLS checked against `ca`: a home's URI
    (directory.home: StartTLS on ldap://, TLS on ldaps://) or a server of the directory's
    state (StartTLS on its LDAP port, or LDAPS); bound as the server's administrator (or
    reader) unless `user` is given, and not bound at all with bind=False.
    For single operations (a user's bind); sync's bulk reads and writes go through `ldapcli`."""
    import ldap3
    tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=ca, version=ssl.PROTOCOL_TLS_CLIENT)
    if "uri" in server:
        ldaps = server["uri"].startswith("ldaps:")
        srv = ldap3.Server(server["uri"], tls=tls, get_info=ldap3.NONE, connect_timeout=10)
    else:
        srv = ldap3.Server(server["host"], port=server["ldaps_port"] if ldaps else server["port"], use_ssl=ldaps,
                           tls=tls, get_info=ldap3.NONE, connect_timeout=10)
    port = srv.port
    if user is None:
        user, password = server["bind_dn"], server["password"]
    conn = ldap3.Connection(srv, user=user, password=password, receive_timeout=120, raise_exceptions=False,
                            auto_referrals=False, check_names=False)
    try:
        conn.open()
        if not ldaps and not conn.start_tls():
            raise HostError(f"StartTLS with {srv.host}:{port} failed: {conn.result.get('description')}")
        if bind and not conn.bind():
            raise HostError(f"bind as {conn.user} at {srv.host}:{port} failed: {conn.result.get('description')}")
    except ldap3.core.exceptions.LDAPException as e:
        raise HostError(f"cannot talk to the directory at {srv.host}:{port}: {e}") from None
    return conn


def _one(values: list | None):
    return values[0] if values else None


# ---------------------------------------------------------------- reading the homes


@dataclass
class HomeRead:
    users: list[dict]  # name, dn, uid, gid, gecos, home, shell, activated
    groups: list[dict]  # name, dn, gid, members (names)


def ldap_user_filter(d: SiteDirectory) -> str:
    return f"(&(objectClass=posixAccount){_activation_filter(d)})"


def ldap_user_attrs(d: SiteDirectory) -> list[str]:
    # entryUUID: how an LDAP Content Synchronization refresh names what left (syncstate).
    return ["uid", "uidNumber", "gidNumber", "cn", "gecos", "homeDirectory", "loginShell", d.activation_attribute,
            "entryUUID"]


LDAP_GROUP_FILTER = "(objectClass=posixGroup)"
LDAP_GROUP_ATTRS = ["cn", "gidNumber", "memberUid", "entryUUID"]


def ldap_users(d: SiteDirectory):
    """How `ldapcli.search` makes a home's users of ldapsearch's LDIF of `ldap_user_attrs`:
    {name, dn, uid, gid, gecos, home, shell, activated, uuid}, the first of each
    attribute's values (an empty one as none), gecos falling back to cn and then to the
    name, home to /home/<name>, shell to /bin/bash; activated where the activation
    attribute holds its value (without case); uuid the entryUUID in lower case. Made in
    compiled code (rust/ldif), without a dict of lists per entry in between: 100,000
    users a home, both homes read at once."""
    import geofed_ldif  # here: every geofed command imports this module, few read homes
    return lambda text: geofed_ldif.ldap_users(text, d.activation_attribute, d.activation_value)


def ldap_groups(text: str) -> list[dict]:
    """A home's groups of ldapsearch's LDIF of `LDAP_GROUP_ATTRS` (for `ldapcli.search`):
    {name, dn, gid, members, uuid}, the first cn and gidNumber, every memberUid, the
    entryUUID in lower case (rust/ldif)."""
    import geofed_ldif
    return geofed_ldif.ldap_groups(text)


def read_ldap(server: dict, ca: str, d: SiteDirectory) -> HomeRead:
    """The users and the groups, each by its own ldapsearch at once (one after the other,
    the groups' 0.2-0.3 s at 100,000 users a home came after the users' 1.7 s)."""
    with ThreadPoolExecutor(1) as pool:  # started from this thread: in the namespace it is in
        groups = pool.submit(ldapcli.search, server, ca, d.base, LDAP_GROUP_FILTER, LDAP_GROUP_ATTRS,
                             records=ldap_groups)
        users = ldapcli.search(server, ca, d.base, ldap_user_filter(d), ldap_user_attrs(d), records=ldap_users(d))
        return HomeRead(users, groups.result())


AD_USER_CLASS = "(objectCategory=person)(objectClass=user)"
AD_GROUP_FILTER = "(&(objectClass=group)(gidNumber=*))"
AD_GROUP_ATTRS = ["sAMAccountName", "gidNumber"]


def ad_user_filter(d: SiteDirectory) -> str:
    # Disabled accounts (userAccountControl bit 2, by AD's bitwise-and matching rule) stay at home.
    return f"(&{AD_USER_CLASS}{_activation_filter(d)}(!(userAccountControl:1.2.840.113556.1.4.803:=2)))"


def ad_user_attrs(d: SiteDirectory) -> list[str]:
    return ["sAMAccountName", "uidNumber", "gidNumber", "displayName", "unixHomeDirectory", "loginShell",
            "userAccountControl", "memberOf", d.activation_attribute]


def ad_user(dn: str, a: dict, d: SiteDirectory) -> dict:
    """A user at an AD home, with the DNs of its groups (`member_of`, lower case)."""
    name = _one(a.get("sAMAccountName"))
    uac = _int(_one(a.get("userAccountControl"))) or 0
    return {"name": name.lower(), "dn": dn, "uid": _int(_one(a.get("uidNumber"))),
            "gid": _int(_one(a.get("gidNumber"))), "gecos": _one(a.get("displayName")) or name,
            "home": _one(a.get("unixHomeDirectory")) or f"/home/{name.lower()}",
            "shell": _one(a.get("loginShell")) or "/bin/bash",
            "activated": _holds(a.get(d.activation_attribute), d.activation_value) and not uac & UF_ACCOUNTDISABLE,
            "member_of": [g.lower() for g in a.get("memberOf") or []]}


def ad_group(dn: str, a: dict) -> dict:
    return {"name": _one(a.get("sAMAccountName")), "dn": dn, "gid": _int(_one(a.get("gidNumber"))), "members": []}


def ad_members(users: list[dict], groups: list[dict]) -> None:
    """Fill the groups' members from the users' memberOf."""
    by_dn = {g["dn"].lower(): g for g in groups}
    for g in groups:
        g["members"] = []
    for u in users:
        for dn in u["member_of"]:
            g = by_dn.get(dn)
            if g is not None:
                g["members"].append(u["name"])


def read_ad(server: dict, ca: str, d: SiteDirectory) -> HomeRead:
    """Users with their memberOf (so a big group's member list, which AD hands out in
    ranges of 1500, is never read) and the POSIX groups (those with a gidNumber)."""
    groups = [ad_group(dn, a) for dn, a in ldapcli.search(server, ca, d.base, AD_GROUP_FILTER, AD_GROUP_ATTRS)]
    users = [ad_user(dn, a, d) for dn, a in ldapcli.search(server, ca, d.base, ad_user_filter(d), ad_user_attrs(d))]
    ad_members(users, groups)
    return HomeRead(users, groups)


def _activation_filter(d: SiteDirectory) -> str:
    """Only activated users are read: at a university most accounts are not the cluster's."""
    from ldap3.utils.conv import escape_filter_chars
    return f"({d.activation_attribute}={escape_filter_chars(d.activation_value)})"


def _int(v) -> int | None:
    """An LDAP integer's value (LDIF is text); None if it is none."""
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _holds(values, wanted: str) -> bool:
    if values is None:
        return False
    values = values if isinstance(values, list) else [values]
    return any(str(v).lower() == wanted.lower() for v in values)


# ---------------------------------------------------------------- the merge


@dataclass
class Merge:
    # Merged name -> attributes as written: memberUid sorted (one member alone as its
    # value, none as None), and geofedDigest, the SHA-256 of `name<TAB>value` lines sorted
    # by name (a list's values joined by commas), stored with the entry: a second sync
    # compares digests and reads no more than that of an entry that did not change.
    users: dict[str, dict] = field(default_factory=dict)
    groups: dict[str, dict] = field(default_factory=dict)
    collisions: list[dict] = field(default_factory=list)
    refused_users: set[str] = field(default_factory=set)  # names whose earlier entries stay as they are
    refused_groups: set[str] = field(default_factory=set)
    read: dict[str, dict] = field(default_factory=dict)

    def refuse(self, kind: str, name: str, what: str, detail: str, sources: list[str]) -> None:
        self.collisions.append({"kind": kind, "entry": what, "name": name, "detail": detail, "sources": sources})
        (self.refused_users if what == "user" else self.refused_groups).add(name)

    def want(self, kind: str) -> dict[str, dict]:
        """The merged entries of a kind ("user", "group") as they are written, by name."""
        return self.users if kind == "user" else self.groups

    def wanted(self, kind: str, name: str) -> dict:
        """One merged entry as it is written (`want`'s)."""
        return self.want(kind)[name]


def merge(fed: Federation, homes: dict[str, HomeRead], held: dict, outside: dict[str, str] | None = None) -> Merge:
    """The merged users and groups, and every collision refused.

    The activated users of every home (by `merged_id` in their site's range, the same
    name activated at two homes refused at both), their groups with the site's prefix (a
    member kept where it is a merged user of the group's site), what cannot be merged
    safely refused and named. `held` describes the admin directory's hand-made entries:
    {"users": {name: dn}, "groups": {name: dn}, "uids": {id: dn}, "gids": {id: dn}}; a
    name or id they hold is refused. `outside`: merged users (name -> site) that `homes`
    does not hold (an incremental sync merges only the names that changed), which groups
    may still list as members.

    Made in compiled code (rust/ldif), entries and digests with it: at 100,000 users per
    site the loops took 1.0-1.4 s of a first sync in Python, its entries 0.3-0.5 s more.
    """
    import geofed_ldif  # here: every geofed command imports this module, few merge
    m = Merge()
    sites = []
    for code, home in homes.items():
        d = fed.site(code).directory
        sites.append((code, d.prefix, d.offset, d.id_range, home.users, home.groups))
    m.users, m.groups, refusals, m.read = geofed_ldif.merge(sites, held, outside or {})
    for refusal in refusals:
        m.refuse(*refusal)
    return m


# ---------------------------------------------------------------- the admin directory


def read_admin(server: dict, ca: str) -> tuple[dict, dict, dict]:
    """(owned users, owned groups, hand-made entries) of the admin directory, by name.

    The hand-made ones are {"users": {name: attributes}, "groups": ..., "uids": {id: dn},
    "gids": ...}: the merge refuses what they hold, and passwd and group list them."""
    base = server["base"]
    owned_users, owned_groups = {}, {}
    held = {"users": {}, "groups": {}, "uids": {}, "gids": {}}
    # Owned entries by their digest only (the merge's attributes are what it wrote); the
    # few whose digest differs are fetched whole by `plan`.
    # (200,000 of them at 100,000 users per site: one attribute each, the DN names the entry.)
    for dn, a in ldapcli.search(server, ca, base, f"(objectClass={OWNED_CLASS})", ["geofedDigest"]):
        rdn, name = dn.split(",", 1)[0].split("=", 1)
        (owned_users if rdn.lower() == "uid" else owned_groups)[name] = {
            "dn": dn, "geofedDigest": _one(a.get("geofedDigest")), "partial": True}
    for dn, a in ldapcli.search(server, ca, base, "(&(|(objectClass=posixAccount)(objectClass=posixGroup))"
                                                  f"(!(objectClass={OWNED_CLASS})))",
                                ["uid", "cn", *USER_ATTRS, *GROUP_ATTRS]):
        user = bool(a.get("uidNumber"))  # posixAccount must have one, posixGroup cannot
        name = _one(a.get("uid")) if user else _one(a.get("cn"))
        (held["users"] if user else held["groups"])[name] = \
            {"dn": dn, **{k: _norm(a.get(k)) for k in (USER_ATTRS if user else GROUP_ATTRS)}}
        number = _int(_one(a.get("uidNumber" if user else "gidNumber")))
        if number is not None:
            (held["uids"] if user else held["gids"])[number] = dn
    return owned_users, owned_groups, held


def _norm(v):
    """An attribute's value as the merge computes it: one value, or a sorted list for memberUid."""
    if isinstance(v, list):
        return v[0] if len(v) == 1 else sorted(v)
    return v


def plan(m: Merge, owned_users: dict, owned_groups: dict, base: str, fetch=None) -> list[dict]:
    """The changes that bring the owned entries to the merge: add, modify, delete.
    `fetch(kind, dns)` reads whole entries where only their digest was read and it differs."""
    return list(planned(m, owned_users, owned_groups, base, fetch))


def planned(m: Merge, owned_users: dict, owned_groups: dict, base: str, fetch=None) -> Iterator[dict]:
    """`plan`'s changes one at a time: the first sync's adds go to slapadd while the rest are made."""
    for kind, have_all, refused, rdn, ou, classes in (
            ("user", owned_users, m.refused_users, "uid", "people", USER_CLASSES),
            ("group", owned_groups, m.refused_groups, "cn", "groups", GROUP_CLASSES)):
        merged = m.users if kind == "user" else m.groups
        # Whole: the entries whose digest differs, and those to delete (whose site the diff names).
        stale = [h["dn"] for n, h in have_all.items() if h.get("partial") and n not in refused
                 and (n not in merged or h.get("geofedDigest") != m.wanted(kind, n)["geofedDigest"])]
        whole = fetch(kind, stale) if stale else {}
        for name in sorted(set(merged) | set(have_all)):
            if name in refused:
                continue  # a refused name: whatever an earlier sync made of it stays as it is
            want = m.wanted(kind, name) if name in merged else None
            have = have_all.get(name)
            if have is None:
                # The written entry itself where it has a value for each attribute (every user,
                # most groups): 200,000 copies a first sync otherwise. Neither is changed later.
                yield {"op": "add", "entry": kind, "name": name, "dn": f"{rdn}={name},ou={ou},{base}",
                       "classes": classes,
                       "attributes": want if None not in want.values() else {k: v for k, v in want.items()
                                                                             if v is not None}}
            elif want is None:
                yield {"op": "delete", "entry": kind, "name": name, "dn": have["dn"],
                       "site": whole.get(have["dn"], have).get("geofedSite")}
            elif have.get("geofedDigest") != want["geofedDigest"]:
                have = whole.get(have["dn"], have)
                diff = {k: v for k, v in want.items() if value_text(v) != value_text(have.get(k))}
                yield {"op": "modify", "entry": kind, "name": name, "dn": have["dn"], "attributes": diff,
                       "before": {k: have.get(k) for k in diff}}


def value_text(v):
    """An attribute's value as comparable text (sorted for many values)."""
    if v is None:
        return None
    if isinstance(v, list):
        return sorted(str(x) for x in v) if len(v) != 1 else str(v[0])
    return str(v)


def apply(server: dict, changes: list[dict]) -> list[str]:
    """Make the changes at the admin server, through its Unix socket; the errors, if any."""
    return ldapcli.modify(server, "", [change_record(c) for c in changes], STREAMS)


def change_record(change: dict) -> str:
    """A change as an LDIF change record (a modify replaces each attribute it names;
    one without values is removed)."""
    rows = [ldapcli.line("dn", change["dn"]), f"changetype: {change['op']}"]
    if change["op"] == "add":
        rows += [ldapcli.line("objectClass", c) for c in change["classes"]]
        rows += [ldapcli.line(k, v) for k, vs in change["attributes"].items() for v in ldapcli.values(vs)]
    elif change["op"] == "modify":
        for k, vs in change["attributes"].items():
            rows += [f"replace: {k}", *(ldapcli.line(k, v) for v in ldapcli.values(vs)), "-"]
    return "\n".join(rows)


def final_entries(m: Merge, owned: dict, kind: str, fetch) -> dict:
    """The owned entries of one kind once the plan is made: the merge's, and those of
    refused names as an earlier sync left them."""
    refused = m.refused_users if kind == "user" else m.refused_groups
    out = dict(m.want(kind))
    kept = [owned[name]["dn"] for name in refused & set(owned)]
    whole = fetch(kind, kept) if kept else {}
    for name in refused & set(owned):
        out[name] = whole[owned[name]["dn"]]
    return out


def file_lines(users: dict, groups: dict) -> dict[str, list[tuple[int, str, str]]]:
    """The lines of passwd and group for POSIX users and groups by name (merged and
    hand-made), as the sync's state keeps them."""
    return {"passwd": [file_line("user", name, a) for name, a in users.items()],
            "group": [file_line("group", name, a) for name, a in groups.items()]}


def file_line(kind: str, name: str, a: dict) -> tuple[int, str, str]:
    """An entry's line in passwd ("user") or group: (its id, its name, the line)."""
    if kind == "user":
        return int(a["uidNumber"]), name, ":".join([name, "x", str(a["uidNumber"]), str(a["gidNumber"]),
                                                     a.get("gecos") or a.get("cn") or "", a["homeDirectory"],
                                                     a.get("loginShell") or "/bin/sh"])
    return int(a["gidNumber"]), name, ":".join([name, "x", str(a["gidNumber"]),
                                                 ",".join(sorted(ldapcli.values(a.get("memberUid"))))])


def write_files(out: Path, users: dict, groups: dict) -> list[Path]:
    """passwd and group files of POSIX users and groups by name (merged and hand-made), by id."""
    return write_lines(out, {f: sorted(rows) for f, rows in file_lines(users, groups).items()})


def write_lines(out: Path, lines: dict) -> list[Path]:
    """passwd and group from their lines (`lines`: file -> (id, name, line), by id and name)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in ("passwd", "group"):
        tmp = out / f".{name}.tmp"
        tmp.write_text("".join(f"{text}\n" for _, _, text in lines[name]))
        tmp.replace(out / name)
        paths.append(out / name)
    return paths


def _timed(read, *args) -> tuple:
    t0 = time.monotonic()
    return read(*args), time.monotonic() - t0


def read_all(sites: dict, state: dict) -> tuple[dict[str, HomeRead], tuple[dict, dict, dict], dict]:
    """Every home (`sites`: code -> (site, directory.home)) and the admin directory, read at
    once (each by its own ldapsearch, while Python splits the LDIF of another); and the
    seconds each read took."""
    # The threads start from this one, in the namespace it entered, and so do their clients.
    with ThreadPoolExecutor(len(sites) + 1) as pool:
        homes = {code: pool.submit(_timed, read_ldap if s.directory.kind == "ldap" else read_ad, at, at["ca"],
                                   s.directory) for code, (s, at) in sites.items()}
        admin = pool.submit(_timed, read_admin, state["servers"]["admin"], state["ca"])
        homes = {code: f.result() for code, f in homes.items()}
        admin, admin_s = admin.result()
    seconds = {code: t for code, (_, t) in homes.items()}
    return {code: h for code, (h, _) in homes.items()}, admin, dict(seconds, admin=admin_s)


def fetch_owned(server: dict, ca: str, kind: str, dns: list[str]) -> dict[str, dict]:
    """Owned entries whole, by DN: a search for a few hundred names at a time."""
    from ldap3.utils.conv import escape_filter_chars
    names = USER_ATTRS if kind == "user" else GROUP_ATTRS
    found = {}
    for i in range(0, len(dns), OWNED_FETCH):
        rdns = "".join(f"({dn.split(',', 1)[0].split('=', 1)[0]}="
                       f"{escape_filter_chars(dn.split(',', 1)[0].split('=', 1)[1])})" for dn in dns[i:i + OWNED_FETCH])
        flt = f"(&(objectClass={OWNED_CLASS})(|{rdns}))"
        for dn, a in ldapcli.search(server, ca, server["base"], flt, list(names)):
            found[dn.lower()] = {"dn": dn, **{k: _norm(a.get(k)) for k in names}}
    return {dn: found.get(dn.lower(), {"dn": dn}) for dn in dns}


def owned_after(have: dict, changes: list[dict], kind: str) -> dict:
    """The owned entries of a kind (DN and digest) once `changes` are made."""
    out = dict(have)
    for c in changes:
        if c["entry"] != kind:
            continue
        if c["op"] == "delete":
            out.pop(c["name"], None)
        elif "geofedDigest" in c["attributes"]:
            out[c["name"]] = {"dn": c["dn"], "geofedDigest": c["attributes"]["geofedDigest"], "partial": True}
    return out


def files_from_admin(state: dict, out: Path) -> list[Path]:
    """passwd and group as the admin server holds them (after refused writes, the plan is not that)."""
    admin = state["servers"]["admin"]
    owned_users, owned_groups, held = read_admin(admin, state["ca"])
    whole = fetch_owned(admin, state["ca"], "user", [e["dn"] for e in owned_users.values()])
    owned_users = {n: whole[e["dn"]] for n, e in owned_users.items()}
    whole = fetch_owned(admin, state["ca"], "group", [e["dn"] for e in owned_groups.values()])
    owned_groups = {n: whole[e["dn"]] for n, e in owned_groups.items()}
    return write_files(out, {**held["users"], **owned_users}, {**held["groups"], **owned_groups})


def result(dry_run: bool, read: dict, merged_users: int, merged_groups: int, changes: list, errors: list,
           collisions: list, seconds: dict, paths: list, incremental: bool) -> dict:
    """A sync's record data."""
    made = Counter((c["op"], c["entry"]) for c in changes)
    return {
        "dry_run": dry_run, "incremental": incremental, "sites": read, "merged_users": merged_users,
        "merged_groups": merged_groups, "changes": changes, "errors": errors, "collisions": collisions,
        "counts": {f"{op}_{kind}s": made[op, kind] for op in ("add", "modify", "delete") for kind in ("user", "group")},
        "seconds": seconds, "files": [str(p) for p in paths],
    }


def describe(change: dict) -> str:
    """One line of the diff `--dry-run` prints."""
    sign = {"add": "+", "delete": "-", "modify": "~"}[change["op"]]
    if change["op"] == "add":
        a = change["attributes"]
        extra = (f"uid {a['uidNumber']} gid {a['gidNumber']} from {a['geofedSite']}" if change["entry"] == "user"
                 else f"gid {a['gidNumber']} from {a['geofedSite']}, members {value_text(a.get('memberUid')) or []}")
    elif change["op"] == "delete":
        extra = f"(no longer activated at {change.get('site')})"
    else:
        extra = ", ".join(f"{k}: {change['before'][k]!r} -> {v!r}" for k, v in change["attributes"].items()
                          if k != "geofedDigest") or "its digest"
    return f"{sign} {change['entry']} {change['name']} {extra}"


# ---------------------------------------------------------------- check


def check(fed: Federation, user: str, password: str) -> dict:
    """Authenticate a merged user at home; the result (ok, site, dn, reason)."""
    import ldap3
    from ldap3.utils.conv import escape_filter_chars
    state = directory.require_up(fed)
    directory.enter(state)
    admin = state["servers"]["admin"]
    found = ldapcli.search(admin, state["ca"], admin["base"], f"(&(objectClass={OWNED_CLASS})(objectClass=posixAccount)"
                           f"(uid={escape_filter_chars(user)}))", ["geofedSite", "geofedSource", "uidNumber"])
    if not found:
        return {"ok": False, "user": user, "reason": "not a user of the federation (not merged by users sync)"}
    _, a = found[0]
    site, dn = _one(a["geofedSite"]), _one(a["geofedSource"])
    result = {"user": user, "site": site, "dn": dn, "uid": int(_one(a["uidNumber"]))}
    if not password:
        # An LDAP bind with an empty password is an anonymous one, which succeeds.
        return dict(result, ok=False, reason="empty password")
    at = directory.home(fed, state, site)
    c = connect(at, at["ca"], user=dn, password=password, bind=False)
    try:
        ok = c.bind()
        reason = None if ok else c.result.get("description")
    except ldap3.core.exceptions.LDAPException as e:
        ok, reason = False, str(e)
    finally:
        c.unbind()
    return dict(result, ok=ok, reason=reason)


# ---------------------------------------------------------------- the read-through view


SHOWN = ("uid", "uidNumber", "gidNumber", "homeDirectory", "loginShell", "gecos", "cn")


def show(fed: Federation, user: str) -> dict:
    """A user as the read-through view (back-meta over the homes) and the merged copy see it."""
    from ldap3.utils.conv import escape_filter_chars
    state = directory.require_up(fed)
    directory.enter(state)
    admin = state["servers"]["admin"]
    flt = f"(&(objectClass=posixAccount)(uid={escape_filter_chars(user)}))"
    return {part: [{"dn": dn, **{k: _norm(a.get(k)) for k in SHOWN}}
                   for dn, a in ldapcli.search(admin, state["ca"], admin[base], flt, list(SHOWN))]
            for part, base in (("view", "view"), ("merged", "base"))}
