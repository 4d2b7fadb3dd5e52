"""The user directory merge against real servers: slapd (Mannheim), Samba's AD DC
(Heidelberg) and the federation's own slapd, started by `geofed ops directory up`.

One set of servers serves the module (loopback mode, about 5 s to start); each test
changes the homes through LDAP and puts them back. Samba's LDAP port is fixed (389),
so these tests need root and a free 127.0.0.1:389.
"""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import needs_root, run_geofed
from geofed import federation
from geofed.ops import directory, userbase, users

pytestmark = [needs_root, pytest.mark.slow]
FED = "dirtest"


def _port_389_free() -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", 389)) != 0


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    if not _port_389_free():
        pytest.skip("127.0.0.1:389 is taken (another AD site is up)")
    path = federation.derive(federation.load("ma-hd"), tmp_path_factory.mktemp("fed"), FED)
    res = run_geofed("ops", "directory", "up", str(path))
    assert res.returncode == 0, res.stderr
    try:
        yield federation.load(path)
    finally:
        res = run_geofed("ops", "directory", "down", str(path))
        assert res.returncode == 0, res.stderr
        assert not directory.run_dir(FED).exists()


@pytest.fixture
def home(fed):
    """Connections to the two homes and the admin directory, as their administrators."""
    state = directory.read_state(FED)
    conns = {k: users.connect(s, state["ca"]) for k, s in state["servers"].items()}
    yield conns
    for c in conns.values():
        c.unbind()


def sync(fed, out, *extra):
    return run_geofed("ops", "users", "sync", "-f", str(fed.path), "--out", str(out), *extra)


def passwd(out: Path) -> dict[str, list[str]]:
    return {line.split(":")[0]: line.split(":") for line in (out / "passwd").read_text().splitlines()}


def groups(out: Path) -> dict[str, list[str]]:
    return {line.split(":")[0]: line.split(":") for line in (out / "group").read_text().splitlines()}


def ok(conn) -> None:
    assert conn.result["result"] == 0, conn.result


def test_merge_of_the_fixture_prefixes_offsets_and_keeps_only_activated_enabled_users(fed, home, tmp_path):
    res = sync(fed, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    pw = passwd(tmp_path)
    merged = {n: (int(f[2]), int(f[3])) for n, f in pw.items()}
    expect = {u.name: (fed.site(code).directory.offset + u.uid, fed.site(code).directory.offset + u.gid)
              for code, site in (("M", userbase.MANNHEIM), ("H", userbase.HEIDELBERG))
              for u in site.users if u.activated and not u.disabled}
    assert merged == expect
    # Not activated (tmueller), disabled in AD (pfischer), no RFC 2307 ids (ksommer): not merged.
    assert {"tmueller", "pfischer", "ksommer"}.isdisjoint(merged)
    for name, (uid, gid) in merged.items():
        lo = 100000 if name in {u.name for u in userbase.MANNHEIM.users} else 200000
        assert lo <= uid < lo + 100000 and lo <= gid < lo + 100000
    gr = groups(tmp_path)
    assert set(gr) == {"marum", "maphysik", "mawiwi", "mabwgrid", "hdurz", "hdbioquant", "hdphyschem", "hdbwgrid"}
    assert gr["mabwgrid"][2] == "100530" and gr["hdbioquant"][2] == "203010"
    # Members are the merged users only: tmueller (wiwi) and pfischer (bioquant) are not.
    assert gr["mawiwi"][3] == "lbecker" and gr["hdbioquant"][3] == "jweber,kruse"
    # The merged directory holds no user's password (only the nodes' NSS account has one).
    home["admin"].search(fed.directory.base, "(&(objectClass=posixAccount)(userPassword=*))", attributes=["uid"])
    assert home["admin"].entries == []
    again = sync(fed, tmp_path)
    assert again.returncode == 0 and "made 0 changes" in again.stdout, again.stdout


def test_dry_run_prints_the_diff_and_changes_nothing(fed, home, tmp_path):
    assert sync(fed, tmp_path).returncode == 0
    m, admin = home["M"], home["admin"]
    dn = userbase.ldap_user_dn(fed.site("M").directory, "kredel")
    m.modify(dn, {"loginShell": [("MODIFY_REPLACE", ["/bin/zsh"])]})
    ok(m)
    try:
        res = sync(fed, tmp_path, "--dry-run")
        assert res.returncode == 0
        assert "~ user kredel loginShell: '/bin/bash' -> '/bin/zsh'" in res.stdout
        assert "would make 1 change;" in res.stdout
        admin.search(f"uid=kredel,ou=people,{fed.directory.base}", "(objectClass=*)", attributes=["loginShell"])
        assert admin.entries[0].loginShell.value == "/bin/bash"
        assert sync(fed, tmp_path).returncode == 0
        assert passwd(tmp_path)["kredel"][6] == "/bin/zsh"
    finally:
        m.modify(dn, {"loginShell": [("MODIFY_REPLACE", ["/bin/bash"])]})
        ok(m)


def test_deactivation_at_home_removes_the_merged_user_and_a_hand_made_entry_survives(fed, home, tmp_path):
    admin, m = home["admin"], home["M"]
    base = fed.directory.base
    hand = f"uid=backup,ou=people,{base}"
    admin.add(hand, ["account", "posixAccount"], {"uid": "backup", "cn": "backup service", "uidNumber": 999,
                                                  "gidNumber": 999, "homeDirectory": "/var/backups"})
    ok(admin)
    dn = userbase.ldap_user_dn(fed.site("M").directory, "lbecker")
    try:
        assert sync(fed, tmp_path).returncode == 0
        assert "lbecker" in passwd(tmp_path) and "backup" in passwd(tmp_path)
        m.modify(dn, {"employeeType": [("MODIFY_DELETE", [])]})
        ok(m)
        res = sync(fed, tmp_path)
        assert res.returncode == 0 and "- user lbecker" in res.stdout, res.stdout
        assert "lbecker" not in passwd(tmp_path)
        assert "lbecker" not in groups(tmp_path)["mabwgrid"][3].split(",")
        assert "backup" in passwd(tmp_path)  # never touched: it does not carry geofedEntry
        admin.search(hand, "(objectClass=*)", attributes=["cn"])
        assert admin.entries[0].cn.value == "backup service"
    finally:
        m.modify(dn, {"employeeType": [("MODIFY_REPLACE", ["bwgrid"])]})
        ok(m)
        admin.delete(hand)
        ok(admin)
    assert sync(fed, tmp_path).returncode == 0
    assert "lbecker" in passwd(tmp_path)


def test_every_collision_is_refused_and_named_and_the_rest_is_merged(fed, home, tmp_path):
    m, h, admin = home["M"], home["H"], home["admin"]
    md, hd = fed.site("M").directory, fed.site("H").directory
    assert sync(fed, tmp_path).returncode == 0
    made = []
    try:
        # The same activated name at both sites: hau is Heidelberg's, now Mannheim activates one too.
        m.add(userbase.ldap_user_dn(md, "hau"), ["inetOrgPerson", "posixAccount"],
              {"uid": "hau", "cn": "Hans Hau", "sn": "Hau", "uidNumber": 14000, "gidNumber": 500,
               "homeDirectory": "/home/hau", "employeeType": "bwgrid"})
        made.append((m, userbase.ldap_user_dn(md, "hau")))
        # An id that would land in another site's range: 150000 + 200000 >= 300000.
        h.add(userbase.ad_user_dn(hd, "bigid"), ["user"],
              {"sAMAccountName": "bigid", "uidNumber": 150000, "gidNumber": 3000, "employeeType": "bwgrid",
               "userAccountControl": 544})
        made.append((h, userbase.ad_user_dn(hd, "bigid")))
        # A group whose prefixed name a hand-made group of the admin directory holds.
        m.add(f"cn=staff,ou=groups,{md.base}", ["posixGroup"], {"cn": "staff", "gidNumber": 540})
        made.append((m, f"cn=staff,ou=groups,{md.base}"))
        admin.add(f"cn=mastaff,ou=groups,{fed.directory.base}", ["posixGroup"], {"cn": "mastaff", "gidNumber": 7})
        made.append((admin, f"cn=mastaff,ou=groups,{fed.directory.base}"))
        # An activated AD user without a uidNumber.
        h.modify(userbase.ad_user_dn(hd, "ksommer"), {"employeeType": [("MODIFY_REPLACE", ["bwgrid"])]})
        # And one change that is fine: a new Mannheim user.
        m.add(userbase.ldap_user_dn(md, "newbie"), ["inetOrgPerson", "posixAccount"],
              {"uid": "newbie", "cn": "New Bie", "sn": "Bie", "uidNumber": 14001, "gidNumber": 500,
               "homeDirectory": "/home/newbie", "employeeType": "bwgrid"})
        made.append((m, userbase.ldap_user_dn(md, "newbie")))
        for c, _ in made:
            ok(c)
        res = sync(fed, tmp_path)
        assert res.returncode == 1, res.stdout + res.stderr
        refused = set(re.findall(r"^! refused \w+ (\S+) \(([\w-]+)\)", res.stdout, re.M))
        assert refused == {("hau", "same-name"), ("bigid", "id-range"), ("mastaff", "group-clash"),
                           ("ksommer", "missing-id")}, res.stdout
        assert "M:uid=hau,ou=people,dc=uni-mannheim,dc=de" in res.stdout and "CN=hau,CN=Users" in res.stdout
        assert "+ user newbie" in res.stdout
        pw = passwd(tmp_path)
        assert pw["hau"][2] == "204101"  # the merged hau from an earlier sync stays as it was
        assert "bigid" not in pw and "ksommer" not in pw and "newbie" in pw
        assert groups(tmp_path)["mastaff"][2] == "7"  # the hand-made group, untouched
    finally:
        h.modify(userbase.ad_user_dn(hd, "ksommer"), {"employeeType": [("MODIFY_DELETE", [])]})
        for c, dn in reversed(made):
            c.delete(dn)
    assert sync(fed, tmp_path).returncode == 0
    assert "newbie" not in passwd(tmp_path)


def test_a_clash_of_two_sites_groups_after_prefixing(write_fed):
    """Prefixes "ma" and "m" make Mannheim's x and Heidelberg's ax both max (the merge on its own)."""
    fed = federation.load(write_fed(federation.resolve("ma-hd").read_text().replace('prefix = "hd"', 'prefix = "m"')))
    homes = {"M": users.HomeRead([], [{"name": "x", "dn": "cn=x", "gid": 1, "members": []}]),
             "H": users.HomeRead([], [{"name": "ax", "dn": "CN=ax", "gid": 2, "members": []}])}
    m = users.merge(fed, homes, {"users": {}, "groups": {}, "uids": {}, "gids": {}})
    assert m.groups == {} and [(c["kind"], c["name"]) for c in m.collisions] == [("group-clash", "max")]


def test_authentication_at_home_over_tls_and_a_wrong_password_is_rejected(fed, home, tmp_path):
    assert sync(fed, tmp_path).returncode == 0
    state = directory.read_state(FED)
    for site in ("M", "H"):  # LDAPS works against both homes with the federation's CA
        c = users.connect(state["servers"][site], state["ca"], ldaps=True)
        assert c.server.ssl and c.bound
        c.unbind()
    for name, site in (("kredel", "M"), ("hau", "H")):
        good = _check(fed, name, userbase.fixture_password(name))
        assert good.returncode == 0 and f"authenticated by site {site}" in good.stdout, good.stdout + good.stderr
        bad = _check(fed, name, "not-" + userbase.fixture_password(name))
        assert bad.returncode == 1 and "invalidCredentials" in bad.stdout
        empty = _check(fed, name, "")
        assert empty.returncode == 1 and "empty password" in empty.stdout
    assert _check(fed, "tmueller", userbase.fixture_password("tmueller")).returncode == 1  # not activated


def _check(fed, user, password):
    from conftest import GEOFED
    return subprocess.run([GEOFED, "ops", "users", "check", user, "-f", str(fed.path)], input=password + "\n",
                          capture_output=True, text=True, timeout=60)


def test_the_read_through_view_shows_both_homes_unchanged_beside_the_merged_copy(fed, tmp_path):
    assert sync(fed, tmp_path).returncode == 0
    r = users.show(fed, "hau")
    assert [e["uidNumber"] for e in r["view"]] == ["4101"] and r["view"][0]["dn"].endswith(f"ou=hd,ou=view,{fed.directory.base}")
    assert [e["uidNumber"] for e in r["merged"]] == ["204101"]
    state = directory.read_state(FED)
    c = users.connect(state["servers"]["admin"], state["ca"])
    c.search(directory.view_base(fed), "(|(uid=kredel)(uid=hau))", attributes=["uid"])
    assert sorted(e.uid.value for e in c.entries) == ["hau", "kredel"]  # one search, both sites
    c.unbind()


def test_a_server_that_limits_a_searchs_size_is_read_in_pages(fed, tmp_path, monkeypatch):
    """Active Directory answers a search of more than 1000 entries with sizeLimitExceeded
    (4); here an ldapsearch that answers every unpaged search so plays that part (Samba
    ignores a client's size limit) and hands paged ones to the real one."""
    (tmp_path / "ldapsearch").write_text('#!/bin/sh\ncase "$*" in *pr=*) exec /usr/bin/ldapsearch "$@";; esac\n'
                                         'exit 4\n')
    (tmp_path / "ldapsearch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    state = directory.read_state(FED)
    for code, site in (("M", userbase.MANNHEIM), ("H", userbase.HEIDELBERG)):
        at = directory.home(fed, state, code)
        home = (users.read_ldap if code == "M" else users.read_ad)(at, at["ca"], fed.site(code).directory)
        assert len(home.users) == sum(u.activated and not u.disabled for u in site.users) > 2
        assert len(home.groups) == len(site.groups)


def test_a_refused_write_is_named_and_the_others_are_made(fed, home, tmp_path):
    assert sync(fed, tmp_path).returncode == 0
    admin = directory.read_state(FED)["servers"]["admin"]
    base = fed.directory.base
    kredel = f"uid=kredel,ou=people,{base}"
    hand = f"cn=applytest,ou=groups,{base}"
    errors = users.apply(admin, [
        {"op": "add", "dn": kredel, "classes": ["account"], "attributes": {"uid": "kredel"}},
        {"op": "add", "dn": hand, "classes": ["posixGroup"], "attributes": {"cn": "applytest", "gidNumber": 8}},
        {"op": "delete", "dn": f"uid=nobody,ou=people,{base}"}])
    try:
        assert len(errors) == 2, errors
        assert f"add {kredel}: Already exists (68)" in errors
        assert any(e.startswith(f"delete uid=nobody,ou=people,{base}: No such object (32)") for e in errors)
        home["admin"].search(hand, "(objectClass=*)", attributes=["gidNumber"])
        assert home["admin"].entries[0].gidNumber.value == "8"
    finally:
        home["admin"].delete(hand)
        ok(home["admin"])
