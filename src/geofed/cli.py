"""The `geofed` command: a registry of subcommands, plain argparse.

A user's mistake (bad file, flag, placement, not root) ends with one line on stderr
and exit status 2; a failed measurement or job with status 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from geofed import __version__, federation, records
from geofed.errors import JobFailed, UserError
from geofed.progress import progress
from geofed.validate import positive_float, positive_int

# Capabilities that add subcommands: each module has register(commands, bench), where
# `commands` are the subparsers of `geofed` and `bench` those of `geofed bench`.
# Modules import their heavy dependencies inside the command functions, not at import.
PLUGINS: list[str] = [
    "geofed.bench.cli",
    "geofed.ops.monitor",
    "geofed.ops.cli",
    "geofed.apps.mdfs.cli",
    "geofed.apps.grayscott.cli",
    "geofed.apps.obstacle.cli",
    "geofed.apps.hpl.cli",
    "geofed.model.cli",
    "geofed.ops.transfer",
    "geofed.testbed.cli",
    "geofed.bench.btio",
]


def _fed_or_name(spec: str) -> str:
    """The federation's name from a file, or the bare name when its file is gone."""
    try:
        return federation.load(spec).name
    except UserError:
        if federation.NAME_RE.match(spec):
            return spec
        raise


# ---------------------------------------------------------------- federation


def cmd_federation_show(args) -> int:
    fed = federation.load(args.file)
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
    return 0


# ---------------------------------------------------------------- testbed


def cmd_testbed_up(args) -> int:
    from geofed.testbed import core
    fed = federation.load(args.file)
    plan = core.up(fed, progress)
    print(f"testbed {fed.name} is up: {len(plan.nodes)} nodes, {len(plan.links)} links")
    return 0


def cmd_testbed_down(args) -> int:
    from geofed.testbed import core
    name = _fed_or_name(args.file)
    removed = core.down(name)
    print(f"testbed {name} is down" + (f" (removed {', '.join(removed)})" if removed else " (nothing was there)"))
    return 0


def cmd_testbed_status(args) -> int:
    from geofed.testbed import core
    fed = federation.load(args.file)
    st = core.status(fed)
    if args.json:
        print(json.dumps(st, indent=1))
        return 0 if st["up"] else 1
    print(f"testbed {fed.name}: {'up' if st['up'] else 'down'}")
    present = sum(st["namespaces"].values())
    print(f"  namespaces {present}/{len(st['namespaces'])}, cgroups {sum(st['cgroups'].values())}/{len(st['cgroups'])}")
    for name, e in st["emulators"].items():
        print(f"  link {name}: emulator pid {e['pid']} {'running' if e['alive'] else 'DEAD'},"
              f" holds {', '.join(f'{d:.1f} us from {s}' for s, d in e['delay_us'].items())}"
              f" (the fibre's propagation); floor: probe RTT "
              f"{e['floor']['probe_rtt_ms']['median']:.4f} ms median with nothing held")
    return 0 if st["up"] else 1


def cmd_testbed_verify(args) -> int:
    from geofed.testbed import core, verify
    fed = federation.load(args.file)
    core.require_up(fed)
    data = verify.verify(fed, rtt_count=args.count, streams=args.streams, seconds=args.seconds, progress=progress)
    rec = records.make("testbed.verify", data, **records.federation_meta(fed))
    print(verify.format_table(data))
    if args.out:
        print(f"record: {records.save(rec, args.out)}")
    return 0 if data["ok"] else 1


# ---------------------------------------------------------------- run


def cmd_run(args) -> int:
    """Run the user's program; its output is shown as it comes, its exit status returned."""
    import tempfile

    from geofed.launch import job as launch
    from geofed.launch import runner
    from geofed.launch.placement import parse
    if not args.program:
        raise UserError("run: no command given; put it after --, like: geofed run --placement G1W1 -- python app.py")
    fed = federation.load(args.federation)
    j = launch.Job(fed, parse(args.placement, fed), args.program, args.ranks_per_node, cpu_limit=not args.no_cpu_limit)
    if args.dry_run:
        cmd = runner.command(j, args.hostfile, check_up=False)
        env = " ".join(f"{k}={v}" for k, v in cmd.env.items())
        print((env + " " if env else "") + " ".join(cmd.argv))
        return 0
    with tempfile.TemporaryDirectory(prefix="geofed-job-") as tmp, \
            runner.started(j, Path(tmp) / "job.log", hostfile=args.hostfile, echo=True) as running:
        rc = running.wait(args.timeout)
    if rc == 124 and args.timeout is not None:
        print(f"geofed: failed: the job did not finish within --timeout {args.timeout:g} s and was stopped",
              file=sys.stderr)
    return rc


# ---------------------------------------------------------------- bench


def _floats(text: str) -> list[float]:
    """Positive finite numbers separated by commas."""
    vals = [positive_float(x) for x in text.split(",") if x]
    if not vals:
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, got {text!r}")
    return vals


LINK_PARTS = ("rtt", "throughput", "ways")


def _parts(text: str) -> list[str]:
    parts = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in parts if x not in LINK_PARTS]
    if bad or not parts:
        raise argparse.ArgumentTypeError(f"expected some of {', '.join(LINK_PARTS)} separated by commas, got {text!r}")
    return parts


def cmd_bench_link(args) -> int:
    from geofed.bench import link
    parts = set(args.parts)
    rec = link.run(args.rtt if "rtt" in parts else [], args.rate if "throughput" in parts else [],
                   [int(s) for s in args.streams], args.throughput_rtt, args.seconds, progress, ways="ways" in parts)
    print(link.format_table(rec))
    print(f"record: {records.save(rec, args.out)}")
    return 0


# ---------------------------------------------------------------- report and demo


def cmd_report(args) -> int:
    from geofed import report
    recs = records.load_dir(args.records)
    if not recs:
        raise UserError(f"{args.records}: no geofed records (*.json) there")
    print(report.render(recs, args.out or args.records))
    return 0


def cmd_demo(args) -> int:
    from geofed import demo
    return demo.run(Path(args.out), progress)


# ---------------------------------------------------------------- parser


class Parser(argparse.ArgumentParser):
    """argparse with a user's mistake in one line (the command and what is wrong), exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="geofed", description="Geographically distributed HPC: "
                                 "emulate, validate and use federations of clusters joined by long-haul links.")
    ap.add_argument("--version", action="version", version=f"geofed {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fed = sub.add_parser("federation", help="inspect a federation file").add_subparsers(dest="action", required=True)
    p = fed.add_parser("show", help="sites, nodes, links and their model (RTT, BDP)")
    p.add_argument("file", help="federation TOML file or shipped name (icm-task, ma-hd, single-site)")
    p.set_defaults(func=cmd_federation_show)

    tb = sub.add_parser("testbed", help="emulate a federation on this host (root)").add_subparsers(dest="action", required=True)
    for name, func, text in [("up", cmd_testbed_up, "create namespaces, site segments, link emulators, cgroups"),
                             ("down", cmd_testbed_down, "remove everything up made, also after a crash"),
                             ("status", cmd_testbed_status, "what of the testbed exists now"),
                             ("verify", cmd_testbed_verify, "measure RTT and throughput against the federation file")]:
        p = tb.add_parser(name, help=text)
        p.add_argument("file", help="federation TOML file or shipped name")
        p.set_defaults(func=func)
        if name == "status":
            p.add_argument("--json", action="store_true", help="print the status as JSON")
        if name == "verify":
            p.add_argument("--count", type=positive_int, default=200, help="RTT samples per pair (default 200)")
            p.add_argument("--streams", type=positive_int, default=4, help="TCP streams for throughput (default 4)")
            p.add_argument("--seconds", type=positive_float, default=3.0, help="throughput measurement time (default 3)")
            p.add_argument("--out", help="directory to write the testbed.verify record to")

    p = sub.add_parser("run", help="run an MPI job on a placement such as G2W3")
    p.add_argument("--federation", "-f", default="icm-task", help="federation file or shipped name (default icm-task)")
    p.add_argument("--placement", "-p", required=True,
                   help="nodes per site, like G2W3, or by name, like 'W[1,3]G[2]' (docs/launch.md)")
    p.add_argument("--ranks-per-node", "-n", type=positive_int, default=1)
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE'; srun is used inside a Slurm allocation")
    p.add_argument("--timeout", type=positive_float, help="stop the job after this many seconds")
    p.add_argument("--no-cpu-limit", action="store_true",
                   help="testbed: run ranks without their node's CPU quota (for network benchmarks: busy-polling ranks would be throttled)")
    p.add_argument("--dry-run", action="store_true", help="print the launch command instead of running it")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
    p.set_defaults(func=cmd_run)

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="action", required=True)
    p = bench.add_parser("link", help="link emulator accuracy: RTT and throughput against configured (root)")
    p.add_argument("--rtt", type=_floats, default=[0.145, 1, 9, 50], help="RTTs in ms (default 0.145,1,9,50)")
    p.add_argument("--rate", type=_floats, default=[1, 5, 10], help="rates in Gb/s (default 1,5,10)")
    p.add_argument("--streams", type=_floats, default=[1, 4], help="TCP stream counts (default 1,4)")
    p.add_argument("--throughput-rtt", type=positive_float, default=9.0, help="RTT of the throughput runs (default 9 ms)")
    p.add_argument("--seconds", type=positive_float, default=5.0, help="throughput measurement time (default 5)")
    p.add_argument("--parts", type=_parts, default=list(LINK_PARTS),
                   help="what to measure, comma-separated: rtt, throughput, ways (each direction of an "
                        "asymmetric link and the jitter and loss delivered); default all")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the JSON record")
    p.set_defaults(func=cmd_bench_link)

    for name in PLUGINS:
        importlib.import_module(name).register(sub, bench)

    p = sub.add_parser("report", help="render a directory of records to HTML with plots")
    p.add_argument("records", help="directory holding record JSON files")
    p.add_argument("--out", help="output directory (default: the records directory)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("demo", help="the main job: icm-task testbed up, verify, a job across both sites, report, down")
    p.add_argument("--out", default="geofed-out/demo", help="directory for records and the report")
    p.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if getattr(args, "program", None) and args.program[0] == "--":
        args.program = args.program[1:]
    try:
        return args.func(args)
    except UserError as e:
        print(f"geofed: error: {e}", file=sys.stderr)
        return 2
    except JobFailed as e:
        print(f"geofed: failed: {e}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print("geofed: interrupted; everything it had started was stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`| head`): nothing more to say, and no
        # traceback when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:  # a host failure, not the user's input: keep it to one line too
        from geofed.testbed.host import HostError
        if isinstance(e, HostError):
            print(f"geofed: failed: {e}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
