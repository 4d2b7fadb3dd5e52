"""users sync against a centre's own servers, and the nodes resolving the merge.

The test starts a slapd and a Samba AD DC of its own on the testbed's login nodes (the
binaries and loading code of `ops directory up`, but its own service, configuration
and data: as a centre's existing servers would be), names them in the federation file
by URI, bind DN, password file and CA, and reads them with a bind account that may only
read. `ops directory up` then starts only the admin server (and nslcd on every node);
`users sync` merges; `getent` on a node answers with the offsets and prefixes. Root.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import TWO_DIRECTORY_SITES, needs_root, run_geofed
from geofed import federation
from geofed.ops import directory, userbase, users
from geofed.testbed import core, plan, services

pytestmark = [needs_root, pytest.mark.slow]

# The conftest's two directory sites with a node beside each login node, and each site's
# directory naming its own server ({m}, {h}).
SITES = TWO_DIRECTORY_SITES.replace("nodes = 1", "nodes = 2").replace("offset = 100000\n", "offset = 100000\n{m}") \
    .replace("offset = 200000\n", "offset = 200000\n{h}")
SERVER = 'uri = "{uri}"\nbind_dn = "{dn}"\npassword_file = "{code}.password"\nca_file = "{ca}"\n'
CENTRE = "centre"  # the test's own service: the centres' servers, which geofed only reads

# Mannheim's fixture and three collisions with Heidelberg's: an activated jweber at both
# (refused at both), fkoch with hau's uid 4101 (both merged: the offsets part them) and
# a group bioquant at both (both merged: the prefixes part them).
MANNHEIM = userbase.HomeSite(
    userbase.MANNHEIM.users + [userbase.HomeUser("jweber", "Jonas", "Weber", 14000, 510, password="Centre-1-x"),
                               userbase.HomeUser("fkoch", "Frieda", "Koch", 4101, 500, password="Centre-1-y")],
    userbase.MANNHEIM.groups + [userbase.HomeGroup("bioquant", 540, ["fkoch", "jweber", "kredel"])])
PEOPLE = {"M": MANNHEIM, "H": userbase.HEIDELBERG}


@pytest.fixture
def centre(tmp_path):
    """The federation file naming the centres' own servers, which run on its testbed."""
    name = f"dirext{os.getpid() % 10000}"
    path = tmp_path / "fed.toml"
    path.write_text(SITES.format(name=name, m="", h=""))
    p = plan.make_plan(federation.load(path))
    login = {code: p.node(f"{code}1") for code in PEOPLE}
    ca = services.service_dir(name, CENTRE) / "tls" / "ca.pem"
    path.write_text(SITES.format(
        name=name,
        m=SERVER.format(uri=f"ldap://{login['M'].address}", dn="cn=geofed-reader,dc=uni-mannheim,dc=de", code="M",
                        ca=ca),
        h=SERVER.format(uri=f"ldaps://{login['H'].address}", code="H", ca=ca,
                        dn="CN=geofed-reader,CN=Users,DC=ad,DC=uni-heidelberg,DC=de")))
    fed = federation.load(path)
    try:
        assert run_geofed("testbed", "up", str(path)).returncode == 0

        def start(svc):
            directory.make_ca(svc.dir / "tls", [n.address for n in login.values()])
            for s in fed.sites:
                directory.start_home(svc, s, PEOPLE[s.code], login[s.code].netns, login[s.code].address,
                                     directory.SITE_PORTS)
        state = services.up(name, CENTRE, start, servers={})
        for code, server in state["servers"].items():
            (tmp_path / f"{code}.password").write_text(server["reader_password"] + "\n")
        yield fed, state
    finally:
        run_geofed("ops", "directory", "down", str(path))
        core.down(name)
        assert core.leftovers(name) == []


def entries(text: str) -> dict[str, list[str]]:
    """getent's lines by name, of the federation's ids only (the node's own files come first)."""
    rows = [line.split(":") for line in text.splitlines()]
    return {r[0]: r for r in rows if int(r[2]) >= 100000}


def assert_read_only(fed, netns: str) -> None:
    """The bind account may read and nothing more, at both homes."""
    directory.enter({"client_netns": netns})
    for code, user in (("M", "kredel"), ("H", "hau")):
        at = directory.home(fed, {}, code)
        conn = users.connect(at, at["ca"])
        dn = (userbase.ldap_user_dn if code == "M" else userbase.ad_user_dn)(fed.site(code).directory, user)
        conn.modify(dn, {"loginShell": [("MODIFY_REPLACE", ["/bin/false"])]})
        assert conn.result["description"] == "insufficientAccessRights", (code, conn.result)
        conn.search(dn, "(objectClass=*)", search_scope="BASE", attributes=["loginShell"])
        assert conn.entries[0].loginShell.value == "/bin/bash"
        conn.unbind()


def test_sync_reads_a_centres_own_servers_read_only_and_the_nodes_resolve_the_merge(centre, tmp_path):
    fed, state = centre
    with ThreadPoolExecutor(1) as pool:  # a thread of its own enters Mannheim's login node
        pool.submit(assert_read_only, fed, state["servers"]["M"]["netns"]).result()

    res = run_geofed("ops", "directory", "up", str(fed.path))
    assert res.returncode == 0, res.stderr
    assert "Samba" not in res.stdout and "slapd for" not in res.stdout  # only the admin server is geofed's
    res = run_geofed("ops", "users", "sync", "-f", str(fed.path), "--out", str(tmp_path / "out"))
    assert res.returncode == 1, res.stdout + res.stderr  # a collision refused: cron mails it
    assert "same-name" in res.stdout and "jweber" in res.stdout

    merged = {code: [u for u in PEOPLE[code].users if u.activated and not u.disabled and u.name != "jweber"]
              for code in PEOPLE}
    want_users = {u.name: (str(u.uid + fed.site(code).directory.offset), str(u.gid + fed.site(code).directory.offset),
                           f"/home/{u.name}") for code, us in merged.items() for u in us}
    assert want_users["fkoch"][0] == "104101" and want_users["hau"][0] == "204101"
    want_groups = {fed.site(code).directory.prefix + g.name: (
        str(g.gid + fed.site(code).directory.offset), sorted(set(g.members) & {u.name for u in merged[code]}))
        for code in PEOPLE for g in PEOPLE[code].groups}
    assert "mabioquant" in want_groups and "hdbioquant" in want_groups
    for node in ("M2", "H2"):  # nodes that run no server: only their nslcd answers
        res = run_geofed("ops", "users", "getent", "passwd", "-f", str(fed.path), "--node", node)
        assert res.returncode == 0, res.stderr
        assert {n: (r[2], r[3], r[5]) for n, r in entries(res.stdout).items()} == want_users
        res = run_geofed("ops", "users", "getent", "group", "-f", str(fed.path), "--node", node)
        assert res.returncode == 0, res.stderr
        assert {n: (r[2], sorted(filter(None, r[3].split(",")))) for n, r in entries(res.stdout).items()} == want_groups
    one = run_geofed("ops", "users", "getent", "passwd", "204101", "-f", str(fed.path), "--node", "M2")
    assert one.returncode == 0 and one.stdout.startswith("hau:"), one.stdout + one.stderr
    gone = run_geofed("ops", "users", "getent", "passwd", "jweber", "-f", str(fed.path), "--node", "M2")
    assert gone.returncode == 1 and gone.stdout == ""
