"""`geofed ops slurm up|down|status|exec FEDERATION`: real Slurm on the testbed.

Debian's Slurm (22.05) and MUNGE, as geofed's own foreground children: munged and
slurmctld on the controller site's login node (the storage site's, where geofed's
mpiexec runs too), one slurmd per emulated node inside that node's namespace, so a
job step's ranks live on their node and talk across the emulated link. Everything a
cluster has lives under /run/geofed/<federation>/slurm-<cluster>/ (configuration,
MUNGE key and socket, spool, state, logs) is a service of the testbed under
/run/geofed/<federation>/services/slurm-<cluster>/ (testbed/services.py), so
`geofed ops slurm down` and `geofed testbed down` both stop it and remove it.

The generated slurm.conf carries what the federation file says (docs/slurm.md):
a node per emulated node with its CPUs, memory and the features `site_<code>` and
`node_<name>` (a placement naming nodes asks for them by it); a partition per site and
one spanning all (the default); node weights from speeds (the faster nodes are given
out first). Site confinement is policy, enforced by Slurm itself through a job_submit
Lua rule on every job however submitted: a job runs at one site (node lists, ORs,
exclusions, heterogeneous components and array tasks kept there, or refused) unless it
asks to span with a constraint of counts such as `[site_W*2&site_G*1]` (what `geofed
submit --span` writes). A TaskProlog tells every task its node and site (GEOFED_NODE,
GEOFED_SITE). Clients run as the cluster's own normal user, so its jobs run as that
user, never as root.

Every site its own cluster, each reporting to one slurmdbd (`Accounting`), is a member of
Slurm's own federation (testbed/slurm_federation.py).

Traps found (../shared/specs/platform-notes.md): slurmd must be started with
`nsenter --net` (`ip netns exec` remounts /sys and hides the cgroup tree);
munged's socket directory must be mode 755; SlurmctldHost's name must be the host's.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from geofed.errors import UserError
from geofed.federation import Federation, Node
from geofed.testbed import host, services
from geofed.testbed.plan import Plan

START_TIMEOUT_S = 60.0
CTLD_PORT = 6817
SLURMD_PORT = 6818
Progress = Callable[[str], None]

JOB_SUBMIT_LUA = r"""
-- geofed: site confinement (docs/slurm.md, "Site confinement"). A job runs on the nodes
-- of one site unless it asks to span with a list of counts in brackets, e.g.
-- --constraint '[site_W*2&site_G*1]' or '[node_W3*1&node_G2*1]'. Whatever else it
-- says (a node list, features, an OR, exclusions) is kept at one site or refused:
-- - no site named: Slurm's matching OR "[site_W|site_G]" (all nodes share one feature);
-- - an OR of sites ("site_W|site_G"): that matching OR;
-- - one site named (by a site or node feature, or the node list): ANDed with that site;
-- - several sites named otherwise: refused, saying how to ask;
-- - a heterogeneous job: every component at the one site its first names.
-- A span whose comment carries geofed's prediction ("geofed: span, predicted slowdown
-- 4.80 % < 10 % ...", written by `geofed submit --profile`) is held to the federation's
-- [scheduler] max_span_slowdown_percent: at or above it, the job is kept at one site.
local sites = "{sites}"
local max_span_slowdown = {max_span_slowdown}
local site_of_node = { {site_of_node} }
local NO_VAL = 4294967294
local het_site = nil  -- the site of the heterogeneous job being submitted (components come in order)

local function spans(f)
   return string.match(f, "^%[[^|]*%*[^|]*%]$") ~= nil
end

local function expand(list, out)
   -- Slurm's host list: "W[1-3,5],G1" -> W1 W2 W3 W5 G1
   local depth, start = 0, 1
   for i = 1, #list + 1 do
      local c = string.sub(list, i, i)
      if c == "[" then depth = depth + 1 elseif c == "]" then depth = depth - 1 end
      if (c == "," and depth == 0) or i > #list then
         local item = string.sub(list, start, i - 1)
         local head, ranges, tail = string.match(item, "^([^%[]*)%[([^%]]*)%](.*)$")
         if head == nil then
            if item ~= "" then table.insert(out, item) end
         else
            for r in string.gmatch(ranges, "[^,]+") do
               local lo, hi = string.match(r, "^(%d+)-(%d+)$")
               lo, hi = lo or r, hi or r
               for n = tonumber(lo), tonumber(hi) do
                  expand(head .. string.format("%0" .. #lo .. "d", n) .. tail, out)
               end
            end
         end
         start = i + 1
      end
   end
   return out
end

-- The sites a job names: by its site and node features and by its node list.
local function named_sites(f, nodes)
   local found, count, first = {}, 0, nil
   local function add(s)
      if s ~= nil and not found[s] then found[s] = true; count = count + 1; first = first or s end
   end
   for s in string.gmatch(f, "site_([^&|%*%[%]%(%),:%s]+)") do add(s) end
   for n in string.gmatch(f, "node_([^&|%*%[%]%(%),:%s]+)") do add(site_of_node[n] or ("?" .. n)) end
   for _, n in ipairs(expand(nodes, {})) do add(site_of_node[n] or ("?" .. n)) end
   local list = {}
   for s in pairs(found) do table.insert(list, s) end
   table.sort(list)
   return count, first, list
end

local function refuse(msg)
   slurm.log_user("geofed: %s (docs/slurm.md, \"Site confinement\")", msg)
   return slurm.ERROR
end

-- "site_W|site_G" or "node_W1|node_G2": an OR of sites or nodes alone.
local function plain_or(f)
   local rest, n = string.gsub(f, "[sn][io][td]e_[^&|%*%[%]%(%),:%s]+", "")
   return n > 1 and rest == string.rep("|", n - 1)
end

-- Keep the job (features f, node list nodes) at one site, or say why not.
local function confine(job_desc, f, nodes)
   local het = job_desc.het_job_offset ~= nil and job_desc.het_job_offset ~= NO_VAL
   if het and job_desc.het_job_offset == 0 then het_site = nil end
   if spans(f) then
      local slowdown = tonumber(string.match(job_desc.comment or "", "^geofed:.-predicted slowdown ([%d%.]+) %%"))
      if slowdown == nil or slowdown < max_span_slowdown or het then
         if het then het_site = "*" end
         return slurm.SUCCESS
      end
      job_desc.features = sites
      job_desc.comment = job_desc.comment .. "; kept at one site by the rule: " .. slowdown .. " % >= " ..
                         max_span_slowdown .. " %"
      slurm.log_user("geofed: predicted slowdown %s %% across the link is not below %s %%: kept at one site",
                     slowdown, max_span_slowdown)
      return slurm.SUCCESS
   end
   local count, first, list = named_sites(f, nodes)
   if count > 1 and nodes == "" and not het then
      -- An OR across sites becomes Slurm's matching OR: all nodes share one of them.
      local g = plain_or(f) and ("[" .. f .. "]") or f
      if plain_or(string.match(g, "^%[(.*)%]$") or "") then
         job_desc.features = g
         return slurm.SUCCESS
      end
   end
   if count > 1 then
      return refuse("this job names sites " .. table.concat(list, ", ") .. " (constraint '" .. f .. "', nodes '" ..
                    nodes .. "'); a job runs at one site: name one, let Slurm choose one with '" .. sites ..
                    "', or ask to span with counts, e.g. '[site_" .. list[1] .. "*1&site_" .. list[2] .. "*1]'")
   end
   if het then
      if het_site == "*" then return slurm.SUCCESS end
      if count == 0 then
         return refuse("a heterogeneous job runs at one site: give every component the same site, e.g. -C " ..
                       string.match(sites, "site_[^|%]]+") .. ", or ask to span with counts")
      end
      if het_site ~= nil and het_site ~= first then
         return refuse("the components of this heterogeneous job name sites " .. het_site .. " and " .. first ..
                       "; a job runs at one site, or asks to span with counts")
      end
      het_site = first
   end
   if count == 0 then
      job_desc.features = (f == "") and sites or ("(" .. f .. ")&" .. sites)
   elseif nodes ~= "" or string.find(f, "|", 1, true) then
      -- A node list or an OR within one site: ANDed with the site, so no other node joins.
      job_desc.features = (f == "") and ("site_" .. first) or ("(" .. f .. ")&site_" .. first)
   end
   return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   return confine(job_desc, job_desc.features or "", job_desc.req_nodes or "")
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   -- A pending job's new features or node list, held to the same rule.
   if job_desc.features == nil and job_desc.req_nodes == nil then return slurm.SUCCESS end
   return confine(job_desc, job_desc.features or job_rec.features or "", job_desc.req_nodes or job_rec.req_nodes or "")
end
"""


def _quiet(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class Cluster:
    """One Slurm cluster of the testbed: its controller's site and its nodes."""

    name: str
    controller: str  # site code whose login node runs slurmctld and munged
    nodes: tuple[Node, ...]

    def sites(self) -> list[str]:
        return sorted({n.site for n in self.nodes})


def federated(fed: Federation) -> Cluster:
    """The federation as one cluster, its controller at the storage site."""
    return Cluster("fed", fed.storage, tuple(fed.nodes()))


def separate(fed: Federation) -> list[Cluster]:
    """Every site its own cluster (before federating, seed 001 slide 15)."""
    return [Cluster(f"site{s.code}", s.code, tuple(s.node_list())) for s in fed.sites]


@dataclass(frozen=True)
class Accounting:
    """Where a cluster's slurmctld finds slurmdbd, and the MUNGE key every cluster of a
    Slurm federation shares with it (credentials pass between the clusters)."""

    address: str
    port: int
    munge_key: Path


def service_name(cluster: Cluster) -> str:
    return f"slurm-{cluster.name}"


def cluster_dir(plan: Plan, cluster: Cluster) -> Path:
    return services.service_dir(plan.fed.name, service_name(cluster))


def feature(site: str) -> str:
    return f"site_{site}"


def node_feature(node: str) -> str:
    """A node's own feature: a placement that names nodes (W[1,3]) asks for them by it."""
    return f"node_{node}"


def slurm_conf(fed: Federation, plan: Plan, cluster: Cluster, d: Path, hostname: str,
               accounting: Accounting | None = None) -> str:
    """slurm.conf of `cluster`: paths under `d`, nodes and partitions from the federation;
    with `accounting`, a member of a Slurm federation through that slurmdbd."""
    ctld = plan.node(fed.site(cluster.controller).login_node.name)
    lines = [
        f"# generated by geofed ops slurm for federation {fed.name} ({fed.path}); do not edit",
        f"ClusterName=geofed-{cluster.name.lower()}",
        f"SlurmctldHost={hostname}({ctld.address})",
        f"SlurmctldPort={CTLD_PORT}", f"SlurmdPort={SLURMD_PORT}",
        "AuthType=auth/munge", f"AuthInfo=socket={d}/munge/munge.sock", "CredType=cred/munge",
        "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={d}/ctld", f"SlurmctldPidFile={d}/ctld/slurmctld.pid", f"SlurmctldLogFile={d}/ctld/slurmctld.log",
        f"SlurmdSpoolDir={d}/d/%n", f"SlurmdPidFile={d}/d/slurmd.%n.pid", f"SlurmdLogFile={d}/d/%n.log",
        # A node's own: srun --mpi=pmix's step daemons make their PMIx directory there, named
        # for the user and step alone, and the second node's found the first one's.
        f"TmpFS={d}/tmp/%n", f"TaskProlog={d}/task_prolog",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        *(["AccountingStorageType=accounting_storage/slurmdbd", f"AccountingStorageHost={accounting.address}",
           f"AccountingStoragePort={accounting.port}", f"AccountingStoragePass={d}/munge/munge.sock"]
          if accounting else ["AccountingStorageType=accounting_storage/none"]),
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill", "MpiDefault=pmi2",
        # Wait times and node use come from Slurm's own completion records.
        "JobCompType=jobcomp/filetxt", f"JobCompLoc={d}/jobcomp.txt",
        # In a Slurm federation every cluster is one site, so no job spans; the rule would
        # pin a job's sibling copies to the site it was submitted at.
        *([] if accounting else ["JobSubmitPlugins=lua"]),
        "ReturnToService=2", "InactiveLimit=0", "KillWait=5", "MinJobAge=300",
        "SlurmctldTimeout=30", "SlurmdTimeout=60", "MessageTimeout=20",
        "SlurmctldDebug=info", "SlurmdDebug=info",
    ]
    for n in cluster.nodes:
        site = fed.site(n.site)
        # Weight: Slurm hands out the lowest first; faster nodes first.
        lines.append(f"NodeName={n.name} NodeAddr={plan.node(n.name).address} CPUs={site.cores_per_node} "
                     f"RealMemory={max(1, int(site.memory_gb * 1024 * 0.9))} Weight={round(100 / site.speed)} "
                     f"Features={feature(n.site)},{node_feature(n.name)} State=UNKNOWN")
    for s in cluster.sites():
        names = ",".join(n.name for n in cluster.nodes if n.site == s)
        lines.append(f"PartitionName={s} Nodes={names} MaxTime=INFINITE State=UP")
    # A Slurm federation's sibling jobs name the partition they were submitted to: every
    # cluster has `all`.
    if len(cluster.sites()) > 1 or accounting:
        lines.append("PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    else:
        lines[-1] += " Default=YES"
    return "\n".join(lines) + "\n"


def job_submit_lua(fed: Federation, cluster: Cluster) -> str:
    """The rule with the cluster's sites, fastest first (Slurm tries a matching OR's
    features in order), and the site of each node."""
    sites = sorted(cluster.sites(), key=lambda s: (-fed.site(s).speed, s))
    site_of_node = ", ".join(f'["{n.name}"] = "{n.site}"' for n in cluster.nodes)
    return JOB_SUBMIT_LUA.replace("{sites}", "[" + "|".join(feature(s) for s in sites) + "]") \
        .replace("{ {site_of_node} }", "{ " + site_of_node + " }") \
        .replace("{max_span_slowdown}", f"{fed.max_span_slowdown * 100:g}")


def task_prolog(cluster: Cluster) -> str:
    """Slurm's TaskProlog: what it prints as `export` enters every task's environment,
    so every rank of every job step knows its node and site (geofed.runtime)."""
    cases = "".join(f'  {"|".join(n.name for n in cluster.nodes if n.site == s)}) echo "export GEOFED_SITE={s}" ;;\n'
                    for s in cluster.sites())
    return ("#!/bin/sh\n# generated by geofed ops slurm: every task knows its node and site (docs/slurm.md)\n"
            'echo "export GEOFED_NODE=$SLURMD_NODENAME"\n'
            f'case "$SLURMD_NODENAME" in\n{cases}esac\n')


# ---------------------------------------------------------------- state


def read_state(plan: Plan, cluster: Cluster) -> dict | None:
    return services.read(plan.fed.name, service_name(cluster))


def client_env(plan: Plan, cluster: Cluster) -> dict[str, str]:
    """What Slurm's commands (sinfo, sbatch, srun) need, and what tells geofed run it is
    on this testbed inside an allocation."""
    return {"SLURM_CONF": str(cluster_dir(plan, cluster) / "slurm.conf"), "GEOFED_TESTBED": plan.fed.name}


def user(fed_name: str, cluster: Cluster) -> str:
    """The cluster's user, who submits its jobs: a normal user, never root."""
    return services.user_name(f"{fed_name}/{service_name(cluster)}")


def home(plan: Plan, cluster: Cluster) -> Path:
    return cluster_dir(plan, cluster) / "home"


def client_argv(plan: Plan, cluster: Cluster, argv: list[str]) -> list[str]:
    """`argv` run as the cluster's user in its home, on the controller site's login node,
    where users submit from: its jobs run as that user."""
    login = plan.node(plan.fed.site(cluster.controller).login_node.name)
    return host.in_netns_keep_mounts(login.netns, ["runuser", "-u", user(plan.fed.name, cluster), "--",
                                                   "env", f"--chdir={home(plan, cluster)}"] + argv)


def run_client(plan: Plan, cluster: Cluster, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(client_argv(plan, cluster, argv), env=dict(os.environ, **client_env(plan, cluster)),
                          capture_output=True, text=True, timeout=timeout)


def require_up(fed: Federation, site: str | None = None) -> tuple[Plan, Cluster]:
    """The testbed's plan and the running cluster users of `site` (default: the storage
    site) submit to: the federated cluster, or in a Slurm federation the site's own."""
    from geofed.testbed import core
    plan = core.require_up(fed)
    c = federated(fed)
    if read_state(plan, c) is None:
        c = next((s for s in separate(fed) if s.controller == (site or fed.storage) and read_state(plan, s)), c)
    state = read_state(plan, c)
    if state is None or not state["complete"]:
        raise UserError(f"Slurm is not up on testbed {fed.name}; run: geofed ops slurm up {fed.name}")
    dead = services.dead(state)
    if dead:
        raise UserError(f"Slurm on testbed {fed.name} is broken ({', '.join(dead)} gone); run: "
                        f"geofed ops slurm down {fed.name}; geofed ops slurm up {fed.name}")
    return plan, c


# ---------------------------------------------------------------- submitting


def submit_federation(given: str | None) -> str:
    """The federation `geofed submit` submits on: -f as given, else the testbed it runs
    in (GEOFED_TESTBED, which `ops slurm exec` sets), else the one testbed here whose
    Slurm is up; none or several is refused, naming the choices."""
    if given:
        return given
    from geofed.testbed import core
    names = [os.environ["GEOFED_TESTBED"]] if os.environ.get("GEOFED_TESTBED") else core.testbeds()
    up = {name: s.get("federation_file") or name for name in names for s in _clusters_up(name)
          if s["complete"] is not False}
    if len(up) == 1:
        return next(iter(up.values()))
    if up:
        raise UserError(f"submit: Slurm is up on testbeds {', '.join(sorted(up))}; choose one with -f")
    raise UserError("submit: no testbed here has Slurm up (geofed ops slurm up FEDERATION); on a real cluster give "
                    "the federation file with -f")


def require_user_reaches(plan: Plan, cluster: Cluster, read: list[str], write: list[str]) -> None:
    """A job runs as the cluster's user: what it reads and writes must be theirs to reach."""
    for test, paths, what in (("-r", read, "read"), ("-w", write, "write to")):
        for p in paths:
            if run_client(plan, cluster, ["test", test, p]).returncode != 0:
                raise UserError(f"submit: jobs on testbed {plan.fed.name} run as user {user(plan.fed.name, cluster)}, "
                                f"who cannot {what} {p}; use a path they can (their home is {home(plan, cluster)})")


def output_name(pattern: str, job_id: str, job_name: str, user_name: str) -> str:
    """An output file name as Slurm makes it from sbatch's pattern: %j, %x, %u and %%
    filled (the others name a node or task, unknown before the job runs)."""
    fills = {"j": job_id, "x": job_name, "u": user_name, "%": "%"}
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "%" and i + 1 < len(pattern) and pattern[i + 1] in fills:
            out.append(fills[pattern[i + 1]])
            i += 2
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


# ---------------------------------------------------------------- up


def require_tools() -> None:
    missing = [t for t in ("munged", "slurmctld", "slurmd", "sinfo", "srun") if not shutil.which(t)]
    if missing:
        raise UserError(f"Slurm is not installed here ({', '.join(missing)} missing); run ./setup.sh")


def up(fed: Federation, clusters: list[Cluster] | None = None, progress: Progress = _quiet,
       accounting: Accounting | None = None) -> list[Cluster]:
    """Start each cluster (default: the federation as one) on the running testbed, with
    `accounting` members of a Slurm federation."""
    from geofed.testbed import core
    core.require_root("ops slurm up")
    require_tools()
    plan = core.require_up(fed)
    clusters = clusters or [federated(fed)]
    try:
        for c in clusters:
            services.up(fed.name, service_name(c), lambda svc, c=c: _start(fed, plan, c, svc, progress, accounting), progress,
                        federation_file=str(fed.path), cluster=c.name)
    except BaseException:
        down(fed.name, clusters)
        raise
    return clusters


def _start(fed: Federation, plan: Plan, c: Cluster, svc: services.Service, progress: Progress,
           accounting: Accounting | None) -> None:
    d = svc.dir
    for sub in ("ctld", "d", "tmp", *(f"tmp/{n.name}" for n in c.nodes)):
        (d / sub).mkdir()
    os.chmod(d, 0o755)
    # Job steps and tasks run in sessions of their own: slurmstepd carries the daemons'
    # mark; the tasks, the client's SLURM_CONF.
    svc.mark("SLURM_CONF", str(d / "slurm.conf"))
    (d / "slurm.conf").write_text(slurm_conf(fed, plan, c, d, socket.gethostname(), accounting))
    (d / "job_submit.lua").write_text(job_submit_lua(fed, c))
    (d / "task_prolog").write_text(task_prolog(c))
    os.chmod(d / "task_prolog", 0o755)
    svc.make_user(user(fed.name, c), f"geofed Slurm user ({fed.name}, cluster {c.name})", home(plan, c))
    login = plan.node(fed.site(c.controller).login_node.name)
    progress(f"slurm {c.name}: munged and slurmctld on {login.node.name} ({login.address})")
    start_munged(svc, login.netns, accounting.munge_key.read_bytes() if accounting else os.urandom(1024))
    conf = str(d / "slurm.conf")
    for np, port in [(login, CTLD_PORT)] + [(plan.node(n.name), SLURMD_PORT) for n in c.nodes]:
        if host.port_open(np.netns, np.address, port):
            raise host.HostError(f"slurm {c.name}: port {port} on node {np.node.name} ({np.address}) is taken by "
                                 f"another server (another Slurm?); stop it first")
    svc.start(daemon("slurmctld", login.netns, ["slurmctld", "-D", "-i", "-f", conf],
                     lambda: host.port_open(login.netns, login.address, CTLD_PORT)))
    progress(f"slurm {c.name}: slurmd on {', '.join(n.name for n in c.nodes)}")
    for n in c.nodes:
        np = plan.node(n.name)
        svc.start(daemon(f"slurmd-{n.name}", np.netns, ["slurmd", "-D", "-N", n.name, "-f", conf],
                         lambda np=np: host.port_open(np.netns, np.address, SLURMD_PORT)))
    _wait_nodes_idle(plan, c)


def daemon(key: str, netns: str, argv: list[str], ready) -> services.Daemon:
    return services.Daemon(key, host.in_netns_keep_mounts(netns, argv), ready, netns, START_TIMEOUT_S)


def start_munged(svc: services.Service, netns: str, key: bytes) -> None:
    """munged with `key` in `netns`, its socket `munge/munge.sock` in the service's directory."""
    d = svc.dir / "munge"
    d.mkdir()
    munge = pwd.getpwnam("munge")
    (d / "munge.key").write_bytes(key)
    os.chmod(d / "munge.key", 0o400)
    for p in (d, d / "munge.key"):
        os.chown(p, munge.pw_uid, munge.pw_gid)
    os.chmod(d, 0o755)  # munged refuses a socket directory others cannot reach
    svc.start(daemon("munged", netns, ["runuser", "-u", "munge", "--", "munged", "--foreground",
                                       f"--socket={d}/munge.sock", f"--key-file={d}/munge.key",
                                       f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                                       f"--seed-file={d}/munged.seed"],
                     lambda: (d / "munge.sock").exists()))


def _wait_nodes_idle(plan: Plan, c: Cluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        res = run_client(plan, c, ["sinfo", "-h", "-N", "-o", "%N %t"])
        states = dict(line.split() for line in res.stdout.splitlines() if line.strip())
        if res.returncode == 0 and len(states) == len(c.nodes) and all(s == "idle" for s in states.values()):
            return
        if time.monotonic() > deadline:
            raise host.HostError(f"slurm {c.name}: nodes not idle after {START_TIMEOUT_S:g} s: {states or res.stderr.strip()}")
        time.sleep(0.2)  # polling a condition with a deadline


# ---------------------------------------------------------------- down and status


def _clusters_up(fed_name: str) -> list[dict]:
    return [s for s in services.listing(fed_name) if s["service"].startswith("slurm-")]


def down(fed_name: str, clusters: list[Cluster] | None = None) -> list[str]:
    """Stop every daemon of the clusters (default: all of this testbed's), their jobs'
    processes, and remove their files; harmless when nothing is there."""
    names = [service_name(c) for c in clusters] if clusters is not None else \
        [s["service"] for s in _clusters_up(fed_name)]
    return [r for name in names for r in services.stop(fed_name, name)]


def status(fed: Federation) -> list[dict]:
    return [{"cluster": s["cluster"], "complete": s["complete"] is True,
             "slurm_conf": str(services.service_dir(fed.name, s["service"]) / "slurm.conf"),
             "daemons": {k: host.alive(v["pid"]) for k, v in s["daemons"].items()}}
            for s in _clusters_up(fed.name) if "cluster" in s]
