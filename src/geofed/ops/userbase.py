"""The people in each site's home directory: the fixture and the benchmark's generated sites.

A home directory is described as plain data (users and POSIX groups with their home
ids), then written as LDIF: for OpenLDAP with the POSIX schema (posixAccount,
inetOrgPerson, posixGroup with memberUid), for Active Directory as `user` and `group`
objects with sAMAccountName, userAccountControl and RFC 2307 uidNumber/gidNumber,
group members as DNs (AD keeps memberOf from them).

The fixture's passwords are the emulated sites' test accounts, not secrets:
`fixture_password(name)` gives each user's.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass, field

from geofed.federation import SiteDirectory

# userAccountControl bits (MS-ADTS 2.2.16): a normal account, disabled, no password needed.
UF_ACCOUNTDISABLE = 0x2
UF_PASSWD_NOTREQD = 0x20
UF_NORMAL_ACCOUNT = 0x200


@dataclass
class HomeUser:
    name: str
    given: str
    surname: str
    uid: int | None  # None: an AD account without RFC 2307 ids
    gid: int | None
    activated: bool = True
    disabled: bool = False  # AD: userAccountControl says the account is disabled
    password: str | None = None
    shell: str = "/bin/bash"

    @property
    def gecos(self) -> str:
        return f"{self.given} {self.surname}"


@dataclass
class HomeGroup:
    name: str
    gid: int | None
    members: list[str] = field(default_factory=list)


@dataclass
class HomeSite:
    users: list[HomeUser]
    groups: list[HomeGroup]


def fixture_password(name: str) -> str:
    """A fixture user's password (upper, lower, digit and symbol: AD's complexity rule)."""
    return f"Fixture-1-{name}"


def _fixture(rows: list[tuple], groups: list[tuple]) -> HomeSite:
    users = [HomeUser(name, given, surname, uid, gid, activated=act, disabled=dis, password=fixture_password(name))
             for name, given, surname, uid, gid, act, dis in rows]
    return HomeSite(users, [HomeGroup(n, gid, list(m)) for n, gid, m in groups])


# Mannheim's OpenLDAP: university accounts; those with the bwGRiD attribute are activated.
MANNHEIM = _fixture(
    [("kredel", "Heinz", "Kredel", 10231, 500, True, False),
     ("richling", "Sabine", "Richling", 10232, 500, True, False),
     ("mbauer", "Martin", "Bauer", 11804, 510, True, False),
     ("aschulze", "Anna", "Schulze", 12077, 510, True, False),
     ("tmueller", "Thomas", "Mueller", 12501, 520, False, False),
     ("lbecker", "Lena", "Becker", 13350, 520, True, False)],
    [("rum", 500, ["kredel", "richling"]),
     ("physik", 510, ["mbauer", "aschulze", "kredel"]),
     ("wiwi", 520, ["tmueller", "lbecker"]),
     ("bwgrid", 530, ["kredel", "richling", "mbauer", "aschulze", "lbecker"])],
)

# Heidelberg's Active Directory: RFC 2307 ids on the POSIX users and groups; one
# account is disabled and one has no uidNumber yet, both without the bwGRiD attribute.
HEIDELBERG = _fixture(
    [("hau", "Steffen", "Hau", 4101, 3000, True, False),
     ("kruse", "Hans-Guenther", "Kruse", 4102, 3000, True, False),
     ("jweber", "Julia", "Weber", 5230, 3010, True, False),
     ("pfischer", "Paul", "Fischer", 5231, 3010, True, True),
     ("nschulz", "Nina", "Schulz", 6007, 3020, True, False),
     ("ksommer", "Klaus", "Sommer", None, None, False, False)],
    [("urz", 3000, ["hau", "kruse"]),
     ("bioquant", 3010, ["jweber", "pfischer", "kruse"]),
     ("physchem", 3020, ["nschulz"]),
     ("bwgrid", 3030, ["hau", "kruse", "jweber", "nschulz"])],
)


GENERATED_FIRST_ID = 10000


def generated(n_users: int, n_groups: int, seed_name: str) -> HomeSite:
    """A large site for the benchmark: users <seed_name>000000..., each in its primary group
    and one more; every tenth is not activated."""
    groups = [HomeGroup(f"{seed_name}g{g:05d}", 1000 + g, []) for g in range(n_groups)]
    users = []
    for i in range(n_users):
        name = f"{seed_name}{i:06d}"
        primary = groups[i % n_groups]
        primary.members.append(name)
        groups[(i * 7 + 3) % n_groups].members.append(name)
        users.append(HomeUser(name, "Test", f"User{i}", GENERATED_FIRST_ID + i, primary.gid,
                              activated=i % 10 != 0))
    for g in groups:
        g.members = sorted(set(g.members))
    return HomeSite(users, groups)


# ---------------------------------------------------------------- OpenLDAP


def ssha(password: str) -> str:
    """An RFC 2307 {SSHA} userPassword value, as slappasswd makes it."""
    salt = os.urandom(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


def ldap_user_dn(d: SiteDirectory, name: str) -> str:
    return f"uid={name},ou=people,{d.base}"


def ldap_entries(d: SiteDirectory, site: HomeSite) -> list[tuple[str, dict]]:
    """(dn, attributes) of an OpenLDAP site: its two organisational units, users, groups."""
    out = [(f"ou=people,{d.base}", {"objectClass": ["organizationalUnit"], "ou": "people"}),
           (f"ou=groups,{d.base}", {"objectClass": ["organizationalUnit"], "ou": "groups"})]
    for u in site.users:
        attrs = {"objectClass": ["inetOrgPerson", "posixAccount", "shadowAccount"], "uid": u.name,
                 "cn": u.gecos, "givenName": u.given, "sn": u.surname, "gecos": u.gecos,
                 "homeDirectory": f"/home/{u.name}", "loginShell": u.shell,
                 "uidNumber": str(u.uid), "gidNumber": str(u.gid)}
        if u.activated:
            attrs[d.activation_attribute] = d.activation_value
        if u.password:
            attrs["userPassword"] = ssha(u.password)
        out.append((ldap_user_dn(d, u.name), attrs))
    for g in site.groups:
        attrs = {"objectClass": ["posixGroup"], "cn": g.name, "gidNumber": str(g.gid)}
        if g.members:
            attrs["memberUid"] = list(g.members)
        out.append((f"cn={g.name},ou=groups,{d.base}", attrs))
    return out


# ---------------------------------------------------------------- Active Directory


def ad_user_dn(d: SiteDirectory, name: str) -> str:
    return f"CN={name},CN=Users,{d.base}"


def ad_ldif(d: SiteDirectory, site: HomeSite) -> str:
    """LDIF for `ldbadd` into a provisioned, stopped Samba AD DC (its module stack fills
    in objectSid, memberOf and the rest, as for an add over LDAP)."""
    def pwd(p: str) -> str:
        return base64.b64encode(f'"{p}"'.encode("utf-16-le")).decode()

    blocks = []
    for u in site.users:
        lines = [f"dn: {ad_user_dn(d, u.name)}", "objectClass: user", f"sAMAccountName: {u.name}",
                 f"userPrincipalName: {u.name}@{d.realm.lower()}", f"givenName: {u.given}", f"sn: {u.surname}",
                 f"displayName: {u.gecos}"]
        uac = UF_NORMAL_ACCOUNT | (UF_ACCOUNTDISABLE if u.disabled else 0)
        if u.password:
            lines.append(f"unicodePwd:: {pwd(u.password)}")
        else:
            uac |= UF_PASSWD_NOTREQD
        lines.append(f"userAccountControl: {uac}")
        if u.uid is not None:
            lines += [f"uidNumber: {u.uid}", f"gidNumber: {u.gid}", f"unixHomeDirectory: /home/{u.name}",
                      f"loginShell: {u.shell}"]
        if u.activated:
            lines.append(f"{d.activation_attribute}: {d.activation_value}")
        blocks.append("\n".join(lines))
    for g in site.groups:
        lines = [f"dn: CN={g.name},CN=Users,{d.base}", "objectClass: group", f"sAMAccountName: {g.name}"]
        if g.gid is not None:
            lines.append(f"gidNumber: {g.gid}")
        lines += [f"member: {ad_user_dn(d, m)}" for m in g.members]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
