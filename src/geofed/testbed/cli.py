"""The real-cluster paths on the testbed: `geofed ops slurm ...`, `geofed submit`, `geofed ops ssh ...`.

    geofed ops slurm up FEDERATION          munged, slurmctld, a slurmd per node (root; testbed up)
    geofed ops slurm down FEDERATION        stop them and their jobs, remove every file
    geofed ops slurm status FEDERATION
    geofed ops slurm exec FEDERATION -- CMD   CMD on the controller site's login node, SLURM_CONF set
    geofed submit -p G1W1 [--span] -- PROGRAM   sbatch of `geofed run` with the placement's constraint
    geofed ops ssh up|down FEDERATION       sshd per node, a user with a key (root; testbed up)
    geofed ops ssh exec FEDERATION -- CMD   CMD as that user on the storage site's login node
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from geofed import federation
from geofed.cli import _down
from geofed.errors import UserError
from geofed.testbed import slurm, ssh
from geofed.ops.cli import ops_group
from geofed.progress import progress
from geofed.validate import positive_float, positive_int


def cmd_up(args) -> int:
    fed = federation.load(args.federation)
    for c in slurm.up(fed, progress=progress):
        print(f"slurm cluster {c.name} of {fed.name} is up: {len(c.nodes)} nodes at sites {', '.join(c.sites())}; "
              f"use: geofed ops slurm exec {fed.name} -- sinfo")
    return 0


def _command(words: list[str], what: str, example: str) -> list[str]:
    """The command after `--`, which must be there."""
    argv = words[1:] if words[:1] == ["--"] else words
    if not argv:
        raise UserError(f"{what}: no command given; put it after --, like: {example}")
    return argv


def cmd_down(args) -> int:
    return _down("slurm", slurm.down, args.federation)


def cmd_status(args) -> int:
    fed = federation.load(args.federation)
    st = slurm.status(fed)
    if not st:
        print(f"slurm of {fed.name}: down")
        return 1
    for c in st:
        dead = [k for k, alive in c["daemons"].items() if not alive]
        print(f"slurm cluster {c['cluster']} of {fed.name}: {'up' if c['complete'] and not dead else 'BROKEN'}"
              f" ({len(c['daemons'])} daemons{'; dead: ' + ', '.join(dead) if dead else ''}); SLURM_CONF={c['slurm_conf']}")
    return 0 if all(c["complete"] and all(c["daemons"].values()) for c in st) else 1


def cmd_exec(args) -> int:
    fed = federation.load(args.federation)
    argv = _command(args.command, "ops slurm exec", "geofed ops slurm exec icm-task -- sinfo")
    plan, cluster = slurm.require_up(fed)
    full = slurm.client_argv(plan, cluster, argv)
    os.environ.update(slurm.client_env(plan, cluster))
    sys.stdout.flush()
    os.execvp(full[0], full)


def advice(fed, placement, comm_gb: float | None) -> str:
    """What spanning sites costs this job, from the federation's link model."""
    sites = placement.sites()
    if len(sites) == 1:
        return f"advice: {placement.code} stays at site {sites[0]}: no traffic crosses a long-haul link"
    a, b = sites[0], sites[1]
    cost = f"every exchange between the sites waits a {fed.rtt_ms(a, b):.3g} ms round trip (within a site: " \
           f"{fed.rtt_ms(a, a) * 1e3:.3g} us)"
    gbps = fed.bandwidth_gbps(a, b)
    if comm_gb and gbps:
        cost += f"; {comm_gb:g} GB across the {gbps:g} Gb/s link take at least {comm_gb * 8 / gbps:.1f} s"
    return f"advice: {placement.code} spans sites {' and '.join(sites)}: {cost}; seed 001 kept such jobs at one site"


def cmd_submit(args) -> int:
    from geofed.launch.job import slurm_constraint
    from geofed.launch.placement import parse
    fed = federation.load(args.federation)
    placement = parse(args.placement, fed)
    program = _command(args.program, "submit", "geofed submit -p W2 -- python app.py")
    spans = len(placement.sites()) > 1
    note = advice(fed, placement, args.comm_gb)
    if spans and not args.span:
        raise UserError(f"submit: placement {placement.code} spans sites {', '.join(placement.sites())}; jobs stay "
                        f"at one site unless you pass --span ({note.removeprefix('advice: ')})")
    print(note, file=sys.stderr)
    geofed = shutil.which("geofed") or os.path.realpath(sys.argv[0])
    run = [geofed, "run", "-f", str(fed.path), "-p", placement.code, "-n", str(args.ranks_per_node)] + \
        (["--no-cpu-limit"] if args.no_cpu_limit else []) + ["--"] + program
    sbatch = ["sbatch", "--parsable", f"--nodes={placement.node_count}", f"--ntasks-per-node={args.ranks_per_node}",
              f"--constraint={slurm_constraint(placement)}", f"--job-name=geofed-{placement.code}",
              f"--output={os.path.abspath(args.output)}"]
    env = dict(os.environ)
    if "SLURM_CONF" not in os.environ and slurm.status(fed):
        plan, cluster = slurm.require_up(fed)  # the testbed's own Slurm
        env.update(slurm.client_env(plan, cluster))
        wrap = lambda argv: slurm.client_argv(plan, cluster, argv)  # noqa: E731
    else:
        wrap = lambda argv: argv  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="geofed-submit-") as tmp:
        script = os.path.join(tmp, "job.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n# written by geofed submit\nexec " + shlex.join(run) + "\n")
        res = subprocess.run(wrap(sbatch + [script]), env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise UserError(f"submit: sbatch refused the job: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
    job_id = res.stdout.strip().split(";")[0]
    print(f"submitted job {job_id}: {placement.code} ({slurm_constraint(placement)}), output {args.output}")
    return 0


def cmd_ssh_up(args) -> int:
    fed = federation.load(args.federation)
    state = ssh.up(fed, progress)
    print(f"ssh on testbed {fed.name} is up: sshd on {', '.join(k.removeprefix('sshd-') for k in state['daemons'])}, user {state['user']}; "
          f"use: geofed ops ssh exec {fed.name} -- geofed run --hostfile FILE ...")
    return 0


def cmd_ssh_down(args) -> int:
    return _down("ssh", ssh.down, args.federation)


def cmd_ssh_exec(args) -> int:
    fed = federation.load(args.federation)
    argv = _command(args.command, "ops ssh exec", "geofed ops ssh exec icm-task -- ssh G1 hostname")
    plan, state = ssh.require_up(fed)
    full = ssh.login_argv(plan, state, argv)
    sys.stdout.flush()
    os.execvp(full[0], full)


def cmd_storage_up(args) -> int:
    from geofed.testbed import core, storage
    fed = federation.load(args.federation)
    core.require_root("ops storage up")
    storage.up(core.require_up(fed), progress)
    for s in fed.sites:
        for fs in s.filesystems:
            print(f"{s.code}:{fs.name:<10} {'shared' if fs.shared else 'node-local':<10} "
                  f"{storage.disk_path(fed, s.code, fs.name, s.login_node.name if not fs.shared else None)}")
    return 0


def cmd_storage_path(args) -> int:
    from geofed.testbed import core, storage
    fed = federation.load(args.federation)
    try:
        fed.node(args.node)
    except KeyError:
        raise UserError(f"node {args.node!r}: federation {fed.name} has {', '.join(n.name for n in fed.nodes())}") from None
    path, _ = storage.resolve(fed, args.node, args.filesystem)
    # Local file systems too: the path printed must exist (it is made with the mounts).
    core.require_root("ops storage path")
    storage.up(core.require_up(fed), progress)
    print(path)
    return 0


def _servers(ops, name: str, text: str, actions, exec_help: str, exec_func) -> None:
    """`geofed ops NAME ACTION FEDERATION` for each (action, func, help), and `exec FEDERATION -- COMMAND`."""
    sub = ops.add_parser(name, help=text).add_subparsers(dest="what", required=True)
    for action, func, help_text in actions:
        p = sub.add_parser(action, help=help_text)
        p.add_argument("federation", help="federation file or shipped name (e.g. icm-task)")
        p.set_defaults(func=func)
    p = sub.add_parser("exec", help=exec_help)
    p.add_argument("federation", help="federation file or shipped name")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    p.set_defaults(func=exec_func)


def register(commands, bench) -> None:
    ops = ops_group(commands)
    _servers(ops, "slurm", "real Slurm on the testbed: munged, slurmctld, a slurmd per node (root)",
             [("up", cmd_up, "start MUNGE, slurmctld and one slurmd per emulated node"),
              ("down", cmd_down, "stop every daemon and job of it and remove its files, also after a crash"),
              ("status", cmd_status, "which clusters and daemons run")],
             "run a command (sinfo, salloc, sbatch, geofed run) where users submit", cmd_exec)
    _servers(ops, "ssh", "real OpenSSH between the testbed's nodes, for --hostfile jobs (root)",
             [("up", cmd_ssh_up, "an sshd in every node, a normal user with a key"),
              ("down", cmd_ssh_down, "stop them, delete the user, remove every key and file")],
             "run a command as the testbed's user on the storage site's login node", cmd_ssh_exec)

    sub = ops.add_parser("storage", help="the federation's file systems on the testbed; the storage site's "
                                         "exported over the link (root)").add_subparsers(dest="what", required=True)
    p = sub.add_parser("up", help="make every file system's directory and mount the exports at the other sites")
    p.add_argument("federation", help="federation file or shipped name")
    p.set_defaults(func=cmd_storage_up)
    p = sub.add_parser("path", help="where a node reaches a file system (SITE:NAME), made or mounted first")
    p.add_argument("federation", help="federation file or shipped name")
    p.add_argument("node", help="node name, like G1")
    p.add_argument("filesystem", help="SITE:NAME like W:data, or NAME at the node's own site")
    p.set_defaults(func=cmd_storage_path)

    from geofed.ops import schedule
    schedule.register(bench)

    p = commands.add_parser("submit", help="submit `geofed run` on a placement to Slurm, kept at one site unless --span")
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--placement", "-p", required=True, help="nodes per site, like W2 or G1W1")
    p.add_argument("--ranks-per-node", "-n", type=positive_int, default=1)
    p.add_argument("--span", action="store_true", help="allow a placement across sites")
    p.add_argument("--comm-gb", type=positive_float, help="data the ranks exchange over the run, for the advice")
    p.add_argument("--no-cpu-limit", action="store_true", help="passed on to geofed run")
    p.add_argument("--output", default="geofed-job-%j.out", help="the job's output file (default geofed-job-%%j.out)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
    p.set_defaults(func=cmd_submit)
