"""The launcher agent Hydra (`mpiexec -launcher rsh -launcher-exec geofed-agent`) calls.

Hydra runs `geofed-agent HOST COMMAND...` to start its proxy on HOST, the way it
would run rsh. On the testbed HOST is a node's address, which GEOFED_HOSTMAP maps to
the node's name (Hydra is given addresses, so it never waits on name lookups); the
agent puts itself into the
node's CPU cgroup (unless GEOFED_CPU_LIMIT=0) and runs the command in the node's network namespace, so the proxy
and the ranks it starts live on that node.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys

from geofed.testbed.host import cgroup_join, in_netns
from geofed.testbed.plan import CGROUP_ROOT, prefix


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    fed = os.environ.get("GEOFED_TESTBED")
    hostmap = dict(item.split("=", 1) for item in os.environ.get("GEOFED_HOSTMAP", "").split(",") if "=" in item)
    if not fed or len(argv) < 2 or argv[0] not in hostmap:
        sys.exit("geofed-agent: usage: GEOFED_TESTBED=<federation> GEOFED_HOSTMAP=<address>=<node>,... "
                 "geofed-agent ADDRESS COMMAND...")
    node, command = hostmap[argv[0]], argv[1:]
    if os.environ.get("GEOFED_CPU_LIMIT", "1") == "1":
        try:
            cgroup_join(f"{CGROUP_ROOT}/{fed}/{node}", os.getpid())
        except OSError as e:
            sys.exit(f"geofed-agent: cannot join the CPU cgroup of node {node} of testbed {fed}: {e.strerror}")
    if os.environ.get("GEOFED_NODE_HOSTNAME") == "1":
        own_hostname(node)
    # Hydra's proxy hands its own environment on to the ranks it starts.
    os.environ["GEOFED_NODE"] = node
    os.environ["GEOFED_SITE"] = node[0]
    # Like rsh, the command arrives as words of a shell line (Hydra quotes the paths).
    ns_argv = in_netns(f"{prefix(fed)}{node}", ["sh", "-c", " ".join(command)])
    os.execvp(ns_argv[0], ns_argv)


def own_hostname(node: str) -> None:
    """Give the node its own host name (a UTS namespace of its own): Open MPI names its
    shared-memory segments and session directories after the host name, and nodes that
    all share the host's collide in the one /dev/shm and /tmp (two ranks of W1 and two of
    W2 crashed in their first barrier). The node's /etc/hosts resolves its name."""
    clone_newuts = 0x04000000
    if ctypes.CDLL(None, use_errno=True).unshare(clone_newuts) != 0:
        sys.exit(f"geofed-agent: cannot give node {node} its own host name: {os.strerror(ctypes.get_errno())}")
    socket.sethostname(node)
