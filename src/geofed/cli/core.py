"""`geofed federation`, `geofed testbed`, `geofed run`, `geofed report`, `geofed demo`."""

from __future__ import annotations

import argparse
import json
import shlex
import time
from pathlib import Path

from geofed import federation, records
from geofed.cli import options
from geofed.cli.common import command_argv, down_command, emit, fed_or_name
from geofed.errors import JobFailed, UserError
from geofed.progress import progress
from geofed.validate import positive_float, positive_int


def cmd_federation_show(args) -> int:
    fed = federation.load(args.federation)
    print(f"{fed.name}: {fed.description}")
    print(f"file {fed.path} (sha256 {fed.sha256[:12]}), storage at site {fed.storage}")
    print(f"{'site':<4} {'name':<16} {'nodes':>5} {'cores':>5} {'speed':>5} {'local lat [us]':>14} {'local [Gb/s]':>12}")
    for s in fed.sites:
        bw = "-" if s.local.bandwidth_gbps is None else f"{s.local.bandwidth_gbps:g}"
        print(f"{s.code:<4} {s.name:<16} {s.nodes:>5} {s.cores_per_node:>5} {s.speed:>5g} {s.local.latency_us:>14g} {bw:>12}")
    for l in fed.links:
        fibre = "-" if l.fibre_km is None else f"{l.fibre_km:g} km"
        print(f"link {l.name}: fibre {fibre}, one-way {l.one_way_ms * 1e3:.1f} us "
              f"(propagation {l.propagation_ms * 1e3:.1f} us), RTT {l.rtt_ms:.4g} ms, {l.bandwidth_gbps:g} Gb/s, "
              f"BDP {l.bdp_bytes / 1e6:.3g} MB, queue {l.queue_bytes / 1e6:.3g} MB"
              + (f", jitter {l.jitter_us:g} us" if l.jitter_us else "") + (f", loss {l.loss:g}" if l.loss else ""))
        if l.credits_bytes is not None:
            print(f"  {federation.credit_summary(l)}")
    for a in fed.sites:
        for b in fed.sites:
            print(federation.path_summary(fed, a.code, b.code))
    return 0


def cmd_testbed_up(args) -> int:
    from geofed.testbed import core
    fed = federation.load(args.federation)
    plan = core.up(fed, progress)
    print(f"testbed {fed.name} is up: {len(plan.nodes)} nodes, {len(plan.links)} links")
    return 0


def cmd_testbed_down(args) -> int:
    from geofed.testbed import core
    return down_command("testbed", core.down)(args)


def cmd_testbed_list(args) -> int:
    from geofed.testbed import core
    print(core.format_listing(core.listing()))
    return 0


def cmd_testbed_status(args) -> int:
    from geofed.testbed import core, services
    st = core.status(fed_or_name(args.federation))
    if args.json:
        print(json.dumps(st, indent=1))
        return 0 if st["up"] else 1
    print(f"testbed {st['federation']}: {'up' if st['up'] else 'down'}"
          + (f", brought up by {core.describe(st['owner'])}" if st["owner"] else ""))
    present = sum(st["namespaces"].values())
    print(f"  namespaces {present}/{len(st['namespaces'])}, cgroups {sum(st['cgroups'].values())}/{len(st['cgroups'])}")
    for name, e in st["emulators"].items():
        print(f"  link {name}: emulator pid {e['pid']} {'running' if e['alive'] else 'DEAD'},"
              f" holds {', '.join(f'{d:.1f} us from {s}' for s, d in e['delay_us'].items())}"
              f" (the fibre's propagation); floor: probe RTT "
              f"{e['floor']['probe_rtt_ms']['median']:.4f} ms median with nothing held")
    if st["changes"]:
        last = st["changes"][-1]
        print(f"  {len(st['changes'])} live changes since up (testbed set), the last at "
              f"{time.strftime('%H:%M:%S', time.localtime(last['time']))}: {last['way']} {last['key']} "
              f"{json.dumps(last['old'])} -> {json.dumps(last['new'])}")
    for s in st["services"]:
        print(f"  service {services.summary(s)}")
    return 0 if st["up"] else 1


def cmd_testbed_verify(args) -> int:
    from geofed.testbed import core, live, verify
    fed = federation.load(args.federation)
    core.require_up(fed)
    # Against the link as it runs now: changed live since `up`, the file's no longer holds.
    data = verify.verify(live.current(fed), rtt_count=args.count, streams=args.streams, seconds=args.seconds, progress=progress)
    rec = records.make("testbed.verify", data, **records.federation_meta(fed))
    emit(rec, args.out, verify.format_table(data))
    return 0 if data["ok"] else 1


def cmd_testbed_set(args) -> int:
    """Change a running link now, or follow a schedule of changes in the foreground."""
    from geofed.testbed import live
    fed = federation.load(args.federation)
    if args.schedule:
        if args.link or args.settings or args.from_site:
            raise UserError("testbed set: --schedule names its links, ways and settings itself; give it alone")
        schedule = live.load_schedule(fed, args.schedule)
        progress(f"following {args.schedule}: {len(schedule)} changes over {schedule[-1][0]:g} s")
        live.run_schedule(fed, schedule, progress)
        return 0
    if not args.link:
        raise UserError("testbed set: give a LINK and KEY=VALUE settings, or --schedule FILE")
    assignments = {}
    for word in args.settings:
        key, eq, value = word.partition("=")
        if not eq:
            raise UserError(f"testbed set: {word!r}: expected KEY=VALUE (keys: {', '.join(live.KEYS)})")
        assignments[key] = value
    print(live.describe(live.set_link(fed, args.link, assignments, args.from_site)))
    return 0


def cmd_run(args) -> int:
    """Run the user's program; its output is shown as it comes; 0, or one line and 1 when
    a rank fails (the job ends at once), 124 at the time limit, 2 for a missing program."""
    import tempfile

    from geofed.launch import job as launch
    from geofed.launch import runner
    from geofed.launch.placement import parse
    program = command_argv(args.program, "run", "geofed run --placement G1W1 -- python app.py")
    fed = federation.load(args.federation)
    j = launch.Job(fed, parse(args.placement, fed), program, args.ranks_per_node, cpu_limit=not args.no_cpu_limit,
                   waiting_sleeps=True)
    if args.dry_run:
        cmd = runner.command(j, args.hostfile, check_up=False)
        print(shlex.join([f"{k}={v}" for k, v in cmd.env.items()] + cmd.argv))
        return 0
    timeout = runner.run_timeout(args.timeout)
    with tempfile.TemporaryDirectory(prefix="geofed-job-") as tmp, \
            runner.started(j, Path(tmp) / "job.log", hostfile=args.hostfile, echo=True) as running:
        rc = running.wait(timeout)
        if rc == 124:
            raise JobFailed(f"the job did not finish within --timeout {timeout:g} s and was stopped", status=124)
        if rc != 0:
            raise running.failure("run", rc, timeout)
    return 0


def cmd_report(args) -> int:
    from geofed import report
    from geofed.report.overview import federations_named
    recs = records.load_tree(args.records)
    first = Path(args.records[0])
    try:
        print(report.render(recs, args.out or (first if first.is_dir() else first.parent),
                            layouts=federation.layouts(federations_named(recs))))
    except (records.RecordError, report.ReportError) as e:  # the user's files or folder, one line
        raise UserError(str(e)) from None
    return 0


def cmd_demo(args) -> int:
    from geofed import demo
    return demo.run(Path(args.out), progress, quick=args.quick)


def testbed_verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", type=positive_int, default=200, help="RTT samples per pair (default 200)")
    p.add_argument("--streams", type=positive_int, default=4, help="TCP streams for throughput (default 4)")
    p.add_argument("--seconds", type=positive_float, default=3.0, help="throughput measurement time (default 3)")
    options.out(p, None, "the testbed.verify record")


def testbed_set_args(p: argparse.ArgumentParser) -> None:
    from geofed.testbed.live import KEYS
    p.add_argument("link", nargs="?", help="the link, like M-H")
    p.add_argument("settings", nargs="*", metavar="KEY=VALUE",
                   help="; ".join(f"{k}: {v}" for k, v in KEYS.items()))
    p.add_argument("--from", dest="from_site", metavar="SITE", help="change only the way that leaves SITE "
                                                                     "(default: both ways)")
    p.add_argument("--schedule", metavar="FILE", help="a TOML file of [[change]] tables (at_s, link, from, "
                                                      "settings), applied at their times (docs/testbed.md)")


def testbed_status_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the status as JSON")


def run_args(p: argparse.ArgumentParser) -> None:
    options.federation(p)
    options.placement(p)
    options.ranks_per_node(p)
    options.hostfile(p)
    options.timeout(p, None, "3600; inside a Slurm allocation, the allocation's own limit")
    p.add_argument("--no-cpu-limit", action="store_true",
                   help="testbed: run ranks without their node's CPU quota, at the host's speed, polling while they "
                        "wait (under the quota a waiting rank sleeps between polls; docs/launch.md)")
    p.add_argument("--dry-run", action="store_true", help="print the launch command instead of running it")
    options.command_after_dashes(p)


def report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", nargs="+", help="record files, or directories searched with every directory below "
                                              "them (geofed-out/ and its parts)")
    options.out(p, None, "the page and its plots (default: the first directory given, or the first file's)")


def demo_args(p: argparse.ArgumentParser) -> None:
    options.out(p, options.DEMO_OUT, "records and the report")
    p.add_argument("--quick", action="store_true",
                   help="every step, but MDFS on G1W0, G0W1 and G1W1 only instead of seed 000's seven placements "
                        "(4 runs instead of 9, about 30 s less): a check that an installation or another MPI works")
