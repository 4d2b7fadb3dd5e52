"""`geofed ops ...`, `geofed submit`, `geofed transfer`, `geofed monitor` and `geofed bench
directory` (its workload always copies ma-hd: no -f). `bench transfer` and `bench schedule`
are made from their workloads' Params."""

from __future__ import annotations

import argparse
import getpass
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from geofed import federation, records, validate
from geofed.cli import options
from geofed.cli.common import command_argv, down_command, emit
from geofed.errors import UserError
from geofed.ops import directory, monitor, nss, users, usersync
from geofed.params import add_options, from_args
from geofed.records.ops import METRICS
from geofed.progress import progress
from geofed.testbed import slurm, slurm_federation, ssh
from geofed.validate import nonnegative_float, nonnegative_int, positive_float, positive_int


def cmd_directory_up(args) -> int:
    fed = federation.load(args.federation)
    state = directory.up(fed, progress)
    for k, s in directory.status(fed)["servers"].items():
        print(f"{k:<6} {s['kind']:<5} {s['uri']} {s['ldaps']} {s['base']}" + (f" (in {s['netns']})" if s["netns"] else ""))
    print(f"directory of {fed.name} is up ({state['mode']}); CA {state['ca']}")
    return 0


cmd_directory_down = down_command("directory", directory.down)


def cmd_directory_status(args) -> int:
    fed = federation.load(args.federation)
    st = directory.status(fed)
    print(f"directory of {fed.name}: {'up' if st['up'] else 'down'}" + (f" ({st['mode']})" if st["up"] else ""))
    for k, s in st["servers"].items():
        print(f"  {k:<6} {s['kind']:<5} pid {s['pid']} {'running' if s['alive'] else 'DEAD'} {s['uri']} {s['base']}")
    return 0 if st["up"] and all(s["alive"] for s in st["servers"].values()) else 1


def cmd_users_sync(args) -> int:
    fed = federation.load(args.federation)
    data = usersync.sync(fed, dry_run=args.dry_run, out=None if args.dry_run else Path(args.out), progress=progress)
    n = len(data["changes"])
    lines = [users.describe(c) for c in data["changes"]] + \
        [f"! refused {c['entry']} {c['name']} ({c['kind']}): {c['detail']}; {', '.join(c['sources'])}"
         for c in data["collisions"]] + \
        [f"{'would make' if args.dry_run else 'made'} {n} change{'s' * (n != 1)}; {data['merged_users']} users and "
         f"{data['merged_groups']} groups merged; {len(data['collisions'])} refused; {data['seconds']['total']:.2f} s"]
    if data["files"]:
        lines.append(f"passwd and group: {', '.join(data['files'])}")
    emit(records.make("directory.sync", data, **records.federation_meta(fed)), None if args.dry_run else args.out,
         "\n".join(lines))
    for e in data["errors"]:
        print(f"geofed: failed: {e}", file=sys.stderr)
    return 1 if data["collisions"] or data["errors"] else 0


def cmd_users_check(args) -> int:
    fed = federation.load(args.federation)
    if args.password_file:
        try:
            password = Path(args.password_file).read_text().rstrip("\n")
        except OSError as e:
            raise UserError(f"--password-file {args.password_file}: {e.strerror}") from None
    elif sys.stdin.isatty():
        password = getpass.getpass(f"password of {args.user} at home: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    r = users.check(fed, args.user, password)
    if r["ok"]:
        print(f"{args.user}: authenticated by site {r['site']}'s directory as {r['dn']} (uid {r['uid']})")
        return 0
    print(f"{args.user}: rejected" + (f" by site {r['site']}'s directory" if "site" in r else "") + f": {r['reason']}")
    return 1


def cmd_users_show(args) -> int:
    fed = federation.load(args.federation)
    r = users.show(fed, args.user)
    if not r["view"] and not r["merged"]:
        print(f"{args.user}: in no home directory and not merged")
        return 1
    columns = [("read-through " + e["dn"], e) for e in r["view"]] + [("merged " + e["dn"], e) for e in r["merged"]]
    for title, _ in columns:
        print(f"# {title}")
    width = max(len(k) for k in users.SHOWN)
    for k in users.SHOWN:
        print(f"{k:<{width}}  " + "  ".join(f"{users.value_text(e.get(k)) or '-'!s:<28}" for _, e in columns))
    return 0


def cmd_users_getent(args) -> int:
    fed = federation.load(args.federation)
    res = nss.getent(fed.name, args.node, args.database, args.keys)
    sys.stdout.write(res.stdout)
    if res.returncode != 0:
        print(f"getent {args.database} {' '.join(args.keys)} on {args.node}: "
              + (res.stderr.strip() or "not found"), file=sys.stderr)
    return 0 if res.returncode == 0 else 1


def cmd_bench_directory(args) -> int:
    """The `directory` workload on the federation it copies (always ma-hd: no -f)."""
    from geofed import workloads
    from geofed.cli.bench import run_workload
    from geofed.workloads.directory import BASE
    w = workloads.get("directory")
    return run_workload(w, workloads.Context(federation.load(BASE), progress=progress), from_args(w.Params, args),
                        args.out)


def cmd_slurm_up(args) -> int:
    fed = federation.load(args.federation)
    clusters = slurm_federation.up(fed, args.slurm_federation, progress) if args.slurm_federation else \
        slurm.up(fed, progress=progress)
    for c in clusters:
        print(f"slurm cluster {c.name} of {fed.name} is up: {len(c.nodes)} nodes at sites {', '.join(c.sites())}; "
              f"use: geofed ops slurm exec {fed.name} -- sinfo")
    return 0


cmd_slurm_down = down_command("slurm", slurm_federation.down)


def cmd_slurm_status(args) -> int:
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


def exec_command(what: str, example: str, client) -> Callable[[argparse.Namespace], int]:
    """The command `ops WHAT exec FEDERATION -- COMMAND`: this process becomes COMMAND as
    `client(fed, argv)` runs it (its argv and the environment it needs)."""
    def run(args) -> int:
        fed = federation.load(args.federation)
        full, env = client(fed, command_argv(args.command, f"ops {what} exec", example))
        os.environ.update(env)
        sys.stdout.flush()
        os.execvp(full[0], full)
    return run


def slurm_client(fed, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """`argv` as a user of the testbed's own Slurm runs it."""
    plan, cluster = slurm.require_up(fed)
    return slurm.client_argv(plan, cluster, argv), slurm.client_env(plan, cluster)


def ssh_client(fed, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """`argv` as the testbed's user runs it on the storage site's login node."""
    plan, state = ssh.require_up(fed)
    return ssh.login_argv(plan, state, argv), {}


cmd_slurm_exec = exec_command("slurm", "geofed ops slurm exec icm-task -- sinfo", slurm_client)


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
    fed = federation.load(slurm.submit_federation(args.federation))
    placement = parse(args.placement, fed)
    program = command_argv(args.program, "submit", "geofed submit -p W2 -- python app.py")
    spans = len(placement.sites()) > 1
    note = advice(fed, placement, args.comm_gb)
    if args.profile and args.span:
        raise UserError("submit: --profile decides whether the job spans sites; drop --span")
    if spans and not args.span and not args.profile:
        raise UserError(f"submit: placement {placement.code} spans sites {', '.join(placement.sites())}; jobs stay "
                        f"at one site unless you pass --span or a --profile predicted to span well "
                        f"({note.removeprefix('advice: ')})")
    decision = span_decision(fed, placement, args.profile) if args.profile else None
    print(decision.comment if decision else note, file=sys.stderr)
    kept = spans and decision is not None and not decision.spans
    geofed = shutil.which("geofed") or os.path.realpath(sys.argv[0])
    testbed = "SLURM_CONF" not in os.environ and slurm.status(fed)
    if testbed:
        # The testbed's own Slurm, as its user: in a Slurm federation, the placement's site's cluster.
        plan, cluster = slurm.require_up(fed, placement.sites()[0])
        if spans and not kept and cluster.name != slurm.federated(fed).name:
            raise UserError(f"submit: testbed {fed.name} runs Slurm's federation, whose jobs never span clusters; "
                            f"placement {placement.code} spans sites {', '.join(placement.sites())}")
        output = args.output or str(slurm.home(plan, cluster) / "geofed-job-%j.out")
        slurm.require_user_reaches(plan, cluster, read=[str(fed.path)], write=[os.path.dirname(output)])
        submitter = slurm.user(fed.name, cluster)
        sites = cluster.sites()
    else:
        output = os.path.abspath(args.output or "geofed-job-%j.out")
        submitter = getpass.getuser()
        sites = [s.code for s in fed.sites]
    if kept:
        # Kept at one site, whichever can hold it (Slurm's matching OR): the job learns its site from the
        # TaskProlog's GEOFED_SITE and runs its nodes there.
        constraint, code = one_site_constraint(fed, sites, placement.node_count), f"*{placement.node_count}"
        where = f'"${{GEOFED_SITE}}{placement.node_count}"'
    else:
        constraint, code = slurm_constraint(placement), placement.code
        where = shlex.quote(placement.code)
    run = shlex.join([geofed, "run", "-f", str(fed.path), "-p"]) + " " + where + " " + \
        shlex.join(["-n", str(args.ranks_per_node)] + (["--no-cpu-limit"] if args.no_cpu_limit else []) + ["--"]
                   + program)
    name = f"geofed-{placement.code}"
    comment = decision.comment if decision else \
        f"geofed: {'span, asked with --span' if spans else 'one site'} on {placement.code}"
    sbatch = ["sbatch", "--parsable", f"--nodes={placement.node_count}", f"--ntasks-per-node={args.ranks_per_node}",
              f"--constraint={constraint}", f"--job-name={name}", f"--output={output}", f"--comment={comment}"]
    argv, env = (slurm.client_argv(plan, cluster, sbatch), slurm.client_env(plan, cluster)) if testbed else (sbatch, {})
    # The script on sbatch's stdin: the submitting user need not reach a file of ours.
    script = "#!/bin/sh\n# written by geofed submit\nexec " + run + "\n"
    res = subprocess.run(argv, env={**os.environ, **env}, input=script, capture_output=True, text=True)
    if res.returncode != 0:
        raise UserError(f"submit: sbatch refused the job: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
    job_id = res.stdout.strip().split(";")[0]
    rec = records.make("ops.submit", {
        "job": job_id, "asked": placement.code, "placement": code, "constraint": constraint, "comment": comment,
        "spans": spans and not kept, "profile": os.path.abspath(args.profile) if args.profile else "",
        "slowdown_percent": decision.slowdown_percent if decision else 0.0,
        "max_span_slowdown_percent": fed.max_span_slowdown * 100,
        "predicted_s": decision.predicted_s if decision else 0.0}, **records.federation_meta(fed))
    # stdout is the one line scripts read the job's id and output file from
    print(f"record: {records.save(rec, args.out)}", file=sys.stderr)
    print(f"submitted job {job_id}: {code} ({constraint}), output {slurm.output_name(output, job_id, name, submitter)}")
    return 0


def span_decision(fed, placement, profile: str):
    """The app model's answer for a job of this profile on this placement (its decision and reason)."""
    from geofed.model import app, calibration
    cal = calibration.found_or_empty(str(fed.path), fed)
    return app.span_decision(fed, cal, placement.code, placement.nodes(fed), profile)


def one_site_constraint(fed, sites: list[str], nodes: int) -> str:
    """Slurm's matching OR of the sites that have `nodes` nodes: the job runs at one of them."""
    able = [s for s in sites if fed.site(s).nodes >= nodes]
    if not able:
        raise UserError(f"submit: the job is kept at one site, but no site of {fed.name} has {nodes} nodes "
                        f"({', '.join(f'{s} {fed.site(s).nodes}' for s in sites)})")
    return "[" + "|".join(slurm.feature(s) for s in able) + "]" if len(able) > 1 else slurm.feature(able[0])


def cmd_ssh_up(args) -> int:
    fed = federation.load(args.federation)
    state = ssh.up(fed, progress)
    print(f"ssh on testbed {fed.name} is up: sshd on {', '.join(k.removeprefix('sshd-') for k in state['daemons'])}, user {state['user']}; "
          f"use: geofed ops ssh exec {fed.name} -- geofed run --hostfile FILE ...")
    return 0


cmd_ssh_down = down_command("ssh", ssh.down)


cmd_ssh_exec = exec_command("ssh", "geofed ops ssh exec icm-task -- ssh G1 hostname", ssh_client)


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


def cmd_transfer(args) -> int:
    fed = federation.load(args.federation)
    from geofed.ops import transfer
    data = transfer.run(fed, args.source, args.destination, streams=args.streams, buffer=args.buffer,
               chunk=args.chunk_mb << 20 if args.chunk_mb else None, show=True, copy_links=args.copy_links,
               delete=args.delete, dry_run=args.dry_run, congestion=args.congestion, caller=args.caller)
    if args.dry_run:
        print(transfer.dry_run_table(data))
        return 0
    held = f", {data['held_bytes'] / 1e6:.1f} MB already there" if data["held_bytes"] else ""
    emit(records.make("ops.transfer", data, **records.federation_meta(fed)), args.out,
         f"{data['source']} -> {data['destination']}: {data['moved_bytes'] / 1e6:.1f} MB in {data['seconds']:.2f} s, "
         f"{data['rate_mbps']:.0f} Mb/s over {data['streams']} streams{held}; "
         f"CPU {data['sender_cpu_s_per_gb']:.2f} s/GB sending, {data['receiver_cpu_s_per_gb']:.2f} s/GB receiving"
         + (f"; {data['corrupt_found']} damaged chunk(s) found and sent again" if data["corrupt_found"] else "")
         + "\n" + transfer.tree_line(data["tree"]) + "\n" + transfer.limit_line(data))
    return 0


def cmd_monitor_run(args) -> int:
    fed = federation.load(args.federation)
    if args.count is None and args.duration is None:
        raise UserError("monitor run: give --count N or --duration SECONDS (or both): monitoring must end")
    validate.parse_size(args.bw_size)
    rng = random.Random(args.seed)
    monitor.pairs_for(fed, args.pairs, args.random, rng)  # bad pairs fail before the store is touched
    db = monitor.open_db(args.db)
    start = time.time()
    rounds = 0
    try:
        while True:
            t = time.time()
            rows = monitor.sample_round(fed, monitor.pairs_for(fed, args.pairs, args.random, rng), budget=args.budget,
                                        bw_size=args.bw_size, hostfile=args.hostfile, timeout=args.timeout)
            with db:
                db.executemany(
                    "INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [(t, fed.name, r["a"], r["b"], r.get("class"), r.get("latency_us"), r.get("latency_min_us"),
                      r.get("bw_MBps"), r.get("model_latency_us"), r.get("model_bw_MBps"), r.get("error"))
                     for r in rows])
            rounds += 1
            for r in rows:
                print(f"{time.strftime('%H:%M:%S', time.localtime(t))} {r['a']}-{r['b']} "
                      + (f"error: {r['error']}" if r.get("error") else
                         f"{r['latency_us']:.2f} us, {r['bw_MBps']:.1f} MB/s"), flush=True)
            if args.count is not None and rounds >= args.count:
                break
            next_t = start + rounds * args.interval
            if args.duration is not None and next_t - start >= args.duration:
                break
            # The schedule, not a synchronisation: rounds start every `interval` seconds.
            time.sleep(max(0.0, next_t - time.time()))
    finally:
        db.close()
    print(f"{rounds} round(s) stored in {args.db}")
    return 0


def cmd_monitor_show(args) -> int:
    from geofed.ops.shifts import level_shifts
    if not Path(args.db).is_file():
        raise UserError(f"{args.db}: no such monitoring store")
    db = monitor.open_db(args.db)
    try:
        series = monitor.read_series(db)
    finally:
        db.close()
    if not series:
        raise UserError(f"{args.db}: the store has no samples yet")
    out = []
    lines = [f"{'pair':<10} {'metric':<11} {'samples':>7} {'errors':>6}  events"]
    for (fed, a, b), s in sorted(series.items()):
        events = {}
        for metric in METRICS:
            events[metric] = level_shifts(s["t"], s[metric], run=args.run, k=args.k, rel=args.rel)
            text = "; ".join(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(e['start']))} "
                             f"{e['before']:.4g} -> {e['after']:.4g} ({(e['relative'] or 0) * 100:+.1f} %)"
                             for e in events[metric]) or "none"
            lines.append(f"{a + '-' + b:<10} {metric:<11} {len(s['t']):>7} {len(s['errors']):>6}  {text}")
        out.append({"federation": fed, "a": a, "b": b, **s, "events": events})
    emit(records.make("monitor.series", {"db": str(Path(args.db).resolve()), "run": args.run, "k": args.k,
                                         "rel": args.rel, "series": out}), args.out, "\n".join(lines))
    return 0


def cmd_monitor_serve(args) -> int:
    from geofed.ops import monitor_serve
    return monitor_serve.serve(monitor_serve.load(args.schedule), log=lambda line: print(line, flush=True))


def cmd_monitor_status(args) -> int:
    from geofed.ops import judge
    lines, bad = judge.status_lines(args.store)
    print("\n".join(lines))
    return 1 if bad else 0


def cmd_monitor_export(args) -> int:
    from geofed.ops import monitor_export
    return monitor_export.serve(args.store, args.listen, log=lambda line: print(line, flush=True))


def cmd_monitor_dashboard(args) -> int:
    from geofed.ops import monitor_dashboard
    print(monitor_dashboard.write(args.store, args.out))
    return 0


def slurm_up_args(p: argparse.ArgumentParser) -> None:
    options.federation_positional(p)
    p.add_argument("--federation", dest="slurm_federation", metavar="NAME",
                   help="every site its own cluster, joined in Slurm's federation NAME (slurmdbd and MariaDB)")


def exec_args(p: argparse.ArgumentParser) -> None:
    options.federation_positional(p)
    options.command_after_dashes(p, "command")


def users_args(p: argparse.ArgumentParser) -> None:
    options.federation(p, default="ma-hd")


def users_sync_args(p: argparse.ArgumentParser) -> None:
    users_args(p)
    p.add_argument("--dry-run", action="store_true", help="print the changes, make none")
    options.out(p, "geofed-out/directory", "passwd, group and the record")


def users_check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("user")
    users_args(p)
    p.add_argument("--password-file", help="read the password from this file instead of stdin")


def users_show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("user")
    users_args(p)


def users_getent_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("database", choices=("passwd", "group"))
    p.add_argument("keys", nargs="*", help="names or ids (default: every entry)")
    users_args(p)
    p.add_argument("--node", required=True, help="the node whose NSS client answers, like H2")


def bench_directory_args(p: argparse.ArgumentParser) -> None:
    from geofed.workloads.directory import DirectoryParams
    add_options(p, DirectoryParams)
    options.out(p, "geofed-out/bench", "the directory.bench record")


def storage_path_args(p: argparse.ArgumentParser) -> None:
    options.federation_positional(p)
    p.add_argument("node", help="node name, like G1")
    p.add_argument("filesystem", help="SITE:NAME like W:data, or NAME at the node's own site")


def submit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--federation", "-f", help="federation file or shipped name (default: the one testbed here whose "
                                               "Slurm is up)")
    options.placement(p)
    options.ranks_per_node(p)
    p.add_argument("--span", action="store_true", help="allow a placement across sites")
    p.add_argument("--profile", help="an app.profile of the program (`geofed profile`): a placement across sites "
                                     "spans only when the link is predicted to slow it by less than the federation's "
                                     "[scheduler] max_span_slowdown_percent (default 10), else the job is kept at "
                                     "one site")
    p.add_argument("--comm-gb", type=positive_float, help="data the ranks exchange over the run, for the advice")
    p.add_argument("--no-cpu-limit", action="store_true", help="passed on to geofed run")
    p.add_argument("--output", help="the job's output file, a pattern of sbatch's (default geofed-job-%%j.out, on the "
                                    "testbed in the home of the user jobs run as)")
    options.out(p, "geofed-out/submit", "the ops.submit record (the decision and its reason)")
    options.command_after_dashes(p)


def transfer_args(p: argparse.ArgumentParser) -> None:
    p.description = ("A tree arrives with its directories (empty ones too), symbolic links as links (--copy-links: "
                     "what they point to), hard links within the tree (one inode at the destination), the holes of "
                     "sparse files, modes, mtimes, and owners (numeric uid and gid) when the receiver runs as root. "
                     "Not kept: ACLs, extended attributes (SELinux labels, file capabilities), access times, hard "
                     "links to files outside the tree (a copy each); devices, FIFOs and sockets are not sent (their "
                     "count is printed).")
    p.add_argument("source", help="NODE:PATH, or NODE:mem:SIZE (bytes made in memory)")
    p.add_argument("destination", help="NODE:PATH, or NODE:/dev/null (checked, not kept)")
    options.federation(p)
    p.add_argument("--streams", type=positive_int, help="TCP streams (default: from the link's BDP)")
    p.add_argument("--buffer", type=nonnegative_int, help="socket buffer bytes per stream (default: from the BDP; 0: "
                                                          "Linux's autotuning)")
    p.add_argument("--from", dest="caller", metavar="NODE",
                   help="start the two ends from this node over ssh (geofed ops ssh up), as its user: with a node "
                        "of a third site, the data goes between the ends only (a third-party transfer)")
    from geofed.ops.transfer import CONGESTION
    p.add_argument("--congestion", choices=CONGESTION, default="auto",
                   help="TCP congestion control of the data streams (default auto: bbr where the link model's loss "
                        "would hold cubic streams below 80%% of the link, or where after slow start they lose "
                        "frames and deliver less than that; else cubic)")
    p.add_argument("--chunk-mb", type=positive_int, help="chunk size in MiB (default 8, less for a small transfer: "
                                                           "16 chunks per stream, at least 1/4)")
    p.add_argument("--copy-links", "-L", action="store_true", help="send what symbolic links point to, not the links "
                                                                   "(rsync's -L)")
    p.add_argument("--delete", action="store_true", help="remove at the destination what the source tree does not "
                                                         "have, once everything arrived (rsync's --delete-after)")
    p.add_argument("--dry-run", "-n", action="store_true", help="say what would be sent, made and deleted; change "
                                                                "nothing")
    options.out(p, "geofed-out/transfer", "the ops.transfer record")


def monitor_run_args(p: argparse.ArgumentParser) -> None:
    options.federation(p)
    p.add_argument("--pairs", help="node pairs like W1-G1,W2-G2")
    p.add_argument("--random", type=positive_int, help="instead: this many random node pairs, drawn anew each round")
    p.add_argument("--seed", type=nonnegative_int, help="seed for --random (reproducible draws)")
    p.add_argument("--interval", type=nonnegative_float, default=60.0, help="seconds between rounds (default 60)")
    p.add_argument("--count", type=positive_int, help="stop after this many rounds")
    p.add_argument("--duration", type=positive_float, help="stop after this many seconds")
    p.add_argument("--db", required=True, help="SQLite store (created if missing; rounds are appended)")
    p.add_argument("--budget", type=positive_float, default=0.2, help="seconds per measurement (default 0.2)")
    p.add_argument("--bw-size", default="1M", help="bandwidth message size (default 1M)")
    options.hostfile(p)
    p.add_argument("--timeout", type=positive_float, default=120, help="a round that takes longer is stopped and stored as an error")


def monitor_serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("schedule", help="the schedule file (TOML; docs/monitor.md)")


def monitor_status_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="the SQLite store `monitor serve` writes")


def monitor_export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="the SQLite store `monitor serve` writes")
    p.add_argument("--listen", default="127.0.0.1:9469", help="HOST:PORT to serve /metrics on (default 127.0.0.1:9469)")


def monitor_dashboard_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("store", help="the SQLite store `monitor serve` writes")
    p.add_argument("--out", default="geofed-out/dashboard", help="directory for index.html (default geofed-out/dashboard)")


def monitor_show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="SQLite store written by monitor run")
    p.add_argument("--run", type=positive_int, default=8, help="samples a shift must last (default 8)")
    p.add_argument("--k", type=positive_float, default=5.0, help="shift threshold in noise standard deviations (default 5)")
    p.add_argument("--rel", type=nonnegative_float, default=0.10, help="and at least this fraction of the level (default 0.10)")
    options.out(p, None, "the monitor.series record (time-series plot in the report)")
