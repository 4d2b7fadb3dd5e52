"""Turn a placement into an `mpiexec` (or `srun`) command and run it.

Three ways to reach nodes, one job description:
- testbed: Hydra's mpiexec runs in the storage site's namespace (jobs were invoked
  at the storage site in seed 000) and starts a proxy on every node through
  `geofed-agent`; MPI is forced onto TCP, since UCX would otherwise use
  shared memory between namespaces and no message would cross the emulated link;
- hostfile: a real cluster whose hosts are labelled by site; mpiexec over ssh;
- slurm: inside an allocation, srun with an arbitrary distribution that follows
  the placement's node order.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from geofed.errors import UserError
from geofed.federation import Federation, Node
from geofed.launch import mpi
from geofed.launch.placement import Placement
from geofed.native import binary
from geofed.testbed import host
from geofed.testbed.plan import make_plan
from geofed.testbed.slurm import feature as site_feature
from geofed.testbed.slurm import node_feature
from geofed.validate import read_text

TESTBED_MPI_ENV = {
    "UCX_TLS": "tcp,self",
    "FI_PROVIDER": "tcp",
    # UCX's TCP transport writes a large message 8 KiB at a time; when the receiver
    # keeps up, each write leaves as its own frame, and every frame costs the link
    # emulator CPU that it takes from the ranks on this 2-core host (docs/launch.md).
    "UCX_TCP_TX_SEG_SIZE": "64k",
    "UCX_TCP_RX_SEG_SIZE": "64k",
    "UCX_WARN_UNUSED_ENV_VARS": "n",
    # A rank that dies of a signal leaves its Python stack in the job's log.
    "PYTHONFAULTHANDLER": "1",
}
# The testbed puts every node on one host. When a job has more ranks than the host has
# cores, a rank that polls while it waits holds a core that a computing rank, or the
# rank a message has just reached, needs until the scheduler's slice ends (milliseconds,
# where the link's latency is 145 us). With MPICH's progress throttle, a rank that
# found nothing in 512 polls sleeps (usleep(1), about 55 us here) and gives its core
# away: ma-hd's H2M2 HPL (4 ranks, 2 cores) came from 18-26 % to 2-12 % slower than the
# model, whose ranks each have a core (64 polls: 7-15 %; MPICH's 4096: 9-19 %;
# docs/hpl.md). A job with a core per rank polls as before.
OVERSUBSCRIBED_MPI_ENV = {
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "512",
}
# A rank that polls while it waits under its node's CPU quota spends the quota and is
# throttled for the rest of the cgroup period (100 ms), reply or not. MPICH's heavy yield
# makes the wait loop's yield a nanosleep (about 55 us with the kernel's timer slack):
# a waiting rank under ma-hd's 0.3-core quota then used 20-21 % of a core instead of
# all 30 %, at the price of up to that sleep per message waited for (docs/launch.md).
QUOTA_MPI_ENV = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}
# Open MPI on the testbed (docs/launch.md): ob1 over TCP between nodes and vader's shared
# memory only within one node (Open MPI's UCX would share memory across namespaces, as
# MPICH's did); TCP, and the daemons' own channel, on the testbed's addresses; no tree
# spawn, since every daemon must enter its node through the agent; no binding, since all
# nodes share the host's cores (Hydra binds nothing either).
TESTBED_SUBNET = "198.18.0.0/16"
# Open MPI's session directories of a job (orte_tmpdir_base), removed when it ends.
OPENMPI_SESSION_DIR = "/tmp/geofed-ompi-job-"
# Above btl_tcp_eager_limit (64 KiB by default) ob1 sends a message by rendezvous, one round
# trip of the link before its data: a 64 KiB one-way time across icm-task's 9 ms link was
# 16.8 ms against 7.2 ms with this limit; UCX, under MPICH, sent the same sizes eagerly.
OPENMPI_EAGER_LIMIT = str(8 << 20)
# ob1 over TCP is driven by libevent, which opal_progress ticks at every call while the TCP
# BTL counts itself a user of it, else once per 10 ms. About one job in three on the testbed
# ran in the 10 ms mode throughout: 1-byte round trips of ~10 ms on ma-hd's 0.3 ms link, 4 MiB
# at 45 instead of 200 MB/s (a socket buffer per tick). A tick rate of 1 us ticks it at every
# call in every job (0 of 12 slow against 4 of 12, docs/launch.md).
OPENMPI_EVENT_TICK_US = "1"
OPENMPI_TESTBED_MCA = {
    "pml": "ob1",
    "btl": "self,vader,tcp",
    "btl_tcp_if_include": TESTBED_SUBNET,
    "btl_tcp_eager_limit": OPENMPI_EAGER_LIMIT,
    "mpi_event_tick_rate": OPENMPI_EVENT_TICK_US,
    "oob_tcp_if_include": TESTBED_SUBNET,
    "plm_rsh_no_tree_spawn": "1",
}
# Under the testbed's Slurm no daemon of Open MPI's runs and every node namespace keeps the
# host's name: vader would name two nodes' segments alike (see the agent's GEOFED_NODE_HOSTNAME),
# so ranks of one node talk over TCP too.
OPENMPI_SRUN_TESTBED_MCA = {"pml": "ob1", "btl": "self,tcp", "btl_tcp_if_include": TESTBED_SUBNET,
                            "btl_tcp_eager_limit": OPENMPI_EAGER_LIMIT, "mpi_event_tick_rate": OPENMPI_EVENT_TICK_US}
# Hydra's proxy writes the node's hwloc topology here (the path is compiled in).
HYDRA_TOPOLOGY_FILE = "/tmp/hydra_hwloc_xmlfile_"


@dataclass(frozen=True)
class Job:
    fed: Federation
    placement: Placement
    argv: list[str]
    ranks_per_node: int = 1
    # MPI ranks busy-poll while they wait. Under a node's CPU quota a rank waiting
    # for a long-haul reply burns its quota and is throttled for the rest of the
    # period (a 9 ms ping-pong took 50 to 100 ms), so jobs that measure the network
    # run without the quota; compute jobs keep it, as it sets the node's speed.
    cpu_limit: bool = True
    # Under the quota, a rank sleeps briefly between polls when it finds nothing
    # (MPICH's heavy yield), so waiting does not spend the quota (docs/launch.md).
    # Users' programs (`geofed run`) do; geofed's workloads keep the polling their
    # models were calibrated with.
    waiting_sleeps: bool = False
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def nodes(self) -> list[Node]:
        return self.placement.nodes(self.fed)

    def ranks(self) -> int:
        return self.ranks_per_node * len(self.nodes())

    def env(self) -> dict[str, str]:
        """What every rank is told; its own node comes from the agent or GEOFED_HOSTMAP.
        The environment geofed runs in comes first on PATH, so `python`, `mpiexec` and
        geofed's programs are its own whatever the caller's PATH (docs/launch.md)."""
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        return {"GEOFED_PLACEMENT": self.placement.code, "GEOFED_FEDERATION": str(self.fed.path),
                "GEOFED_JOB": self.id, "PATH": path, **mpi.current().rank_env()}

    def rank_argv(self) -> list[str]:
        """What each rank runs: the program under geofed's rank wrapper, which reports
        a rank that fails so the runner ends the job at once (geofed.launch.rank)."""
        return [sys.executable, "-m", "geofed.launch.rank"] + self.argv


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the caller's environment
    files: dict[str, str] = field(default_factory=dict)  # path -> content, written before running


def _hosts_args(job: Job, hosts: dict[str, str], env: dict[str, str]) -> list[str]:
    """Both fill each host's slots in order, so ranks follow the placement's nodes.
    Hydra hands its whole environment to the ranks; Open MPI only what `-x` names."""
    hostlist = ",".join(f"{hosts[n.name]}:{job.ranks_per_node}" for n in job.nodes())
    if mpi.current().implementation == "mpich":
        return ["-hosts", hostlist, "-n", str(job.ranks())] + job.rank_argv()
    exported = sorted(set(env) | {k for k in FORWARDED_ENV if k in os.environ})
    return (["--host", hostlist, "--map-by", "slot", "--bind-to", "none", "-np", str(job.ranks())]
            + [w for k in exported for w in ("-x", k)] + job.rank_argv())


# What a user's own environment gives a Python rank that Open MPI would not pass on.
FORWARDED_ENV = ("PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH")


def _openmpi(mca: dict[str, str]) -> list[str]:
    """Open MPI's launcher with these MCA settings; as root it needs to be told it may run."""
    argv = [mpi.current().launcher] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return argv + [w for k, v in mca.items() for w in ("--mca", k, v)]


def testbed_command(job: Job) -> Command:
    plan = make_plan(job.fed)
    # mpiexec runs at the storage site's router, like a login node there; from a
    # node's own namespace Hydra would start that node's proxy itself, bypassing the
    # agent (no cgroup, no node identity).
    head = next(s for s in plan.sites if s.code == job.fed.storage)
    # The agent starts each node's proxy (Hydra) or daemon (Open MPI's orted) in its node.
    if mpi.current().implementation == "mpich":
        argv = [mpi.current().launcher, "-iface", "br0", "-launcher", "rsh", "-launcher-exec", binary("geofed-agent")]
    else:
        argv = _openmpi(dict(OPENMPI_TESTBED_MCA, plm_rsh_agent=binary("geofed-agent"),
                             orte_tmpdir_base=OPENMPI_SESSION_DIR + job.id))
    # Hosts by address: mpiexec sees the host's /etc (see below), where node names do
    # not resolve, and each failed lookup waited 5 s for an unreachable DNS server.
    hosts = {n.name: plan.node(n.name).address for n in job.nodes()}
    env = dict(TESTBED_MPI_ENV, GEOFED_TESTBED=job.fed.name, GEOFED_CPU_LIMIT=str(int(job.cpu_limit)),
               GEOFED_HOSTMAP=_hostmap(hosts), **job.env())
    if job.ranks() > len(os.sched_getaffinity(0)):
        env.update(OVERSUBSCRIBED_MPI_ENV)
    if job.cpu_limit and job.waiting_sleeps:
        env.update(QUOTA_MPI_ENV)
    if mpi.current().implementation == "openmpi":
        env["GEOFED_NODE_HOSTNAME"] = "1"  # see geofed.launch.agent.own_hostname
    argv += _hosts_args(job, hosts, env)
    # The agent joins each node's cgroup, so mpiexec must see the host's /sys.
    return Command(host.in_netns_keep_mounts(head.netns, argv), env)


def parse_hostfile(path: str | Path, fed: Federation) -> dict[str, list[str]]:
    """Hosts per site from lines `HOST SITE` ('#' starts a comment), in file order."""
    path = Path(path)
    text = read_text(path, "hostfile")
    sites: dict[str, list[str]] = {s.code: [] for s in fed.sites}
    seen = set()
    for no, line in enumerate(text.splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise UserError(f"{path}:{no}: expected 'HOST SITE', got {line.strip()!r}")
        hostname, site = words
        if site not in sites:
            raise UserError(f"{path}:{no}: unknown site {site!r} (federation {fed.name} has {', '.join(sites)})")
        if hostname in seen:
            raise UserError(f"{path}:{no}: host {hostname} is listed twice")
        seen.add(hostname)
        sites[site].append(hostname)
    return sites


def _real_hosts(job: Job, hostfile: str | Path) -> dict[str, str]:
    """Node name (W1, W2, ...) -> real host, the n-th host of a site being node n."""
    sites = parse_hostfile(hostfile, job.fed)
    hosts = {}
    for n in job.nodes():
        listed = sites[n.site]
        if n.index > len(listed):
            raise UserError(f"placement {job.placement.code!r}: hostfile {hostfile} lists {len(listed)} hosts at "
                            f"site {n.site}, node {n.name} asked (node n of a site is its n-th host)")
        hosts[n.name] = listed[n.index - 1]
    return hosts


def _hostmap(hosts: dict[str, str]) -> str:
    return ",".join(f"{h}={node}" for node, h in hosts.items())


def testbed_transport(hostfile: str | Path | None) -> bool:
    """Whether a job launched from here gets the testbed's MPI settings (TCP on the nodes'
    addresses, no shared memory between nodes): on the testbed itself, and on its own sshd
    (`geofed ops ssh`) or Slurm without a hostfile, where the nodes share one kernel too;
    a real cluster's hostfile or allocation keeps the MPI's own choice."""
    if os.environ.get("SLURM_JOB_ID"):
        return not hostfile and bool(os.environ.get("GEOFED_TESTBED"))
    return not hostfile or bool(os.environ.get("GEOFED_TESTBED"))


def hostfile_command(job: Job, hostfile: str | Path) -> Command:
    hosts = _real_hosts(job, hostfile)
    testbed = testbed_transport(hostfile)
    env = dict(TESTBED_MPI_ENV, **job.env(), GEOFED_HOSTMAP=_hostmap(hosts)) if testbed else \
        dict(job.env(), GEOFED_HOSTMAP=_hostmap(hosts))
    if mpi.current().implementation == "mpich":
        launcher = [mpi.current().launcher]
    else:  # over ssh, as Hydra; on the testbed's sshd TCP on its addresses, as on the testbed
        launcher = _openmpi(OPENMPI_TESTBED_MCA if testbed else {})
    return Command(launcher + _hosts_args(job, hosts, env), env)


def allocated_nodes() -> list[str]:
    """The Slurm node names of the allocation this process runs in."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST", "")
    res = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True)
    if res.returncode != 0 or not nodelist:
        raise UserError(f"cannot read this Slurm allocation's nodes (SLURM_JOB_NODELIST={nodelist!r}): "
                        f"{res.stderr.strip() or 'empty'}")
    return res.stdout.split()


def _allocated_hosts(job: Job) -> dict[str, str]:
    """On the testbed's Slurm, node names are the federation's: a node the placement
    names is that Slurm node; a site's count takes the allocation's first nodes there."""
    site_of = {n.name: n.site for n in job.fed.nodes()}
    nodes = allocated_nodes()
    unknown = [n for n in nodes if n not in site_of]
    if unknown:
        raise UserError(f"allocation node {unknown[0]} is not a node of federation {job.fed.name}; "
                        f"on a real cluster give --hostfile")
    hint = f"allocate with --constraint '{slurm_constraint(job.placement)}'"
    hosts = {}
    for g in job.placement.groups:
        if g.named:
            missing = [n for n in g.node_names() if n not in nodes]
            if missing:
                raise UserError(f"placement {job.placement.code!r} names node {missing[0]}; the allocation has "
                                f"{','.join(nodes)}; {hint}")
            hosts.update({n: n for n in g.node_names()})
            continue
        mine = [n for n in nodes if site_of[n] == g.site]
        if g.count > len(mine):
            raise UserError(f"placement {job.placement.code!r} needs {g.count} nodes at site {g.site}; the "
                            f"allocation has {len(mine)} there ({','.join(nodes)}); {hint}")
        hosts.update(zip(g.node_names(), mine))
    return hosts


def slurm_constraint(placement: Placement) -> str:
    """Slurm's constraint for a placement: so many nodes with each site's feature, and
    each node named by its own feature (the testbed's Slurm gives node W3 `node_W3`)."""
    counts = []
    for g in placement.groups:
        if g.named:
            counts += [(node_feature(n), 1) for n in g.node_names()]
        elif g.count:
            counts.append((site_feature(g.site), g.count))
    if len(counts) == 1:  # one feature needs no count: the job's --nodes is the count
        return counts[0][0]
    return "[" + "&".join(f"{f}*{n}" for f, n in counts) + "]"


def slurm_command(job: Job, hostfile: str | Path | None, workdir: str | Path) -> Command:
    """srun inside an allocation; SLURM_HOSTFILE pins every rank to its placement node.
    Without a hostfile the allocation is the testbed's Slurm (GEOFED_TESTBED set)."""
    if hostfile:
        hosts = _real_hosts(job, hostfile)
        hostmap = _hostmap(hosts)
    else:
        hosts = _allocated_hosts(job)
        # Every node namespace shares the host's name: a rank knows its node by SLURMD_NODENAME.
        hostmap = ",".join(f"{h}={h}" for h in hosts.values())
    implementation = mpi.current().implementation
    env = {}
    if testbed_transport(hostfile):  # Open MPI's settings through its environment: srun has no --mca
        env.update(TESTBED_MPI_ENV, **({f"OMPI_MCA_{k}": v for k, v in OPENMPI_SRUN_TESTBED_MCA.items()}
                                       if implementation == "openmpi" else {}))
    ordered = [hosts[n.name] for n in job.nodes() for _ in range(job.ranks_per_node)]
    slurm_hosts = str(Path(workdir) / f"geofed-slurm-hosts-{job.id}")
    env.update(job.env(), SLURM_HOSTFILE=slurm_hosts, GEOFED_HOSTMAP=hostmap)
    # The placement, not Slurm's per-step CPU count, says how many ranks a node runs, as
    # with mpiexec: --overcommit lets a step have more ranks than the node's CPUs, and
    # --overlap lets steps share a node (the Gray-Scott workflow's parts run side by side;
    # without it, a step waits for the node while the part holding it waits for the step).
    argv = ["srun", f"--mpi={mpi.SRUN_PMI[implementation]}", "--distribution=arbitrary", f"--ntasks={len(ordered)}",
            "--overcommit", "--overlap", "--export=ALL"] + job.rank_argv()
    return Command(argv, env, {slurm_hosts: "\n".join(ordered) + "\n"})


def stop(proc: subprocess.Popen, job: Job, since: float) -> None:
    """Stop a launched job: mpiexec's process group, then every process of the job.

    Ranks and Hydra proxies live in other namespaces and sessions, out of mpiexec's
    process group: they are found by the job id in their environment, so nothing of
    this job survives and no other job is touched. A proxy that its launcher was
    still starting appears after the first sweep, hence the repeats. MPICH leaves
    its shared-memory segments behind when ranks are killed, and Hydra its topology
    files when proxies are; the ones the job's processes held are removed, and so are
    those made between the last look at them and their end (a rank starting MPI when
    the job was stopped, a proxy Hydra took down itself after a rank failed): made
    since the job started, by this user, held by no one.
    """
    # Before mpiexec goes: its end takes the ranks with it, and their maps.
    left = _left_files(job_pids(job))
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for _ in range(5):
        pids = job_pids(job)
        if not pids:
            break
        left |= _left_files(pids)
        host.terminate(pids)
    for path in left:
        Path(path).unlink(missing_ok=True)
    remove_orphan_files(since)
    shutil.rmtree(OPENMPI_SESSION_DIR + job.id, ignore_errors=True)


def remove_orphan_files(since: float) -> None:
    """Remove the shared-memory segments and Hydra topology files made since `since` by
    this user that no process holds: what ranks and proxies killed by an abort or a stop
    leave behind (a job that ends cleanly removes its own)."""
    for path in host.orphan_segments(since) | host.orphan_segments(since, HYDRA_TOPOLOGY_FILE + "*") | \
            host.orphan_segments(since, "/dev/shm/vader_segment.*"):
        Path(path).unlink(missing_ok=True)


def job_pids(job: Job) -> list[int]:
    """Every process on this host that belongs to `job` (GEOFED_JOB in its environment)."""
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) != os.getpid()]
    return host.pids_with_env(pids, "GEOFED_JOB", job.id)


def _left_files(pids: list[int]) -> set[str]:
    """Files of `pids` that a kill leaves behind: MPICH's shared-memory segments (mapped)
    and Hydra's topology files (a proxy holds its /tmp/hydra_hwloc_xmlfile_* open and
    removes it only when it ends cleanly). Other users' files are not ours."""
    files = set()
    for p in pids:
        files |= host.mapped_segments(p)
        files |= {path for path in host.open_files(p) if path.startswith(HYDRA_TOPOLOGY_FILE)}
    return files
