"""What a rank started by `geofed run` knows about where it runs.

`geofed run` tells every rank its site and node through the environment:
GEOFED_SITE, GEOFED_NODE, GEOFED_PLACEMENT, GEOFED_FEDERATION (a file path) and,
on the testbed, GEOFED_TESTBED. Under srun, where one environment reaches all
ranks, GEOFED_HOSTMAP ("host=node,...") maps the host name to the node instead.
"""

from __future__ import annotations

import os
import socket
import time

from geofed.federation import Federation, load


def node() -> str | None:
    name = os.environ.get("GEOFED_NODE")
    if name:
        return name
    hostmap = os.environ.get("GEOFED_HOSTMAP")
    if hostmap:
        table = dict(item.split("=", 1) for item in hostmap.split(",") if "=" in item)
        # Under Slurm the node's own name first: on the testbed every node shares the host's name.
        for host in (os.environ.get("SLURMD_NODENAME"), socket.gethostname()):
            if host and (table.get(host) or table.get(host.split(".")[0])):
                return table.get(host) or table.get(host.split(".")[0])
        return None
    return None


def site() -> str | None:
    s = os.environ.get("GEOFED_SITE")
    if s:
        return s
    n = node()
    return n[0] if n else None


def placement() -> str | None:
    return os.environ.get("GEOFED_PLACEMENT")


def testbed() -> str | None:
    """The federation name when running on the emulated testbed, else None."""
    return os.environ.get("GEOFED_TESTBED")


def federation() -> Federation | None:
    path = os.environ.get("GEOFED_FEDERATION")
    return load(path) if path else None


def pair_class(node_a: str, node_b: str) -> str:
    """intra-node, intra-site or inter-site, from two node names like W1 and G2."""
    if node_a == node_b:
        return "intra-node"
    return "intra-site" if node_a[0] == node_b[0] else "inter-site"


def rank_map(comm) -> list[dict]:
    """Every rank's node and site, gathered over an mpi4py communicator."""
    me = {"rank": comm.Get_rank(), "node": node(), "site": site(), "host": socket.gethostname()}
    return comm.allgather(me)


def quiet_wait(request, poll_s: float = 0.0005) -> None:
    """Complete a nonblocking MPI request, sleeping while it waits.

    MPI's own blocking calls busy-poll; on a testbed with fewer cores than ranks, ranks
    spinning there steal the CPU of the ranks being measured.
    """
    while not request.Test():
        time.sleep(poll_s)


def quiet_barrier(comm, poll_s: float = 0.0005) -> None:
    """A barrier that sleeps while it waits (`quiet_wait`)."""
    quiet_wait(comm.Ibarrier(), poll_s)


def refuse(program: str, error: Exception, status: int = 2) -> int:
    """A rank's answer to a request it cannot carry out: say why, and end the whole job.

    Ranks can fail a check alone (one rank of a pair loads the kernels, say) while the
    others wait in a barrier or in MPI_Finalize for it: without an abort that job hangs
    until its timeout. The runner quotes this line in its one-line error."""
    import sys

    from mpi4py import MPI
    print(f"{program}: error: {error}", file=sys.stderr, flush=True)
    if MPI.COMM_WORLD.Get_size() > 1:
        MPI.COMM_WORLD.Abort(status)
    return status
