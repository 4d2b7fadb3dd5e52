"""The user directory merge against real servers: slapd (Mannheim), Samba's AD DC
(Heidelberg) and the federation's own slapd, started by `geofed ops directory up`.

One set of servers serves the module (loopback mode, about 5 s to start); each test
changes the homes through LDAP and puts them back. Samba's LDAP port is fixed (389),
so these tests need root and a free 127.0.0.1:389.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import needs_root, run_geofed
from geofed import federation
from geofed.errors import UserError
from geofed.ops import directory, ldapcli, syncstate, userbase, users, usersync
from geofed.testbed.host import HostError

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


def test_users_removed_at_home_disappear_from_the_merged_directory(fed, home, tmp_path):
    m, h, admin = home["M"], home["H"], home["admin"]
    md, hd = fed.site("M").directory, fed.site("H").directory
    richling = next(u for u in userbase.MANNHEIM.users if u.name == "richling")
    nschulz = next(u for u in userbase.HEIDELBERG.users if u.name == "nschulz")
    m_dn, h_dn = userbase.ldap_user_dn(md, "richling"), userbase.ad_user_dn(hd, "nschulz")
    m_entry = dict(next(a for dn, a in userbase.ldap_entries(md, userbase.HomeSite([richling], [])) if dn == m_dn))
    assert sync(fed, tmp_path).returncode == 0
    assert {"richling", "nschulz"} <= set(passwd(tmp_path))
    m.delete(m_dn)
    ok(m)
    h.delete(h_dn)
    ok(h)
    try:
        res = sync(fed, tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "- user richling" in res.stdout and "- user nschulz" in res.stdout, res.stdout
        assert {"richling", "nschulz"}.isdisjoint(passwd(tmp_path))
        # OpenLDAP keeps a deleted user's memberUid in its groups: the merge still drops it.
        gr = groups(tmp_path)
        assert "richling" not in gr["marum"][3].split(",") and "nschulz" not in gr["hdbwgrid"][3].split(",")
        for name in ("richling", "nschulz"):
            admin.search(fed.directory.base, f"(uid={name})", attributes=["uid"])
            assert admin.entries == []
    finally:
        m.add(m_dn, attributes=m_entry)
        ok(m)
        h.add(h_dn, ["user"], {"sAMAccountName": "nschulz", "displayName": nschulz.gecos,
                               "uidNumber": nschulz.uid, "gidNumber": nschulz.gid,
                               "unixHomeDirectory": "/home/nschulz", "loginShell": "/bin/bash",
                               "employeeType": "bwgrid", "userAccountControl": userbase.UF_NORMAL_ACCOUNT,
                               "unicodePwd": f'"{nschulz.password}"'.encode("utf-16-le")})
        ok(h)
        for g in userbase.HEIDELBERG.groups:
            if "nschulz" in g.members:
                h.modify(f"CN={g.name},CN=Users,{hd.base}", {"member": [("MODIFY_ADD", [h_dn])]})
                ok(h)
    assert sync(fed, tmp_path).returncode == 0
    assert {"richling", "nschulz"} <= set(passwd(tmp_path))
    assert "nschulz" in groups(tmp_path)["hdbwgrid"][3].split(",")


def test_the_bulk_load_floor_loads_into_a_fresh_database_and_refuses_bad_input(fed, tmp_path):
    state = directory.read_state(FED)
    base = fed.directory.base
    entry = (f"uid=floor1,ou=people,{base}", {"objectClass": users.USER_CLASSES, "uid": "floor1", "cn": "floor",
                                              "uidNumber": "100001", "gidNumber": "100001",
                                              "homeDirectory": "/home/floor1", "geofedSite": "M",
                                              "geofedSource": "uid=floor1", "geofedDigest": "0"})
    assert directory.bulk_load_floor(state, [entry], tmp_path / "good") > 0
    dump = subprocess.run(["slapcat", "-f", str(tmp_path / "good" / "slapd.conf"), "-b", base],
                          capture_output=True, text=True, check=True).stdout
    assert f"dn: uid=floor1,ou=people,{base}" in dump and "dn: cn=geofed-nss," in dump
    with pytest.raises(UserError, match="good exists; it must be a fresh directory"):
        directory.bulk_load_floor(state, [entry], tmp_path / "good")
    with pytest.raises(UserError, match="no entries to load"):
        directory.bulk_load_floor(state, [], tmp_path / "none")
    # An entry outside the admin's naming context: slapadd's refusal is named.
    with pytest.raises(HostError, match=r"slapadd into .*bad.*dc=elsewhere"):
        directory.bulk_load_floor(state, [("uid=x,dc=elsewhere", entry[1])], tmp_path / "bad")
    assert "floor1" not in subprocess.run(["slapcat", "-f", str(Path(state["servers"]["admin"]["dir"]) / "slapd.conf"),
                                           "-b", base], capture_output=True, text=True).stdout


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


def test_a_search_is_split_as_its_output_comes(fed, monkeypatch):
    """ldapsearch's LDIF split a piece at a time as it comes: in pieces of a few characters
    (every boundary inside a line or an entry) the same entries as in one piece."""
    state = directory.read_state(FED)
    at, md = directory.home(fed, state, "M"), fed.site("M").directory
    whole = ldapcli.search(at, at["ca"], md.base, "(objectClass=*)", ["*", "entryUUID"])
    monkeypatch.setattr(ldapcli, "PIECE", 5)
    assert ldapcli.search(at, at["ca"], md.base, "(objectClass=*)", ["*", "entryUUID"]) == whole and len(whole) > 10


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


def _record(res) -> dict:
    """The directory.sync record a `users sync` saved."""
    path = re.search(r"^record: (\S+)$", res.stdout, re.M).group(1)
    return json.loads(Path(path).read_text())["data"]


def test_an_incremental_sync_picks_up_a_change_an_add_and_a_delete_at_each_home(fed, home, tmp_path):
    """After a sync, the next reads only what changed (the record says incremental) and
    makes what a full read would: a full sync from no state afterwards changes nothing."""
    m, h = home["M"], home["H"]
    md, hd = fed.site("M").directory, fed.site("H").directory
    assert sync(fed, tmp_path).returncode == 0
    res = sync(fed, tmp_path)
    assert res.returncode == 0 and "made 0 changes" in res.stdout and _record(res)["incremental"], res.stdout
    m_new, h_new = userbase.ldap_user_dn(md, "mnew"), userbase.ad_user_dn(hd, "hnew")
    kredel, hau = userbase.ldap_user_dn(md, "kredel"), userbase.ad_user_dn(hd, "hau")
    m.add(m_new, ["inetOrgPerson", "posixAccount"], {"uid": "mnew", "cn": "M New", "sn": "New", "uidNumber": 14010,
                                                     "gidNumber": 500, "homeDirectory": "/home/mnew",
                                                     "employeeType": "bwgrid"})
    ok(m)
    m.modify(f"cn=bwgrid,ou=groups,{md.base}", {"memberUid": [("MODIFY_ADD", ["mnew"])]})
    ok(m)
    h.add(h_new, ["user"], {"sAMAccountName": "hnew", "uidNumber": 14011, "gidNumber": 3000,
                            "employeeType": "bwgrid", "userAccountControl": 544})
    ok(h)
    # At AD a member added changes the group, not the user: its members are read again.
    h.modify(f"CN=bwgrid,CN=Users,{hd.base}", {"member": [("MODIFY_ADD", [h_new])]})
    ok(h)
    for c, dn in ((m, kredel), (h, hau)):
        c.modify(dn, {"loginShell": [("MODIFY_REPLACE", ["/bin/zsh"])]})
        ok(c)
    try:
        # A dry run shows the changes and leaves the state as it was.
        kept = {name: (directory.run_dir(FED) / name).read_bytes() for name in (syncstate.SUMMARY, syncstate.CACHE)}
        res = sync(fed, tmp_path, "--dry-run")
        assert res.returncode == 0 and "+ user mnew" in res.stdout and "+ user hnew" in res.stdout, res.stdout
        assert {name: (directory.run_dir(FED) / name).read_bytes() for name in kept} == kept
        res = sync(fed, tmp_path)
        assert res.returncode == 0 and _record(res)["incremental"], res.stdout + res.stderr
        for line in ("+ user mnew", "+ user hnew", "~ user kredel loginShell: '/bin/bash' -> '/bin/zsh'",
                     "~ user hau loginShell: '/bin/bash' -> '/bin/zsh'", "~ group mabwgrid", "~ group hdbwgrid"):
            assert line in res.stdout, res.stdout
        pw, gr = passwd(tmp_path), groups(tmp_path)
        assert pw["mnew"][2] == "114010" and pw["hnew"][2] == "214011"
        assert pw["kredel"][6] == pw["hau"][6] == "/bin/zsh"
        assert "mnew" in gr["mabwgrid"][3].split(",") and "hnew" in gr["hdbwgrid"][3].split(",")
        files = _files(tmp_path)
        _full_read_agrees(fed, tmp_path)
        assert _files(tmp_path) == files  # line for line as the incremental sync wrote them
        m.delete(m_new)
        ok(m)
        h.delete(h_new)
        ok(h)
        res = sync(fed, tmp_path)
        assert res.returncode == 0 and _record(res)["incremental"], res.stdout + res.stderr
        assert "- user mnew" in res.stdout and "- user hnew" in res.stdout, res.stdout
        pw, gr = passwd(tmp_path), groups(tmp_path)
        assert {"mnew", "hnew"}.isdisjoint(pw)
        assert "mnew" not in gr["mabwgrid"][3].split(",") and "hnew" not in gr["hdbwgrid"][3].split(",")
        files = _files(tmp_path)
        _full_read_agrees(fed, tmp_path)
        assert _files(tmp_path) == files
    finally:
        for c, dn in ((m, m_new), (h, h_new)):
            c.delete(dn)  # gone already where the test got that far
        m.modify(f"cn=bwgrid,ou=groups,{md.base}", {"memberUid": [("MODIFY_DELETE", ["mnew"])]})
        for c, dn in ((m, kredel), (h, hau)):
            c.modify(dn, {"loginShell": [("MODIFY_REPLACE", ["/bin/bash"])]})
            ok(c)
    assert sync(fed, tmp_path).returncode == 0
    assert passwd(tmp_path)["kredel"][6] == "/bin/bash"


def test_what_left_a_home_is_named_by_its_refresh_or_else_listed(fed, home, monkeypatch):
    """An OpenLDAP home's syncprov names the entries that left since a mark from its session
    log (RFC 4533 refresh); where it cannot (a mark older than the log: from before the
    server started; a server without syncprov: Samba's AD DC takes the control and never
    ends the refresh), the sync lists the home instead, and the deleted user is missing
    from the listing. (An AD home is always listed: the incremental test above.)"""
    state = directory.read_state(FED)
    md, hd = fed.site("M").directory, fed.site("H").directory
    at, at_h = directory.home(fed, state, "M"), directory.home(fed, state, "H")
    dn = userbase.ldap_user_dn(md, "mgone")
    home["M"].add(dn, ["inetOrgPerson", "posixAccount"], {"uid": "mgone", "cn": "M Gone", "sn": "Gone",
                                                          "uidNumber": 14020, "gidNumber": 500,
                                                          "homeDirectory": "/home/mgone", "employeeType": "bwgrid"})
    ok(home["M"])
    try:
        home["M"].search(dn, "(objectClass=*)", search_scope="BASE", attributes=["entryUUID"])
        uuid = home["M"].entries[0].entryUUID.value.lower()
        mark = syncstate.home_mark("ldap", at)["csn"]
        home["M"].delete(dn)
        ok(home["M"])
        assert ldapcli.left_since(at, at["ca"], md.base, users.ldap_user_filter(md), mark) == {uuid}
        ch = syncstate.read_changes(at, md, {"csn": mark}, by_uuid=True)
        assert ch.user_dns is None and ch.users_left == {uuid} and ch.group_dns is None
        before_start = ["20000101000000.000000Z#000000#000#000000"]
        assert ldapcli.left_since(at, at["ca"], md.base, users.ldap_user_filter(md), before_start) is None
        ch = syncstate.read_changes(at, md, {"csn": before_start}, by_uuid=True)
        kredel = userbase.ldap_user_dn(md, "kredel").lower()
        assert ch.user_dns is not None and kredel in ch.user_dns and dn.lower() not in ch.user_dns
        assert ch.group_dns is not None and not ch.users_left
        monkeypatch.setattr(ldapcli, "REFRESH_TIMEOUT_S", 5.0)
        assert ldapcli.left_since(at_h, at_h["ca"], hd.base, users.ad_user_filter(hd), mark) is None
    finally:
        home["M"].delete(dn)  # gone already where the test got that far


def _full_read_agrees(fed, out):
    """A sync that reads everything (its state dropped) finds nothing left to change."""
    syncstate.drop(fed)
    res = sync(fed, out)
    assert res.returncode == 0 and not _record(res)["incremental"] and "made 0 changes" in res.stdout, res.stdout


def _files(out: Path) -> list[str]:
    return [(out / name).read_text() for name in ("passwd", "group")]


def test_a_lost_or_doubtful_state_falls_back_to_a_full_read(fed, home, tmp_path):
    m, admin = home["M"], home["admin"]
    kredel = userbase.ldap_user_dn(fed.site("M").directory, "kredel")
    state_dir = directory.run_dir(FED)

    def shell(value):
        m.modify(kredel, {"loginShell": [("MODIFY_REPLACE", [value])]})
        ok(m)

    def synced_full(value):
        res = sync(fed, tmp_path)
        assert res.returncode == 0 and not _record(res)["incremental"], res.stdout + res.stderr
        assert passwd(tmp_path)["kredel"][6] == value
    assert sync(fed, tmp_path).returncode == 0
    older = (state_dir / syncstate.CACHE).read_bytes()
    try:
        # Lost: the cache gone.
        shell("/bin/zsh")
        (state_dir / syncstate.CACHE).unlink()
        synced_full("/bin/zsh")
        # Not of the last sync: an older cache put back.
        shell("/bin/sh")
        (state_dir / syncstate.CACHE).write_bytes(older)
        synced_full("/bin/sh")
        # Unreadable.
        shell("/bin/zsh")
        (state_dir / syncstate.CACHE).write_bytes(b"not a cache")
        synced_full("/bin/zsh")
        # Of the version before (one pickle): rebuilt by a full read, the old file removed.
        shell("/bin/sh")
        summary = json.loads((state_dir / syncstate.SUMMARY).read_text())
        (state_dir / syncstate.SUMMARY).write_text(json.dumps(dict(summary, version=1)))
        (state_dir / syncstate.OLD_CACHE).write_bytes(b"a version 1 cache")
        synced_full("/bin/sh")
        assert not (state_dir / syncstate.OLD_CACHE).exists()
        # Of the version before this one (SQLite, other tables): rebuilt by a full read.
        shell("/bin/zsh")
        summary = json.loads((state_dir / syncstate.SUMMARY).read_text())
        (state_dir / syncstate.SUMMARY).write_text(json.dumps(dict(summary, version=syncstate.VERSION - 1)))
        synced_full("/bin/zsh")
        shell("/bin/zsh")
        # The merged directory written by hand: what it holds is read again.
        hand = f"uid=kredel2,ou=people,{fed.directory.base}"
        admin.add(hand, ["account", "posixAccount"], {"uid": "kredel2", "cn": "x", "uidNumber": 998,
                                                      "gidNumber": 998, "homeDirectory": "/tmp"})
        ok(admin)
        try:
            synced_full("/bin/zsh")
            assert "kredel2" in passwd(tmp_path)
        finally:
            admin.delete(hand)
            ok(admin)
        synced_full("/bin/zsh")
        assert "kredel2" not in passwd(tmp_path)
    finally:
        shell("/bin/bash")
    res = sync(fed, tmp_path)
    assert res.returncode == 0 and _record(res)["incremental"] and passwd(tmp_path)["kredel"][6] == "/bin/bash"


def test_a_first_sync_into_an_empty_admin_directory_loads_offline(fed, tmp_path, monkeypatch):
    """With none of sync's entries in the admin directory, the first sync's adds go in by
    slapadd with slapd stopped a moment; a hand-made entry there survives. A failed
    offline load writes the entries one by one."""
    state = directory.read_state(FED)
    base = fed.directory.base
    hand = f"cn=local,ou=groups,{base}"

    def admin():  # a connection of its own each time: the server restarts between them
        return users.connect(state["servers"]["admin"], state["ca"])

    def empty_admin():
        c = admin()
        c.search(base, f"(objectClass={users.OWNED_CLASS})", attributes=["geofedSite"])
        for dn in [e.entry_dn for e in c.entries]:
            c.delete(dn)
            ok(c)
        c.unbind()
        syncstate.drop(fed)
    c = admin()
    c.add(hand, ["posixGroup"], {"cn": "local", "gidNumber": 77})
    ok(c)
    c.unbind()
    monkeypatch.setattr(usersync, "OFFLINE_MIN", 1)
    try:
        assert sync(fed, tmp_path).returncode == 0
        expected = passwd(tmp_path), groups(tmp_path)
        empty_admin()
        before = directory.read_state(FED)["daemons"]["admin"]["pid"]
        data = usersync.sync(fed, out=tmp_path)
        assert not data["errors"] and data["counts"]["add_users"] == len(expected[0])
        assert directory.read_state(FED)["daemons"]["admin"]["pid"] != before  # loaded offline
        assert (passwd(tmp_path), groups(tmp_path)) == expected
        c = admin()
        c.search(hand, "(objectClass=*)", attributes=["gidNumber"])
        assert c.entries[0].gidNumber.value == "77"
        c.unbind()
        res = sync(fed, tmp_path)
        assert res.returncode == 0 and "made 0 changes" in res.stdout
        # slapadd refusing: the same adds one by one, over LDAP.
        empty_admin()
        before = directory.read_state(FED)["daemons"]["admin"]["pid"]
        monkeypatch.setattr(directory, "SLAPADD", "/bin/false")
        data = usersync.sync(fed, out=tmp_path)
        assert not data["errors"] and (passwd(tmp_path), groups(tmp_path)) == expected
        assert directory.read_state(FED)["daemons"]["admin"]["pid"] == before
    finally:
        c = admin()
        c.delete(hand)
        ok(c)
        c.unbind()
    _full_read_agrees(fed, tmp_path)
