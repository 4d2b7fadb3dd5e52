"""The nodes' name service: nslcd on every node of the testbed, reading the merged directory.

A node resolves the federation's users and groups (`getent passwd hau`) the way a
cluster's nodes do: through NSS and an LDAP client daemon, here Debian's nslcd and
libnss-ldapd, reading the admin server over StartTLS with the directory's CA, bound
as the admin directory's read-only account `cn=geofed-nss`. Each nslcd is a service
daemon (testbed/services.py) in its node's network namespace and a mount namespace of
its own, where its configuration is bind-mounted over /etc/nslcd.conf, an
nsswitch.conf saying `passwd: files ldap` over /etc/nsswitch.conf, and a directory of
the service over /run (nslcd takes no configuration path, and its socket's path,
/run/nslcd/socket, is fixed; the CA lies there too, as /run is all it sees of it). The host's NSS is never changed; a command sees the federation's users when it
runs in that mount namespace (`getent` below, `geofed ops users getent`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

from geofed.errors import UserError
from geofed.federation import Federation
from geofed.testbed import host, plan, services

SERVICE = "nss"
NSLCD = "/usr/sbin/nslcd"
NSS_MODULE = "/usr/lib/x86_64-linux-gnu/libnss_ldap.so.2"
NSSWITCH = "passwd: files ldap\ngroup: files ldap\nshadow: files\nhosts: files\n"
# Runs in the node's fresh mount namespace: nslcd's files over the host's, then nslcd.
MOUNT_AND_RUN = ('mount --bind "$1" /etc/nslcd.conf && mount --bind "$2" /etc/nsswitch.conf && '
                 'mount --bind "$3" /run && exec "$4" -d')
START_TIMEOUT_S = 30.0
CA = "geofed-ca.pem"


def up(fed: Federation, directory_state: dict) -> dict:
    """An nslcd on every node of the federation's testbed, reading the admin server that
    `directory_state` describes; started afresh when that server was."""
    for path, package in ((NSLCD, "nslcd"), (NSS_MODULE, "libnss-ldapd")):
        if not os.path.exists(path):
            raise UserError(f"ops directory up: {path} is not installed (Debian's {package}); run ./setup.sh")
    admin = directory_state["servers"]["admin"]
    return services.up(fed.name, SERVICE, lambda svc: _start(fed, svc, directory_state), keep=lambda st: st.get(
        "admin_pid") == directory_state["daemons"]["admin"]["pid"], admin_pid=directory_state["daemons"]["admin"]["pid"],
        uri=f"ldap://{admin['host']}:{admin['port']}/")


def _start(fed: Federation, svc: services.Service, directory_state: dict) -> None:
    admin = directory_state["servers"]["admin"]
    for node in plan.make_plan(fed).nodes:
        d = svc.dir / node.node.name
        (d / "run" / "nslcd").mkdir(parents=True)
        shutil.chown(d / "run" / "nslcd", "nslcd", "nslcd")  # it makes its socket there once it is the user nslcd
        # Its /run is this directory: the CA goes in it, readable by the user nslcd.
        shutil.copyfile(directory_state["ca"], d / "run" / CA)
        os.chmod(d / "run" / CA, 0o644)
        conf = d / "nslcd.conf"
        conf.write_text(_nslcd_conf(admin, f"/run/{CA}"))
        os.chmod(conf, 0o600)  # it holds the account's password; nslcd reads it as root
        (d / "nsswitch.conf").write_text(NSSWITCH)
        argv = host.in_netns(node.netns, ["unshare", "--mount", "--propagation", "private", "sh", "-c", MOUNT_AND_RUN,
                                          "geofed-nss", str(conf), str(d / "nsswitch.conf"), str(d / "run"), NSLCD])
        svc.start(services.Daemon(node.node.name, argv, lambda d=d: _answers(d / "run" / "nslcd" / "socket"),
                                  node.netns, START_TIMEOUT_S))


def _nslcd_conf(admin: dict, ca: str) -> str:
    base = admin["base"]
    return "\n".join([
        "uid nslcd", "gid nslcd",
        f"uri ldap://{admin['host']}:{admin['port']}/",
        f"base passwd ou=people,{base}", f"base group ou=groups,{base}", f"base {base}",
        f"binddn {admin['nss_dn']}", f"bindpw {admin['nss_password']}",
        "ssl start_tls", "tls_reqcert demand", f"tls_cacertfile {ca}", ""])


def _answers(sock) -> bool:
    """Whether nslcd accepts connections on its socket."""
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(sock))
        except OSError:
            return False
    return True


def getent(fed_name: str, node: str, database: str, keys: list[str]) -> subprocess.CompletedProcess:
    """`getent DATABASE KEYS` on `node`, through its nslcd (in that nslcd's namespaces)."""
    state = services.read(fed_name, SERVICE)
    if not services.running(state):
        raise UserError(f"the nodes' name service of {fed_name} is not up; it starts with "
                        f"`geofed ops directory up {fed_name}` while the testbed is up")
    if node not in state["daemons"]:
        raise UserError(f"no node {node} in {fed_name} (nodes: {', '.join(state['daemons'])})")
    pid = str(state["daemons"][node]["pid"])
    return subprocess.run(["nsenter", "-t", pid, "-m", "-n", "getent", database, *keys], capture_output=True,
                          text=True, timeout=60)
