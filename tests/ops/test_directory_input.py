"""The federation file's directory sections, the merge's rules on their own, and bad input
to the directory commands (exit 2, one line, nothing made). No servers needed."""

from __future__ import annotations

import base64
import hashlib

import pytest

from conftest import run_geofed
from geofed import federation
from geofed.errors import UserError
from geofed.ops import directory, ldapcli, syncstate, users
from geofed.ops.users import HomeRead

MA_HD = federation.resolve("ma-hd").read_text()


# A centre's own server, as a site's directory section names it.
SERVER = ('uri = "ldap://ldap.uni-mannheim.de:389"\nbind_dn = "cn=geofed-reader,dc=uni-mannheim,dc=de"\n'
          'password_file = "pw"\nca_file = "/etc/ssl/certs/ca-certificates.crt"\n')


def with_(old: str, new: str) -> str:
    assert old in MA_HD, old
    return MA_HD.replace(old, new, 1)


def test_ma_hd_declares_seed_001s_rules():
    fed = federation.load("ma-hd")
    m, h = fed.site("M").directory, fed.site("H").directory
    assert (m.kind, m.prefix, m.offset, m.base) == ("ldap", "ma", 100000, "dc=uni-mannheim,dc=de")
    assert (h.kind, h.prefix, h.offset, h.base, h.domain) == ("ad", "hd", 200000, "DC=ad,DC=uni-heidelberg,DC=de",
                                                              "UNIHD")
    assert (m.activation_attribute, m.activation_value) == ("employeeType", "bwgrid")
    assert m.merged_id(0) == 100000 and m.merged_id(99999) == 199999 and m.merged_id(100000) is None
    assert m.merged_id(-1) is None
    assert fed.directory.base == "o=bwgrid-ma-hd" and fed.directory.site == "M"
    assert federation.load("icm-task").directory is None


BAD = [
    (with_('kind = "ldap"', 'kind = "nis"'), "site[0].directory.kind: must be one of ldap, ad"),
    (with_('prefix = "hd"', 'prefix = "ma"'), "site[1].directory.prefix: 'ma' is site M's prefix too"),
    (with_('offset = 200000', 'offset = 150000'), "site[1].directory.offset: ids 150000-249999 overlap site M's"),
    (with_('prefix = "ma"', 'prefix = "Ma!"'), "site[0].directory.prefix: must be 1-8 lowercase"),
    (with_('offset = 100000', 'offset = -5'), "site[0].directory.offset: must be at least 1"),
    (with_('offset = 200000', 'offset = 2147483000'), "exceed 2147483647"),
    (with_('activation = "employeeType=bwgrid"\n', 'activation = "bwgrid"\n'), "directory.activation: must be ATTRIBUTE=VALUE"),
    (with_('realm = "ad.uni-heidelberg.de"', 'realm = "heidelberg"'), "site[1].directory.realm: must be a DNS domain"),
    (with_('realm = "ad.uni-heidelberg.de"', 'base = "dc=x"'), "an Active Directory's base follows from its realm"),
    (with_('base = "dc=uni-mannheim,dc=de"', 'base = "uni-mannheim"'), "site[0].directory.base: must be a DN"),
    (with_('base = "dc=uni-mannheim,dc=de"', 'base = "dc=uni-mannheim,dc=de"\nrealm = "x.de"'), "only an Active Directory"),
    (with_('site = "M"\n', 'site = "Q"\n'), "directory.site: unknown site 'Q'"),
    (with_('base = "o=bwgrid-ma-hd"', 'base = "dc=uni-mannheim,dc=de"'), "a site's own naming context"),
    (with_('[site.directory]\nkind = "ldap"', '[site.directory]\nkind = "ldap"\nuri = "ldap://ldap.uni-mannheim.de"'),
     "site[0].directory.bind_dn: missing: uri, bind_dn, password_file, ca_file name a site's own server together"),
    (with_('[site.directory]\nkind = "ldap"', '[site.directory]\nkind = "ldap"\n' + SERVER.replace("ldap://", "http://")),
     "site[0].directory.uri: must be ldap://HOST[:PORT] or ldaps://HOST[:PORT], got 'http://"),
    (with_('[site.directory]\nkind = "ad"', '[site.directory]\nkind = "ad"\n' + SERVER.replace("cn=geofed-reader,", "")
           .replace("dc=uni-mannheim,dc=de", "reader")), "site[1].directory.bind_dn: must be a DN"),
    (with_('[site.directory]\nkind = "ldap"', '[site.directory]\nkind = "ldap"\n' + SERVER.replace('"pw"', '""')),
     "site[0].directory.password_file: must be a file's path"),
    (with_('[site.directory]\nkind = "ldap"', '[site.directory]\nkind = "ldap"\n' + SERVER + "port = 389\n"),
     "site[0].directory.port: unknown key"),
    ('name = "t"\n[directory]\n[[site]]\ncode = "W"\nnodes = 1\n', "no [site.directory] is declared"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_directory_sections_name_their_place(write_fed, text, message):
    path = write_fed(text)
    with pytest.raises(UserError) as e:
        federation.load(path)
    assert str(path) in str(e.value) and message in str(e.value)


def test_a_centres_own_server_is_read_with_its_password_file_and_ca(write_fed):
    path = write_fed(with_('[site.directory]\nkind = "ldap"', '[site.directory]\nkind = "ldap"\n' + SERVER))
    fed = federation.load(path)
    m = fed.site("M").directory
    assert (m.uri, m.bind_dn, m.password_file) == ("ldap://ldap.uni-mannheim.de:389",
                                                   "cn=geofed-reader,dc=uni-mannheim,dc=de", path.parent / "pw")
    assert not directory.own_server(m) and directory.own_server(fed.site("H").directory)
    with pytest.raises(UserError) as e:  # read when used: a missing file is named with its key
        directory.home(fed, {}, "M")
    assert str(e.value) == f"{path}: site[0].directory.password_file: cannot read {path.parent / 'pw'}: " \
                           "No such file or directory"
    (path.parent / "pw").write_text("\n")
    with pytest.raises(UserError, match=r"site\[0\]\.directory\.password_file: .* is empty"):
        directory.home(fed, {}, "M")
    (path.parent / "pw").write_text("Secret-1\n")
    assert directory.home(fed, {}, "M") == {"uri": m.uri, "bind_dn": m.bind_dn, "password": "Secret-1",
                                            "ca": "/etc/ssl/certs/ca-certificates.crt", "base": m.base}


def no_held():
    return {"users": {}, "groups": {}, "uids": {}, "gids": {}}


def user(name, uid, gid=1, activated=True, dn=None):
    return {"name": name, "dn": dn or f"uid={name}", "uid": uid, "gid": gid, "gecos": name, "home": f"/home/{name}",
            "shell": "/bin/sh", "activated": activated}


def test_the_merge_takes_ids_to_the_last_of_the_range_and_refuses_one_beyond():
    fed = federation.load("ma-hd")
    homes = {"M": HomeRead([user("edge", 99999), user("over", 100000), user("off", 5, activated=False)], []),
             "H": HomeRead([user("none", None)], [])}
    m = users.merge(fed, homes, no_held())
    assert {n: u["uidNumber"] for n, u in m.users.items()} == {"edge": 199999}
    assert sorted((c["kind"], c["name"]) for c in m.collisions) == [("id-range", "over"), ("missing-id", "none")]


def test_names_and_ids_held_by_hand_made_entries_are_refused():
    fed = federation.load("ma-hd")
    held = dict(no_held(), users={"root2": {"dn": "uid=root2,ou=people,o=x"}}, uids={100007: "uid=svc,ou=people,o=x"})
    homes = {"M": HomeRead([user("root2", 1), user("clash", 7), user("fine", 8)], []), "H": HomeRead([], [])}
    m = users.merge(fed, homes, held)
    assert list(m.users) == ["fine"]
    assert sorted((c["kind"], c["name"]) for c in m.collisions) == [("id-taken", "clash"), ("name-taken", "root2")]


def test_a_refused_name_keeps_what_an_earlier_sync_made_of_it():
    fed = federation.load("ma-hd")
    homes = {"M": HomeRead([user("dup", 1)], []), "H": HomeRead([user("dup", 2)], [])}
    m = users.merge(fed, homes, no_held())
    earlier = {"dup": {"dn": "uid=dup,ou=people,o=x", "uidNumber": "100001"}}
    assert m.users == {} and users.plan(m, earlier, {}, "o=x") == []


@pytest.mark.parametrize("argv,message", [
    (["ops", "directory", "up", "icm-task"], "declares no [site.directory]"),
    (["ops", "users", "sync", "-f", "icm-task"], "declares no [site.directory]"),
    (["ops", "users", "check", "kredel", "-f", "{fed}"], "are not up; run: geofed ops directory up"),
    (["ops", "users", "show", "kredel", "-f", "{fed}"], "are not up"),
    (["ops", "users", "check", "kredel", "-f", "{fed}", "--password-file", "/nonexistent/pw"], "--password-file"),
    (["ops", "directory", "up", "/nonexistent/fed.toml"], "no such federation file"),
    (["bench", "directory", "--users", "0"], "--users"),
    (["bench", "directory", "--changed", "1.5"], "--changed"),
    (["bench", "directory", "--changed", "nan"], "--changed"),
    (["bench", "directory", "--users", "995000"], "--users 995000: at most 990000"),
    (["bench", "directory", "--users", "100", "--groups", "200"], "--groups 200: at most --users (100)"),
])
def test_bad_input_to_the_directory_commands(argv, message, tmp_path, write_fed):
    fed = federation.derive(federation.load("ma-hd"), tmp_path, "dirinput")
    res = run_geofed(*[a.replace("{fed}", str(fed)) for a in argv])
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and message in res.stderr, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dirinput.toml"]


def test_each_refusal_names_its_reason_and_sources_and_members_are_the_sites_merged_users():
    """The merge (compiled, rust/ldif) says what it refused as users read it, in the order
    found; a group keeps the members that are merged users of its own site, `outside`
    ones included, lower case, each once."""
    fed = federation.load("ma-hd")  # offsets 100000 (M, prefix ma) and 200000 (H, prefix hd), ranges 100000
    homes = {"M": HomeRead([user("dup", 1), user("far", 100000, dn="uid=far,o=m"), user("nogid", 2, gid=None),
                            user("a", 3), user("Bad Name", 4)],
                           [{"name": "Staff", "dn": "cn=Staff,o=m", "gid": 5, "members": ["A", "a", "h1", "kept"]},
                            {"name": "\u00c4rzte", "dn": "cn=aerzte,o=m", "gid": 6, "members": []},
                            {"name": "big", "dn": "cn=big,o=m", "gid": 100000, "members": []},
                            {"name": "svc", "dn": "cn=svc,o=m", "gid": 7, "members": []}]),
             "H": HomeRead([user("dup", 9, dn="uid=dup,o=h"), user("h1", 10)],
                           [{"name": "x", "dn": "cn=x,o=h", "gid": 8, "members": ["h1", "a"]}])}
    held = dict(no_held(), gids={100007: "cn=svc,ou=groups,o=x"})
    m = users.merge(fed, homes, held, outside={"kept": "M", "elsewhere": "H"})
    assert [(c["kind"], c["entry"], c["name"], c["detail"], c["sources"]) for c in m.collisions] == [
        ("id-range", "user", "far", "uidNumber 100000 + 100000 leaves site M's range 100000-199999", ["M:uid=far,o=m"]),
        ("missing-id", "user", "nogid", "activated at M without a gidNumber", ["M:uid=nogid"]),
        ("bad-name", "user", "Bad Name", "not a POSIX login name (a-z 0-9 _ . -, at most 32)", ["M:uid=Bad Name"]),
        ("same-name", "user", "dup", "activated at M and H: user names must be unique across the federation",
         ["M:uid=dup", "H:uid=dup,o=h"]),
        ("bad-name", "group", "ma\u00e4rzte", "not a POSIX group name after prefixing (a-z 0-9 _ . -, at most 32)",
         ["M:cn=aerzte,o=m"]),
        ("id-range", "group", "mabig", "gidNumber 100000 + 100000 leaves site M's range 100000-199999",
         ["M:cn=big,o=m"]),
        ("id-taken", "group", "masvc", "gidNumber 100007 belongs to the hand-made cn=svc,ou=groups,o=x",
         ["M:cn=svc,o=m"])]
    assert list(m.users) == ["a", "h1"] and m.users["h1"]["uidNumber"] == 200010
    assert m.groups["mastaff"]["memberUid"] == ["a", "kept"] and m.groups["hdx"]["memberUid"] == "h1"
    assert m.read == {"M": {"activated": 5, "groups": 4}, "H": {"activated": 2, "groups": 1}}


def test_names_that_are_no_posix_names_are_refused():
    fed = federation.load("ma-hd")
    long = "g" * 31  # 33 characters with the prefix
    homes = {"M": HomeRead([user("John Smith", 1), user("ok.name", 2)], [{"name": long, "dn": "cn=g", "gid": 3,
                                                                          "members": []}]),
             "H": HomeRead([], [])}
    m = users.merge(fed, homes, no_held())
    assert list(m.users) == ["ok.name"] and m.groups == {}
    assert sorted((c["kind"], c["name"]) for c in m.collisions) == [("bad-name", "John Smith"), ("bad-name", "ma" + long)]


def test_a_group_without_members_is_stable_across_syncs():
    """The admin server has no memberUid for it; the merge wants none: no change, by the
    stored digest, and by the attributes where the digest is stale."""
    fed = federation.load("ma-hd")
    homes = {"M": HomeRead([], [{"name": "empty", "dn": "cn=empty", "gid": 1, "members": []}]), "H": HomeRead([], [])}
    m = users.merge(fed, homes, no_held())
    [add] = users.plan(m, {}, {}, "o=x")
    assert add["op"] == "add" and "memberUid" not in add["attributes"]
    stored = dict(add["attributes"], dn=add["dn"], gidNumber="100001", memberUid=None)
    assert users.plan(m, {}, {"maempty": {"dn": add["dn"], "geofedDigest": stored["geofedDigest"], "partial": True}},
                      "o=x") == []
    stale = {"maempty": {"dn": add["dn"], "geofedDigest": "stale", "partial": True}}
    [fix] = users.plan(m, {}, stale, "o=x", fetch=lambda kind, dns: {add["dn"]: dict(stored, geofedDigest="stale")})
    assert fix["op"] == "modify" and fix["attributes"] == {"geofedDigest": stored["geofedDigest"]}


def test_a_merged_entry_is_written_with_the_digest_earlier_syncs_stored():
    """The digest's text is fixed: entries an earlier sync wrote keep matching (no change)."""
    fed = federation.load("ma-hd")
    homes = {"M": HomeRead([user("b", 7), user("a", 8)], [{"name": "g", "dn": "cn=g", "gid": 3, "members": ["B", "a"]},
                                                          {"name": "one", "dn": "cn=one", "gid": 4, "members": ["a"]}]),
             "H": HomeRead([], [])}
    m = users.merge(fed, homes, no_held())

    def digest(lines: str) -> str:
        return hashlib.sha256(lines.encode()).hexdigest()
    assert m.wanted("user", "a") == {
        "cn": "a", "uidNumber": 100008, "gidNumber": 100001, "homeDirectory": "/home/a", "loginShell": "/bin/sh",
        "gecos": "a", "geofedSite": "M", "geofedSource": "uid=a",
        "geofedDigest": digest("cn\ta\ngecos\ta\ngeofedSite\tM\ngeofedSource\tuid=a\ngidNumber\t100001\n"
                               "homeDirectory\t/home/a\nloginShell\t/bin/sh\nuidNumber\t100008")}
    assert m.wanted("group", "mag") == {
        "gidNumber": 100003, "memberUid": ["a", "b"], "geofedSite": "M", "geofedSource": "cn=g",
        "geofedDigest": digest("geofedSite\tM\ngeofedSource\tcn=g\ngidNumber\t100003\nmemberUid\ta,b")}
    assert m.wanted("group", "maone")["memberUid"] == "a"
    assert m.want("user") == {"a": m.wanted("user", "a"), "b": m.wanted("user", "b")}


def test_ldif_from_ldapsearch_is_split_into_entries_with_the_names_asked_for():
    text = ("# refldap://ad.example/CN=Configuration,DC=ad\n"
            "dn: uid=a,ou=people,o=x\nuidnumber: 7\nmemberOf: cn=g1\nmemberOf: cn=g2\n\n"
            f"dn:: {base64.b64encode('cn=Jürgen,o=x'.encode()).decode()}\n"
            f"gecos:: {base64.b64encode(' Jürgen '.encode()).decode()}\n")
    assert ldapcli.parse(text, {"uidnumber": "uidNumber"}) == [
        ("uid=a,ou=people,o=x", {"uidNumber": ["7"], "memberOf": ["cn=g1", "cn=g2"]}),
        ("cn=Jürgen,o=x", {"gecos": [" Jürgen "]})]
    assert ldapcli.parse("") == []
    # Without base64 or comments (the way most reads come), the same entries.
    plain = "dn: uid=a,o=x\nuidnumber: 7\nmemberOf: cn=g1\nmemberOf: cn=g2\ngecos:\n\ndn: uid=b,o=x\ncn: B: b\n\n"
    assert ldapcli.parse(plain, {"uidnumber": "uidNumber"}) == [
        ("uid=a,o=x", {"uidNumber": ["7"], "memberOf": ["cn=g1", "cn=g2"], "gecos": [""]}),
        ("uid=b,o=x", {"cn": ["B: b"]})] == ldapcli.parse("# a comment\n" + plain, {"uidnumber": "uidNumber"})


def test_entries_become_ldif_with_base64_exactly_where_a_value_needs_it():
    plain = [("uid=a,ou=people,o=x", {"objectClass": ["account", "posixAccount"], "uidNumber": 100007,
                                      "gecos": "A: B", "memberUid": None}),
             ("cn=g,ou=groups,o=x", {"memberUid": ["a", "b"]})]
    assert ldapcli.entries_text(plain) == ("dn: uid=a,ou=people,o=x\nobjectClass: account\nobjectClass: posixAccount\n"
                                           "uidNumber: 100007\ngecos: A: B\n\ndn: cn=g,ou=groups,o=x\nmemberUid: a\n"
                                           "memberUid: b\n")
    # Each value LDIF cannot carry as it is, among plain ones; and one that only looks so.
    for odd in ("Jürgen", " lead", ":colon", "<angle", "trail ", "two\nlines", "tab\there", "", "a: :b"):
        entries = plain + [("cn=odd,o=x", {"gecos": odd, "cn": "odd"})]
        text = ldapcli.entries_text(entries)
        assert ldapcli.line("gecos", odd) in text.split("\n"), odd
        assert ldapcli.parse(text)[-1] == ("cn=odd,o=x", {"gecos": [odd], "cn": ["odd"]}), odd


def test_changes_become_ldif_change_records_and_refusals_name_record_and_reason():
    add = {"op": "add", "dn": "uid=a,ou=people,o=x", "classes": ["account", "posixAccount"],
           "attributes": {"uidNumber": 100007, "gecos": "Jürgen", "memberUid": ["a", "b"]}}
    assert users.change_record(add).split("\n") == [
        "dn: uid=a,ou=people,o=x", "changetype: add", "objectClass: account", "objectClass: posixAccount",
        "uidNumber: 100007", f"gecos:: {base64.b64encode('Jürgen'.encode()).decode()}", "memberUid: a", "memberUid: b"]
    modify = {"op": "modify", "dn": "cn=g,o=x", "attributes": {"memberUid": None, "loginShell": "/bin/zsh"}}
    assert users.change_record(modify).split("\n") == [
        "dn: cn=g,o=x", "changetype: modify", "replace: memberUid", "-", "replace: loginShell",
        "loginShell: /bin/zsh", "-"]
    assert users.change_record({"op": "delete", "dn": "cn=g,o=x"}) == "dn: cn=g,o=x\nchangetype: delete"
    refused = ("# Error: Already exists (68)\ndn: uid=a,o=x\nchangetype: add\nuid: a\n\n"
               "# Error: No such object (32), additional info: gone\ndn: cn=g,o=x\nchangetype: modify\n"
               "replace: memberUid\n-\n\n")
    assert ldapcli._refusals(refused) == ["add uid=a,o=x: Already exists (68)",
                                          "modify cn=g,o=x: No such object (32), additional info: gone"]


def test_a_copy_of_the_file_keeps_naming_the_centres_password_and_ca_files(write_fed, tmp_path):
    path = write_fed(with_('[site.directory]\nkind = "ldap"', '[site.directory]\nkind = "ldap"\n' + SERVER))
    (tmp_path / "copy").mkdir()
    copy = federation.load(federation.derive(federation.load(path), tmp_path / "copy", "ma-hd-copy"))
    assert copy.site("M").directory.password_file == path.parent / "pw"
    assert copy.site("M").directory.ca_file == federation.load(path).site("M").directory.ca_file


def test_what_left_a_home_by_its_refresh_or_its_listing():
    """The cached entries of a home brought to what it holds: by a refresh's entryUUIDs
    (and a rename: a changed entry's entryUUID cached under another DN), or by a listing."""
    def follow(cached, changed, listed, left):
        return syncstate._follow(cached, changed, listed, left, lambda u: u["activated"], lambda u: u["name"])

    def cache():
        return {"uid=a,o=x": ("a", "u-a"), "uid=b,o=x": ("b", "u-b"), "uid=c,o=x": ("c", "u-c")}
    cached = cache()
    renamed = {"dn": "uid=c2,o=x", "name": "c", "uuid": "u-c", "activated": True}
    new = {"dn": "uid=d,o=x", "name": "d", "uuid": "u-d", "activated": True}
    gone, now = follow(cached, [renamed, new], None, {"u-a", "u-unknown"})
    assert sorted(gone) == [("uid=a,o=x", "a"), ("uid=c,o=x", "c")] and set(now) == {"uid=c2,o=x", "uid=d,o=x"}
    assert cached == {"uid=b,o=x": ("b", "u-b"), "uid=c2,o=x": ("c", "u-c"), "uid=d,o=x": ("d", "u-d")}
    cached = cache()
    gone, now = follow(cached, [], {"uid=b,o=x", "uid=c,o=x"}, set())
    assert gone == [("uid=a,o=x", "a")] and not now and set(cached) == {"uid=b,o=x", "uid=c,o=x"}
    with pytest.raises(syncstate.Doubtful):  # a listing naming an entry the changes did not
        follow(cache(), [], {"uid=a,o=x", "uid=b,o=x", "uid=c,o=x", "uid=z,o=x"}, set())
    with pytest.raises(syncstate.Doubtful):  # left, says the refresh; activated, say the changes
        follow(cache(), [{"dn": "uid=a,o=x", "name": "a", "uuid": "u-a", "activated": True}], None, {"u-a"})
