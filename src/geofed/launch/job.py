"""Turn a placement into an `mpiexec` (or `srun`) command and run it.

Three ways to reach nodes, one job description:
- testbed: Hydra's mpiexec runs in the namespace of the storage site's first node
  (jobs were invoked at the storage site in seed 000) and starts a proxy on every
  node through `geofed-agent`; MPI is forced onto TCP, since UCX would otherwise use
  shared memory between namespaces and no message would cross the emulated link;
- hostfile: a real cluster whose hosts are labelled by site; mpiexec over ssh;
- slurm: inside an allocation, srun with an arbitrary distribution that follows
  the placement's node order.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from geofed.errors import UserError
from geofed.federation import Federation, Node
from geofed.launch.placement import Placement
from geofed.native import binary
from geofed.testbed.host import in_netns, terminate, cpu_cgroup_dir
from geofed.testbed.plan import CGROUP_ROOT, make_plan

TESTBED_MPI_ENV = {
    "UCX_TLS": "tcp,self",
    "FI_PROVIDER": "tcp",
    "UCX_WARN_UNUSED_ENV_VARS": "n",
}


@dataclass(frozen=True)
class Job:
    fed: Federation
    placement: Placement
    argv: list[str]
    ranks_per_node: int = 1

    def nodes(self) -> list[Node]:
        return self.placement.nodes(self.fed)

    def rank_env(self, node: Node) -> dict[str, str]:
        return {
            "GEOFED_SITE": node.site,
            "GEOFED_NODE": node.name,
            "GEOFED_PLACEMENT": self.placement.code,
            "GEOFED_FEDERATION": str(self.fed.path),
        }


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the caller's environment
    files: dict[str, str] = field(default_factory=dict)  # path -> content, written before running


def _mpiexec_sections(job: Job, hosts: dict[str, str]) -> list[str]:
    """MPMD sections, one per node: each fixes the host and the rank's site and node."""
    out: list[str] = []
    for node in job.nodes():
        if out:
            out.append(":")
        out += ["-n", str(job.ranks_per_node), "-host", hosts[node.name]]
        for k, v in job.rank_env(node).items():
            out += ["-env", k, v]
        out += job.argv
    return out


def testbed_command(job: Job) -> Command:
    plan = make_plan(job.fed)
    head = plan.node(job.fed.site(job.fed.storage).node_list()[0].name)
    mpiexec = binary("mpiexec")
    argv = [mpiexec, "-iface", "eth0", "-launcher", "rsh", "-launcher-exec", binary("geofed-agent")]
    argv += _mpiexec_sections(job, {n.name: n.name for n in job.nodes()})
    env = dict(TESTBED_MPI_ENV, GEOFED_TESTBED=job.fed.name)
    return Command(in_netns(head.netns, argv), env)


def parse_hostfile(path: str | Path, fed: Federation) -> dict[str, list[str]]:
    """Hosts per site from lines `HOST SITE` ('#' starts a comment), in file order."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise UserError(f"{path}: cannot read hostfile: {e.strerror}") from None
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
    for site, count in job.placement.groups:
        if count > len(sites[site]):
            raise UserError(
                f"placement {job.placement.code!r}: hostfile {hostfile} lists {len(sites[site])} hosts at site {site}, {count} asked")
    return {n.name: sites[n.site][n.index - 1] for n in job.nodes()}


def hostfile_command(job: Job, hostfile: str | Path) -> Command:
    hosts = _real_hosts(job, hostfile)
    return Command([binary("mpiexec")] + _mpiexec_sections(job, hosts))


def slurm_command(job: Job, hostfile: str | Path, workdir: str | Path) -> Command:
    """srun inside an allocation; SLURM_HOSTFILE pins every rank to its placement node."""
    hosts = _real_hosts(job, hostfile)
    ordered = [hosts[n.name] for n in job.nodes() for _ in range(job.ranks_per_node)]
    slurm_hosts = str(Path(workdir) / "geofed-slurm-hosts")
    hostmap = ",".join(f"{hosts[n.name]}={n.name}" for n in job.nodes())
    env = {
        "SLURM_HOSTFILE": slurm_hosts,
        "GEOFED_HOSTMAP": hostmap,
        "GEOFED_PLACEMENT": job.placement.code,
        "GEOFED_FEDERATION": str(job.fed.path),
    }
    argv = ["srun", "--distribution=arbitrary", f"--ntasks={len(ordered)}", "--export=ALL"] + job.argv
    return Command(argv, env, {slurm_hosts: "\n".join(ordered) + "\n"})


def run(cmd: Command, timeout: float | None = None, job: Job | None = None) -> int:
    """Run a launch command; on timeout or Ctrl-C stop the whole job and say so."""
    env = dict(os.environ, **cmd.env)
    for path, content in cmd.files.items():
        Path(path).write_text(content)
    proc = subprocess.Popen(cmd.argv, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc, job)
        print(f"geofed run: the job did not finish within --timeout {timeout:g} s and was stopped", file=sys.stderr)
        return 124
    except KeyboardInterrupt:
        _stop(proc, job)
        print("geofed run: interrupted; the job was stopped", file=sys.stderr)
        return 130
    finally:
        for path in cmd.files:
            Path(path).unlink(missing_ok=True)


def _stop(proc: subprocess.Popen, job: Job | None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if job is not None and _on_testbed(job):
        # Ranks live in other namespaces, out of mpiexec's process group: sweep the
        # job's node cgroups so nothing of it survives.
        pids = []
        for n in job.nodes():
            procs = cpu_cgroup_dir(f"{CGROUP_ROOT}/{job.fed.name}/{n.name}") / "cgroup.procs"
            if procs.exists():
                pids += [int(p) for p in procs.read_text().split()]
        terminate(pids)


def _on_testbed(job: Job) -> bool:
    return cpu_cgroup_dir(f"{CGROUP_ROOT}/{job.fed.name}").exists()

