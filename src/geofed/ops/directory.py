"""`geofed ops directory up|down|status FEDERATION`: the sites' real directory servers.

For every site with a `[site.directory]`: OpenLDAP's slapd (kind "ldap", an mdb
database) or Samba's Active Directory domain controller (kind "ad", provisioned with
RFC 2307 attributes); and a third slapd, the federation's own directory ("admin
server", seed 001 slide 11) that `geofed ops users sync` writes, with a back-meta
read-through view of both homes beside the merged copy. Each runs in the foreground
as geofed's child with its own configuration and data: a service of the federation
(testbed/services.py) under /run/geofed/<federation>/services/directory/, which also
holds a self-signed CA (StartTLS and LDAPS on every server) and the marker from which
`down` (or `geofed testbed down`) stops the servers and removes every file, also after a
crash or a failed or interrupted `up`.

Where the federation's testbed is up, each server listens on its site's login node
(the site's first node) inside the testbed; otherwise on 127.0.0.1. Samba serves LDAP
on the fixed ports 389 and 636, so on 127.0.0.1 only one AD site can run at a time.
"""

from __future__ import annotations

import ctypes
import os
import queue
import re
import secrets
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import quote

from geofed.errors import UserError
from geofed.federation import Federation, Site, SiteDirectory
from geofed.ops import ldapcli, nss, userbase
from geofed.testbed import host, services

SERVICE = "directory"  # the servers; the nodes' NSS clients are the service nss.SERVICE
READER = "geofed-reader"  # the bind account sync reads a home with: read-only there
SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"
SCHEMA_DIR = Path("/etc/ldap/schema")
# On a login node a site's server has the standard ports; the admin server beside it others.
SITE_PORTS = (389, 636)
ADMIN_PORTS = (10389, 10636)
AD_PORTS = (389, 636)  # Samba's LDAP server has no setting for its ports
START_TIMEOUT_S = 60.0
# Writes syncprov remembers, so that an LDAP Content Synchronization refresh from a
# cookie (RFC 4533) names the entries deleted since by their entryUUID (syncstate).
SESSION_LOG = 100000
CLONE_NEWNET = 0x40000000
# The ownership marker of `users sync`: an auxiliary class under an OID arc from a UUID
# (X.667, 2.25.*), which needs no registration.
GEOFED_OID = "2.25.198830916389402410532342153606962616837"
GEOFED_SCHEMA = f"""\
attributetype ( {GEOFED_OID}.1 NAME 'geofedSite'
  DESC 'the code of the site whose directory this merged entry comes from'
  EQUALITY caseExactMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
attributetype ( {GEOFED_OID}.2 NAME 'geofedSource'
  DESC 'the DN of the entry in its home directory'
  EQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
attributetype ( {GEOFED_OID}.4 NAME 'geofedDigest'
  DESC 'SHA-256 of the attributes users sync gave this entry'
  EQUALITY caseExactMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
objectclass ( {GEOFED_OID}.3 NAME 'geofedEntry'
  DESC 'made and owned by geofed users sync: it changes and deletes only these'
  SUP top AUXILIARY MUST ( geofedSite $ geofedSource ) MAY geofedDigest )
"""
Progress = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


def run_dir(fed_name: str) -> Path:
    return services.service_dir(fed_name, SERVICE)


def read_state(fed_name: str) -> dict | None:
    return services.read(fed_name, SERVICE)


def require_up(fed: Federation) -> dict:
    """The running servers of `fed` (the state `up` wrote), or a one-line reason."""
    if fed.directory is None:
        raise UserError(f"{fed.path}: declares no [site.directory]: there is no user directory to use")
    try:
        state = read_state(fed.name)
    except PermissionError:
        raise UserError(f"the directory servers of {fed.name} are root's (their credentials are in "
                        f"{run_dir(fed.name)}); run this as root") from None
    if state is None:
        raise UserError(f"the directory servers of {fed.name} are not up; run: geofed ops directory up {fed.name}")
    dead = services.dead(state)
    if dead or state["complete"] is not True:
        raise UserError(f"the directory servers of {fed.name} are broken ({', '.join(dead) or 'half started'}); "
                        f"run: geofed ops directory down {fed.name}; geofed ops directory up {fed.name}")
    if state["sha256"] != fed.sha256:
        raise UserError(f"the directory servers of {fed.name} run from another version of {fed.path}; run: "
                        f"geofed ops directory down {fed.name}; geofed ops directory up {fed.name}")
    return state


def home(fed: Federation, state: dict, code: str) -> dict:
    """How sync, check and the view reach site `code`'s directory: its URI, a read-only
    bind account and its password, the CA its certificate is checked against, its base.
    The centre's own server where the federation file names one, else the fixture's
    that `up` started (whose reader account has the same rights: docs/directory.md)."""
    site = fed.site(code)
    d = site.directory
    if d.uri is None:
        s = state["servers"][code]
        return {"uri": f"ldap://{s['host']}:{s['port']}", "bind_dn": s["reader_dn"], "password": s["reader_password"],
                "ca": state["ca"], "base": d.base}
    where = f"{fed.path}: site[{fed.sites.index(site)}].directory"
    text = {}
    for key in ("password_file", "ca_file"):
        path = getattr(d, key)
        try:
            text[key] = path.read_text()
        except OSError as e:
            raise UserError(f"{where}.{key}: cannot read {path}: {e.strerror}") from None
    password = text["password_file"].rstrip("\n")
    if not password:  # an LDAP bind with an empty password is an anonymous one
        raise UserError(f"{where}.password_file: {d.password_file} is empty")
    return {"uri": d.uri, "bind_dn": d.bind_dn, "password": password, "ca": str(d.ca_file), "base": d.base}


def own_server(d: SiteDirectory | None) -> bool:
    """Whether `up` starts this site's server: it has a directory and names no centre's own."""
    return d is not None and d.uri is None


def enter(state: dict) -> None:
    """Join the network namespace the servers are reached from (the admin site's login
    node on the testbed), for this thread: sockets opened after it live there."""
    netns = state.get("client_netns")
    if not netns:
        return
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise host.HostError(f"cannot enter namespace {netns}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


# ---------------------------------------------------------------- up


def _secret() -> str:
    # Upper, lower, digit and symbol: Samba's password complexity rule.
    return "Gf1-" + secrets.token_hex(12)


def _placement(fed: Federation) -> tuple[str, dict[str, tuple[str | None, str]]]:
    """The mode ("testbed" or "loopback") and, per site code, (namespace, address) of its login node."""
    if os.geteuid() == 0:
        from geofed.testbed import core, plan
        p = plan.make_plan(fed)
        if core.is_up(p):
            return "testbed", {s.code: (p.node(s.login_node.name).netns, p.node(s.login_node.name).address)
                               for s in fed.sites}
    return "loopback", {s.code: (None, "127.0.0.1") for s in fed.sites}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def up(fed: Federation, progress: Progress = _quiet, homes: dict[str, userbase.HomeSite] | None = None) -> dict:
    """Start the servers, loaded with `homes` (site code -> people; default the fixture)."""
    if fed.directory is None:
        raise UserError(f"{fed.path}: declares no [site.directory]: no directory servers to start")
    if os.geteuid() != 0:
        raise UserError("ops directory up: needs root (Samba's AD DC serves the privileged LDAP ports)")
    for prog in (SLAPD, SLAPADD, shutil.which("samba") or "samba", shutil.which("ldbadd") or "ldbadd"):
        if not Path(prog).is_file():
            raise UserError(f"ops directory up: {prog} is not installed; run ./setup.sh")
    state = services.up(fed.name, SERVICE, lambda svc: _start(fed, svc, homes, progress), progress,
                        keep=lambda state: state["sha256"] == fed.sha256, federation_file=str(fed.path),
                        sha256=fed.sha256, servers={})
    if state["mode"] == "testbed":
        progress("nslcd on every node, reading the federation's directory")
        nss.up(fed, state)
    return state


def _port_taken(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((address, port)) == 0


def _start(fed: Federation, svc: services.Service, homes, progress) -> None:
    mode, where = _placement(fed)
    if mode == "loopback":
        for s in fed.sites:
            if own_server(s.directory) and s.directory.kind == "ad" and _port_taken("127.0.0.1", AD_PORTS[0]):
                raise UserError(f"ops directory up: 127.0.0.1:{AD_PORTS[0]} is in use (another AD site or LDAP "
                                f"server); Samba's LDAP port cannot be moved: take that one down first")
    top = svc.dir
    os.chmod(top, 0o700)  # it holds the servers' keys and administrator passwords
    admin_site = fed.site(fed.directory.site)
    state = svc.state
    state.update(mode=mode, client_netns=where[admin_site.code][0])
    progress("making a CA and the servers' certificate")
    addresses = sorted({addr for _, addr in where.values()})
    state["ca"] = str(make_ca(top / "tls", addresses))
    homes = homes or {}
    for s in fed.sites:
        if not own_server(s.directory):
            if s.directory:
                progress(f"site {s.code}: its own server {s.directory.uri}, read as {s.directory.bind_dn}")
            continue
        netns, addr = where[s.code]
        people = homes.get(s.code) or (userbase.MANNHEIM if s.directory.kind == "ldap" else userbase.HEIDELBERG)
        ports = SITE_PORTS if mode == "testbed" else (_free_port(), _free_port())  # Samba: AD_PORTS always
        start_home(svc, s, people, netns, addr, ports, progress)
    netns, addr = where[admin_site.code]
    ports = ADMIN_PORTS if mode == "testbed" else (_free_port(), _free_port())
    progress(f"the federation's directory {fed.directory.base} on {addr}:{ports[0]}, with a read-through view")
    _launch(svc, "admin", _slapd_admin(top / "admin", fed, state, netns, addr, ports))


def start_home(svc: services.Service, site: Site, people: userbase.HomeSite, netns: str | None, addr: str,
               ports: tuple[int, int], progress: Progress = _quiet) -> dict:
    """A home's server (slapd or Samba's AD DC) loaded with `people`, under `svc.dir`/<code>
    beside its `tls` (make_ca), started as a daemon of `svc`; its description."""
    sd = site.directory
    if sd.kind == "ldap":
        progress(f"site {site.code}: slapd for {sd.base} on {addr}:{ports[0]} "
                 f"with {len(people.users)} users, {len(people.groups)} groups")
        server = _slapd_site(svc.dir / site.code, sd, people, netns, addr, ports)
    else:
        progress(f"site {site.code}: Samba AD DC for {sd.realm} on {addr}:{AD_PORTS[0]} "
                 f"with {len(people.users)} users, {len(people.groups)} groups")
        server = _samba_site(svc.dir / site.code, site, people, netns, addr)
    _launch(svc, site.code, server)
    return server


def _launch(svc: services.Service, key: str, server: dict) -> None:
    """Start a server and return once it accepts connections on both of its ports."""
    argv = server.pop("argv")
    svc.state["servers"][key] = server
    svc.start(services.Daemon(key, host.in_netns(server["netns"], argv) if server["netns"] else argv,
                              lambda: _answers(server), server["netns"], START_TIMEOUT_S))


def _answers(server: dict) -> bool:
    """Whether the server accepts connections on both of its ports (checked from its namespace)."""
    ports = (server["port"], server["ldaps_port"])
    if server["netns"]:
        return all(host.port_open(server["netns"], server["host"], p) for p in ports)
    return all(_port_taken(server["host"], p) for p in ports)


def make_ca(d: Path, addresses: list[str]) -> Path:
    """A self-signed CA and one server certificate for every server of the federation."""
    d.mkdir()
    names = ",".join([f"IP:{a}" for a in addresses] + ["DNS:localhost"])

    def openssl(*args):
        res = subprocess.run(["openssl", *args], capture_output=True, text=True, cwd=d)
        if res.returncode != 0:
            raise host.HostError(f"openssl {args[0]}: {res.stderr.strip()}")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/O=geofed/CN=geofed directory CA",
            "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/O=geofed/CN=geofed directory server",
            "-keyout", "server.key", "-out", "server.csr")
    (d / "ext.cnf").write_text(f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "30", "-extfile", "ext.cnf", "-out", "server.pem")
    for f in ("ca.key", "server.key"):
        os.chmod(d / f, 0o600)  # Samba refuses a key others could read
    return d / "ca.pem"


# A bound user reads everything, an anonymous one nothing; passwords are only ever
# compared (a bind), never read.
ADMIN_ACCESS = ["access to attrs=userPassword by anonymous auth by * none", "access to * by users read by * none"]


def reader_access(base: str, reader: str) -> list[str]:
    """A home's rights for geofed's bind account (docs/directory.md): read of the base
    entry (its contextCSN says whether anything changed), read of the user and group
    subtrees (the activation attribute with them), nothing else, no write anywhere.
    Users still bind (users check)."""
    return ["access to attrs=userPassword by anonymous auth by * none",
            f'access to dn.base="{base}" by dn.exact="{reader}" read by * none',
            *(f'access to dn.subtree="ou={ou},{base}" by dn.exact="{reader}" read by * none'
              for ou in ("people", "groups")),
            "access to * by * none"]


def _slapd_conf(d: Path, suffix: str, rootdn: str, password: str, tls: Path, indexes: list[str],
                schemas: list[str], access: list[str], extra: str = "") -> Path:
    (d / "data").mkdir(parents=True)
    conf = "\n".join([*(f"include {s}" for s in schemas),
                      f"pidfile {d}/slapd.pid", f"argsfile {d}/slapd.args",
                      "modulepath /usr/lib/ldap", "moduleload back_mdb", "moduleload back_ldap", "moduleload back_meta",
                      "moduleload syncprov",
                      f"TLSCACertificateFile {tls}/ca.pem", f"TLSCertificateFile {tls}/server.pem",
                      f"TLSCertificateKeyFile {tls}/server.key", "sizelimit unlimited",
                      # Not the default `stats`: its lines per operation go to a syslog that is
                      # not there, and cost a third of slapd's CPU per modify here (8,000 of them:
                      # 1.3-1.4 s with, 0.9-1.0 s without).
                      "loglevel none", extra,
                      "database mdb", "maxsize 4294967296",
                      # No fsync per write: the data lives under /run, gone at a reboot by design
                      # (`up` loads the homes, `users sync` rebuilds the merged copy), and the fsyncs
                      # were two thirds of 40,000 adds' time here (42.8 s, 14.2 s without). And
                      # each write's pages changed in the map itself, not copied out by pwrite
                      # (8,000 modifies: slapd's CPU 1.4-1.9 s with copies, 1.0 s without).
                      "dbnosync", "envflags writemap",
                      f'suffix "{suffix}"', f'rootdn "{rootdn}"',
                      f"rootpw {userbase.ssha(password)}", f"directory {d}/data",
                      *(f"index {i}" for i in indexes), *access,
                      # contextCSN in the base entry, moved by every write: sync's mark (syncstate).
                      "overlay syncprov", f"syncprov-sessionlog {SESSION_LOG}", ""])
    path = d / "slapd.conf"
    path.write_text(conf)
    os.chmod(path, 0o600)
    return path


def _base_entry(dn: str) -> tuple[str, dict]:
    attr, value = dn.split(",")[0].split("=", 1)
    if attr.lower() == "dc":
        return dn, {"objectClass": ["dcObject", "organization"], "dc": value, "o": value}
    if attr.lower() == "o":
        return dn, {"objectClass": ["organization"], "o": value}
    return dn, {"objectClass": ["organizationalUnit"], "ou": value}


def _slapadd(conf: Path, suffix: str, entries: list[tuple[str, dict]]) -> float:
    """Load entries offline into the database `conf` names; the seconds slapadd took."""
    ldif = conf.parent / "load.ldif"
    ldif.write_text(ldapcli.entries_text(entries))
    t0 = time.monotonic()
    res = subprocess.run([SLAPADD, "-q", "-f", str(conf), "-b", suffix, "-l", str(ldif)], capture_output=True, text=True)
    seconds = time.monotonic() - t0
    ldif.unlink()
    if res.returncode != 0:
        raise host.HostError(f"slapadd into {conf.parent}: {' '.join(res.stderr.strip().splitlines()[-2:])}")
    return seconds


def _admin_copy(admin: dict, into: Path) -> Path:
    """The admin server's configuration (schema, indexes, overlays) for a fresh database
    under `into`; its path."""
    conf_text = (Path(admin["dir"]) / "slapd.conf").read_text()
    data = f"directory {admin['dir']}/data"
    if data not in conf_text.splitlines():
        raise host.HostError(f"{admin['dir']}/slapd.conf has no line {data!r}")
    (into / "data").mkdir(parents=True)
    conf = into / "slapd.conf"
    conf.write_text(conf_text.replace(data, f"directory {into}/data"))
    os.chmod(conf, 0o600)
    return conf


def bulk_load_floor(state: dict, entries: list[tuple[str, dict]], into: Path) -> float:
    """The seconds slapadd takes to load `entries` into a fresh database of the admin
    server's configuration (its schema and indexes) under `into`: the floor the first
    sync's adds are held against. The admin's own entries (base, units, accounts) are
    loaded with them; `into` must not exist."""
    if into.exists():
        raise UserError(f"bulk load floor: {into} exists; it must be a fresh directory")
    if not entries:
        raise UserError("bulk load floor: no entries to load")
    admin = state["servers"]["admin"]
    conf = _admin_copy(admin, into)
    return _slapadd(conf, admin["base"], admin_entries(admin["base"], admin["nss_dn"], _secret()) + entries)


def load_admin_offline(fed_name: str, state: dict, entries: Iterable[tuple],
                       unchanged: Callable[[], bool], meanwhile: Callable[[], None] = lambda: None) -> bool:
    """Add `entries` ((dn, attributes[, object classes]), as `ldapcli.entries_text` takes
    them) to the admin directory as slapadd loads a database, not one write at a
    time (40,000 adds: 9.8 s over LDAP, 2.0 s by slapadd here): its entries now (slapcat,
    which reads beside the running slapd) and `entries` go into a fresh database, which
    replaces the old one while slapd is stopped for a moment. The LDIF goes to slapadd as
    `entries` makes them, and `meanwhile` runs once they are all made, while slapadd still
    loads (two cores: the caller's own work beside it). Not done (False) where `unchanged()` no
    longer holds once the database is made: someone wrote meanwhile. HostError where
    slapadd refuses an entry (it loads all or nothing); the running database is then
    untouched."""
    admin = state["servers"]["admin"]
    res = subprocess.run(["slapcat", "-f", str(Path(admin["dir"]) / "slapd.conf"), "-b", admin["base"]],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise host.HostError(f"slapcat of {admin['dir']}: {' '.join(res.stderr.strip().splitlines()[-2:])}")
    return _replace_admin_data(fed_name, state, res.stdout.rstrip("\n") + "\n\n", entries, unchanged, meanwhile)


def empty_admin(fed_name: str, state: dict) -> None:
    """The admin directory as `up` made it, with nothing else (the benchmark's next first sync)."""
    admin = state["servers"]["admin"]
    _replace_admin_data(fed_name, state, "", admin_entries(admin["base"], admin["nss_dn"], admin["nss_password"]),
                        lambda: True)


OFFLINE_CHUNK = 5000  # entries made into LDIF and handed to slapadd at a time


def _replace_admin_data(fed_name: str, state: dict, before: str, entries: Iterable[tuple],
                        unchanged: Callable[[], bool], meanwhile: Callable[[], None] = lambda: None) -> bool:
    """Load the LDIF `before` and `entries` into a fresh database (streamed to slapadd), and
    restart the admin slapd on it in place of its own if `unchanged()` still holds then."""
    admin = state["servers"]["admin"]
    top = Path(admin["dir"])
    fresh = top / "offline"
    shutil.rmtree(fresh, ignore_errors=True)
    try:
        conf = _admin_copy(admin, fresh)
        with open(fresh / "slapadd.err", "w+") as err:
            proc = subprocess.Popen([SLAPADD, "-q", "-f", str(conf), "-b", admin["base"]], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=err, text=True)
            # This thread makes the LDIF (and the entries, where `entries` makes them as it
            # goes) as fast as it can and queues it; a thread of its own hands it to slapadd,
            # waiting on slapadd without the GIL. `meanwhile` runs once all is made, while
            # slapadd still loads: on two cores, neither waits for the other.
            texts: queue.SimpleQueue[str | None] = queue.SimpleQueue()

            def feed() -> None:
                try:
                    while (text := texts.get()) is not None:
                        proc.stdin.write(text)
                    proc.stdin.close()
                except BrokenPipeError:
                    pass  # slapadd stopped at a refused entry: its status and message say which
            # slapadd first: the caller waits for the load, while what this thread does beside
            # it (`meanwhile`) can lag a little. So this thread, and the feeding thread it
            # starts, run 5 below their priority until the load is made (Linux: the nice value
            # is a thread's own). At 100,000 users per site the sync's own work took a third of
            # the second core from slapadd, which then loaded 1 s slower than alone.
            priority = os.getpriority(os.PRIO_PROCESS, 0)
            os.setpriority(os.PRIO_PROCESS, 0, priority + 5)
            try:
                with ThreadPoolExecutor(1) as pool:
                    feeding = pool.submit(feed)
                    try:
                        texts.put(before)
                        left = iter(entries)
                        for chunk in iter(lambda: list(islice(left, OFFLINE_CHUNK)), []):
                            texts.put(ldapcli.entries_text(chunk) + "\n")
                    finally:
                        texts.put(None)
                    meanwhile()
                    feeding.result()
                status = proc.wait()
            finally:
                try:
                    os.setpriority(os.PRIO_PROCESS, 0, priority)
                except PermissionError:
                    pass  # a user without CAP_SYS_NICE may not raise it again: the rest of the sync runs lower
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            err.seek(0)
            if status != 0:
                raise host.HostError(f"slapadd into {fresh}: {' '.join(err.read().strip().splitlines()[-2:])}")
        if not unchanged():
            return False

        def swap() -> None:
            (top / "data").rename(fresh / "old")
            (fresh / "data").rename(top / "data")
        pid = services.Service.of(fed_name, SERVICE).restart("admin", lambda: _answers(admin), swap)
        state["daemons"]["admin"]["pid"] = pid
        return True
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def admin_entries(base: str, nss_dn: str, nss_password: str) -> list[tuple[str, dict]]:
    """What the admin directory holds before any sync: its base, its two units, the nodes' account."""
    return [_base_entry(base), (f"ou=people,{base}", {"objectClass": ["organizationalUnit"], "ou": "people"}),
            (f"ou=groups,{base}", {"objectClass": ["organizationalUnit"], "ou": "groups"}),
            _account(nss_dn, nss_password)]


POSIX_SCHEMAS = [str(SCHEMA_DIR / f"{s}.schema") for s in ("core", "cosine", "nis", "inetorgperson")]


def _account(dn: str, password: str) -> tuple[str, dict]:
    """A bind account that is no POSIX user: a name and a password."""
    return dn, {"objectClass": ["organizationalRole", "simpleSecurityObject"], "cn": dn.split(",")[0].split("=", 1)[1],
                "userPassword": userbase.ssha(password)}


def _slapd_site(d: Path, sd: SiteDirectory, people: userbase.HomeSite, netns, addr, ports) -> dict:
    """A home's slapd with its people, and geofed's read-only bind account with the
    rights docs/directory.md asks of a centre (bind_dn/password: the home's
    administrator, for the view's tests and changes at home; reader_dn: what sync uses)."""
    password, reader_password = _secret(), _secret()
    rootdn, reader = f"cn=admin,{sd.base}", f"cn={READER},{sd.base}"
    conf = _slapd_conf(d, sd.base, rootdn, password, d.parent / "tls",
                       # entryCSN: an incremental sync's search for the entries changed since its
                       # mark (entryCSN>=) is answered from the index, not by testing every entry.
                       # entryUUID: syncprov finds the entries its session log names by it when it
                       # answers a refresh (without: 1,000 changes at a 100,000-user home took
                       # over a minute, each tested against every entry); a provider has both.
                       ["objectClass eq", "uid eq", "uidNumber,gidNumber eq", "memberUid eq", "entryCSN eq",
                        "entryUUID eq", f"{sd.activation_attribute} eq"], POSIX_SCHEMAS,
                       reader_access(sd.base, reader))
    entries = [_base_entry(sd.base), _account(reader, reader_password)] + userbase.ldap_entries(sd, people)
    load_s = _slapadd(conf, sd.base, entries)
    return {"load": {"tool": "slapadd", "entries": len(entries), "seconds": load_s}, "kind": "ldap", "dir": str(d), "netns": netns, "host": addr, "port": ports[0], "ldaps_port": ports[1],
            "base": sd.base, "bind_dn": rootdn, "password": password, "reader_dn": reader,
            "reader_password": reader_password,
            "argv": [SLAPD, "-f", str(conf), "-h", f"ldap://{addr}:{ports[0]}/ ldaps://{addr}:{ports[1]}/", "-d", "0"]}


def _samba_site(d: Path, site: Site, people: userbase.HomeSite, netns, addr) -> dict:
    sd = site.directory
    password = _secret()
    d.mkdir()
    tls = d.parent / "tls"
    options = {
        # In a namespace the login node's own interface; on the host the loopback one
        # (another loopback address gives "no network interfaces found").
        "interfaces": "lo" if netns is None else addr, "bind interfaces only": "yes",
        "server services": "ldap, cldap",
        "tls enabled": "yes", "tls keyfile": f"{tls}/server.key", "tls certfile": f"{tls}/server.pem",
        "tls cafile": f"{tls}/ca.pem",
        "pid directory": f"{d}/run", "ncalrpc dir": f"{d}/ncalrpc", "log file": f"{d}/samba.log",
        "panic action": "",
    }
    argv = ["samba-tool", "domain", "provision", f"--targetdir={d}", f"--realm={sd.realm}", f"--domain={sd.domain}",
            "--server-role=dc", "--dns-backend=NONE", "--use-rfc2307", f"--adminpass={password}",
            f"--host-name=dc-{site.code.lower()}"] + [f"--option={k} = {v}" for k, v in options.items()]
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        raise host.HostError(f"samba-tool domain provision {sd.realm}: {res.stderr.strip().splitlines()[-1:]}")
    # Simple binds without TLS too, as at many sites (provision drops this option, so it goes in here).
    conf = d / "etc" / "smb.conf"
    conf.write_text(conf.read_text().replace("[global]\n", "[global]\n\tldap server require strong auth = no\n", 1))
    # geofed's bind account: a plain domain user (AD lets authenticated users read users and groups).
    reader_password = _secret()
    people = userbase.HomeSite(people.users + [userbase.HomeUser(READER, "geofed", "reader", None, None,
                                                                 activated=False, password=reader_password)],
                               people.groups)
    ldif = d / "load.ldif"
    ldif.write_text(userbase.ad_ldif(sd, people))
    # batch_mode: one transaction without a nested one per entry (3x faster at 1,650 entries),
    # all or nothing: a refused entry rolls the whole load back.
    t0 = time.monotonic()
    res = subprocess.run(["ldbadd", "--nosync", "-o", "batch_mode", "-H", f"{d}/private/sam.ldb", str(ldif)],
                         capture_output=True, text=True)
    load_s = time.monotonic() - t0
    ldif.unlink()
    # Without batch_mode ldbadd exits 0 after a refused entry: the count it added is the test.
    added = re.search(r"Added (\d+) records", res.stdout)
    if res.returncode != 0 or not added or int(added.group(1)) != len(people.users) + len(people.groups):
        raise host.HostError(f"ldbadd into {sd.realm}: {(res.stderr or res.stdout).strip().splitlines()[:1]}")
    return {"load": {"tool": "ldbadd", "entries": int(added.group(1)), "seconds": load_s}, "kind": "ad", "dir": str(d), "netns": netns, "host": addr, "port": AD_PORTS[0], "ldaps_port": AD_PORTS[1],
            "base": sd.base, "bind_dn": f"CN=Administrator,CN=Users,{sd.base}", "password": password,
            "reader_dn": userbase.ad_user_dn(sd, READER), "reader_password": reader_password, "realm": sd.realm,
            "argv": ["samba", "-i", "-M", "single", "--debuglevel=1", "-s", f"{d}/etc/smb.conf"]}


def view_base(fed: Federation) -> str:
    return f"ou=view,{fed.directory.base}"


def _slapd_admin(d: Path, fed: Federation, state: dict, netns, addr, ports) -> dict:
    password = _secret()
    rootdn = f"cn=admin,{fed.directory.base}"
    (d).mkdir()
    schema = d / "geofed.schema"
    schema.write_text(GEOFED_SCHEMA)
    # The read-through view: back-meta over every home, AD's names mapped to POSIX ones.
    # It is declared before the merged database so that its (more specific) suffix wins.
    meta = ["database meta", f'suffix "{view_base(fed)}"']
    for s in fed.sites:
        if not s.directory:
            continue
        at = home(fed, state, s.code)
        local = f"ou={s.directory.prefix},{view_base(fed)}"
        # As sync reads it: its certificate checked against its CA, bound as geofed's reader.
        ldaps = at["uri"].startswith("ldaps:")
        ca = f'tls_cacert="{at["ca"]}" tls_reqcert=demand'
        meta += [f'uri "{at["uri"]}/{local}"', f'tls {"ldaps" if ldaps else "start"} {ca}',
                 f'suffixmassage "{local}" "{s.directory.base}"',
                 f'idassert-bind bindmethod=simple binddn="{at["bind_dn"]}" credentials="{at["password"]}" '
                 f'mode=none {"" if ldaps else "starttls=yes "}{ca}']
        if s.directory.kind == "ad":
            meta += ["map attribute uid sAMAccountName", "map attribute homeDirectory unixHomeDirectory",
                     "map objectclass posixAccount user", "map objectclass posixGroup group"]
    conf = _slapd_conf(d, fed.directory.base, rootdn, password, d.parent / "tls",
                       ["objectClass eq", "uid eq", "cn eq", "uidNumber,gidNumber eq", "memberUid eq",
                        "geofedSite eq"], POSIX_SCHEMAS + [str(schema)], ADMIN_ACCESS, extra="\n".join(meta))
    base = fed.directory.base
    # The nodes' NSS clients read the merged users with an account of their own (no write).
    nss_dn, nss_password = f"cn=geofed-nss,{base}", _secret()
    _slapadd(conf, base, admin_entries(base, nss_dn, nss_password))
    # Its own tool (users sync) writes through a Unix socket in the run directory (root's only).
    ldapi = d / "ldapi"
    return {"kind": "ldap", "dir": str(d), "netns": netns, "host": addr, "port": ports[0], "ldaps_port": ports[1],
            "base": base, "bind_dn": rootdn, "password": password, "view": view_base(fed), "ldapi": str(ldapi),
            "nss_dn": nss_dn, "nss_password": nss_password,
            "argv": [SLAPD, "-f", str(conf), "-h", f"ldap://{addr}:{ports[0]}/ ldaps://{addr}:{ports[1]}/ "
                     f"ldapi://{quote(str(ldapi), safe='')}/", "-d", "0"]}


# ---------------------------------------------------------------- down and status


def down(fed_name: str) -> list[str]:
    """Stop every server of this federation's directory and remove its files; harmless when nothing is there."""
    if os.geteuid() != 0:
        raise UserError("ops directory down: needs root (the servers run as root)")
    return services.stop(fed_name, nss.SERVICE) + services.stop(fed_name, SERVICE)


def status(fed: Federation) -> dict:
    state = read_state(fed.name)
    if state is None:
        return {"federation": fed.name, "up": False, "servers": {}}
    return {"federation": fed.name, "up": state["complete"] is True, "mode": state.get("mode"),
            "servers": {k: {"kind": s["kind"], "pid": state["daemons"][k]["pid"],
                            "alive": host.alive(state["daemons"][k]["pid"]), "netns": s["netns"],
                            "uri": f"ldap://{s['host']}:{s['port']}/", "ldaps": f"ldaps://{s['host']}:{s['ldaps_port']}/",
                            "base": s["base"]}
                        for k, s in state["servers"].items() if k in state["daemons"]}}
