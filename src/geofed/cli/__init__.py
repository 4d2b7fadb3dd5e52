"""The `geofed` command: one table of every command, plain argparse.

A command is a path of words (`bench hpl`), the function that runs it, a line of
help and the function that adds its arguments; groups (`bench`) have no function.
The commands of workloads and models are made from their registries (`bench
WORKLOAD`, `predict MODEL`, `advise MODEL`). A user's mistake (bad file, flag,
placement, not root) ends with one line on stderr and exit status 2; a failed
measurement or job with status 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import dataclass
from typing import Callable

from geofed import __version__
from geofed.cli import apps, bench, core, model, ops, options
from geofed.errors import JobFailed, Terminated, UserError, raise_terminated
from geofed.launch import mpi


@dataclass(frozen=True)
class Command:
    path: str                                               # words after `geofed`
    run: Callable[[argparse.Namespace], int] | None         # None: a group of commands
    help: str
    args: Callable[[argparse.ArgumentParser], None] | None = None


G = None  # a group's `run`
COMMANDS: list[Command] = [
    Command("federation", G, "inspect a federation file"),
    Command("federation show", core.cmd_federation_show, "sites, nodes, links, their model (RTT, BDP) and every pair's path, hop by hop",
            options.federation_positional),

    Command("testbed", G, "emulate a federation on this host (root)"),
    Command("testbed up", core.cmd_testbed_up, "create namespaces, site segments, link emulators, cgroups",
            options.federation_positional),
    Command("testbed down", core.cmd_testbed_down, "remove everything up made, also after a crash",
            options.federation_positional),
    Command("testbed list", core.cmd_testbed_list, "every testbed on this host: who brought it up, since when, "
                                                   "its services"),
    Command("testbed status", core.cmd_testbed_status, "what of the testbed exists now",
            lambda p: (options.federation_positional(p), core.testbed_status_args(p))),
    Command("testbed set", core.cmd_testbed_set, "change a running link (delay, rate, loss, ...) without a restart, "
                                                 "now or on a schedule; recorded in the testbed's state",
            lambda p: (options.federation_positional(p), core.testbed_set_args(p))),
    Command("testbed verify", core.cmd_testbed_verify, "measure RTT and throughput against the federation file",
            lambda p: (options.federation_positional(p), core.testbed_verify_args(p))),

    Command("run", core.cmd_run, "run an MPI job on a placement such as G2W3", core.run_args),
    Command("submit", ops.cmd_submit, "submit `geofed run` on a placement to Slurm, kept at one site unless --span",
            ops.submit_args),
    Command("profile", apps.cmd_profile, "run an MPI program at one site under geofed's profiler: its calls, "
                                         "bytes and compute per rank (for `predict app`)", apps.profile_args),
    Command("rehearse", apps.cmd_rehearse, "replay a profile's communication on a placement of the testbed, "
                                           "beside its prediction (root)", apps.rehearse_args),
    Command("transfer", ops.cmd_transfer, "copy a file, a tree or memory between nodes: parallel streams, "
                                          "checked chunks, resumable (root on the testbed)", ops.transfer_args),

    Command("mdfs", G, "multidimensional feature selection (MDFS) on a data set"),
    Command("mdfs run", apps.cmd_mdfs_run, "relevant variables by MDFS: locally, or across a placement of the testbed",
            apps.mdfs_run_args),
    Command("mdfs sweep", apps.cmd_mdfs_sweep, "seed 000's Tables 1 and 2: time and speedup per placement on the "
                                                "testbed (root)", apps.mdfs_sweep_args),
    Command("workflow", G, "multi-site workflows"),
    Command("workflow grayscott", apps.cmd_workflow_grayscott, "Gray-Scott at one site, staged with ADIOS2 SST to "
                                                                "analysis at another (root)", apps.workflow_grayscott_args),
    Command("obstacle", apps.cmd_obstacle, "3-D obstacle problem by projected Richardson over P2PSAP on a placement "
                                           "(seed 003)", apps.obstacle_args),

    Command("bench", G, "benchmarks"),
    Command("bench mpi", bench.cmd_mpi, "MPI micro-benchmarks with OSU definitions: latency, bw, bibw, collectives",
            bench.mpi_args),
    Command("bench compare", bench.cmd_compare, "geofed's micro-benchmarks side by side with OSU's (C) on the same ranks",
            bench.compare_args),
    Command("bench matrix", bench.cmd_matrix, "latency and bandwidth between every pair of nodes (heat map in the report)",
            bench.matrix_args),
    Command("bench check", bench.cmd_check, "compare runs with reference values and tolerances; exit 1 when any fails",
            bench.check_args),
    Command("bench btio", bench.cmd_bench_btio, "NPB BT-I/O's pattern over MPI-IO on a placement: simple and full subtypes",
            bench.btio_args),
    Command("bench mdfs", apps.cmd_bench_mdfs, "MDFS kernel side by side with the reference (PyPI mdfs), same data "
                                               "and parameters", apps.bench_mdfs_args),
    Command("bench grayscott", apps.cmd_bench_grayscott, "Gray-Scott time per step with SST staging across a link "
                                                         "against without (root)", apps.bench_grayscott_args),
    Command("bench obstacle", apps.cmd_bench_obstacle, "seed 003's Table III on the testbed: P2PSAP sync/async against "
                                                       "MPI Jacobi, and the reliable stack's throughput against TCP (root)",
            apps.bench_obstacle_args),
    Command("bench directory", ops.cmd_bench_directory, "users sync at scale: N users and groups per site, sync and "
                                                        "a re-sync (root)", ops.bench_directory_args),
    Command("bench model", model.cmd_bench_model, "predicted against measured for every inter-site run in records",
            model.bench_model_args),

    Command("predict", G, "predict a workload's time on a placement, with its parts"),
    Command("advise", G, "rank the placements of a workload on N nodes, with the reason"),
    Command("model", G, "performance models: calibration from one-site runs"),
    Command("model calibrate", model.cmd_calibrate, "fit per-node constants from one-site records",
            model.calibrate_args),
    Command("model hpl", model.cmd_model_hpl, "HPL's speed-up against p in one site and across the link, "
                                              "beside changed links (seed 001's question)", model.model_hpl_args),

    Command("monitor", G, "long-term link monitoring (SQLite) and level-shift events"),
    Command("monitor run", ops.cmd_monitor_run, "sample latency and bandwidth between node pairs periodically",
            ops.monitor_run_args),
    Command("monitor show", ops.cmd_monitor_show, "series and sustained level shifts from a store",
            ops.monitor_show_args),
    Command("monitor serve", ops.cmd_monitor_serve, "run a monitoring schedule until stopped: one-way delay, MPI, "
            "throughput, judgement and alerts (docs/monitor.md)", ops.monitor_serve_args),
    Command("monitor status", ops.cmd_monitor_status, "one line per path of a store: ok, degraded or down and why "
            "(exit 1 when any is not ok)", ops.monitor_status_args),
    Command("monitor export", ops.cmd_monitor_export, "serve a store's paths as an OpenMetrics endpoint for "
            "Prometheus (docs/monitor.md)", ops.monitor_export_args),
    Command("monitor dashboard", ops.cmd_monitor_dashboard, "a self-contained HTML dashboard of a store: the paths' "
            "grid by status, each series with its model, reference and events", ops.monitor_dashboard_args),

    Command("ops", G, "operations: directories, Slurm, ssh, storage"),
    Command("ops directory", G, "the sites' directory servers and the federation's (root)"),
    Command("ops directory up", ops.cmd_directory_up, "start slapd / Samba AD per site and the admin slapd, load "
                                                      "the fixture", options.federation_positional),
    Command("ops directory down", ops.cmd_directory_down, "stop every directory server and remove its files, also "
                                                          "after a crash", options.federation_positional),
    Command("ops directory status", ops.cmd_directory_status, "which servers run, where", options.federation_positional),
    Command("ops users", G, "the federation's user database from the sites' directories"),
    Command("ops users sync", ops.cmd_users_sync, "merge the activated users of every site into the admin directory "
                                                  "and passwd/group", ops.users_sync_args),
    Command("ops users check", ops.cmd_users_check, "authenticate a merged user against the home directory "
                                                    "(password on stdin)", ops.users_check_args),
    Command("ops users show", ops.cmd_users_show, "a user in the read-through view of the homes beside the merged copy",
            ops.users_show_args),
    Command("ops users getent", ops.cmd_users_getent, "passwd or group as a node resolves them (its nslcd, root)",
            ops.users_getent_args),
    Command("ops slurm", G, "real Slurm on the testbed: munged, slurmctld, a slurmd per node (root)"),
    Command("ops slurm up", ops.cmd_slurm_up, "start MUNGE, slurmctld and one slurmd per emulated node; with "
                                              "--federation a cluster per site in Slurm's federation",
            ops.slurm_up_args),
    Command("ops slurm down", ops.cmd_slurm_down, "stop every daemon and job of it and remove its files, also after "
                                                  "a crash", options.federation_positional),
    Command("ops slurm status", ops.cmd_slurm_status, "which clusters and daemons run", options.federation_positional),
    Command("ops slurm exec", ops.cmd_slurm_exec, "run a command (sinfo, salloc, sbatch, geofed run) where users submit",
            ops.exec_args),
    Command("ops ssh", G, "real OpenSSH between the testbed's nodes, for --hostfile jobs (root)"),
    Command("ops ssh up", ops.cmd_ssh_up, "an sshd in every node, a normal user with a key", options.federation_positional),
    Command("ops ssh down", ops.cmd_ssh_down, "stop them, delete the user, remove every key and file",
            options.federation_positional),
    Command("ops ssh exec", ops.cmd_ssh_exec, "run a command as the testbed's user on the storage site's login node",
            ops.exec_args),
    Command("ops storage", G, "the federation's file systems on the testbed; the storage site's exported over the "
                              "link (root)"),
    Command("ops storage up", ops.cmd_storage_up, "make every file system's directory and mount the exports at the "
                                                  "other sites", options.federation_positional),
    Command("ops storage path", ops.cmd_storage_path, "where a node reaches a file system (SITE:NAME), made or "
                                                      "mounted first", ops.storage_path_args),

    Command("report", core.cmd_report, "render a directory of records to HTML with plots", core.report_args),
    Command("demo", core.cmd_demo, "the main job: icm-task testbed up, verify, every workload across both sites, "
                                   "models, report, down", core.demo_args),
]


def registry_commands() -> list[Command]:
    """`bench WORKLOAD` for every workload of the registry without a command of its own in
    the table (parts of workloads have none), `predict MODEL` and `advise MODEL` for every model of the model registry."""
    from geofed import workloads
    from geofed.model import registry
    out = [Command(f"bench {w.name}", bench.cmd_workload, w.help, lambda p, w=w: bench.workload_args(p, w))
           for w in workloads.all_workloads().values() if w.command is None and w.part_of is None]
    for m in registry.MODELS.values():
        out.append(Command(f"predict {m.name}", model.cmd_predict, m.help,
                           lambda p, m=m: model.workload_args(p, m, predict=True)))
        out.append(Command(f"advise {m.name}", model.cmd_advise, m.help,
                           lambda p, m=m: model.workload_args(p, m, predict=False)))
    return out


class Parser(argparse.ArgumentParser):
    """argparse with a user's mistake in one line (the command and what is wrong), exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(commands: list[Command] | None = None) -> argparse.ArgumentParser:
    ap = Parser(prog="geofed", description="Geographically distributed HPC: "
                                           "emulate, validate and use federations of clusters joined by long-haul links.")
    ap.add_argument("--version", action="version", version=f"geofed {__version__}")
    ap.add_argument("--mpi", choices=mpi.CHOICES,
                    help=f"the MPI jobs use: the venv's MPICH (default), Open MPI, or the mpiexec on PATH "
                         f"(also {mpi.ENV}; docs/launch.md)")
    groups = {"": ap.add_subparsers(dest="command", required=True, metavar="COMMAND")}
    for c in commands if commands is not None else COMMANDS + registry_commands():
        parent, _, word = c.path.rpartition(" ")
        p = groups[parent].add_parser(word, help=c.help)
        if c.run is None:
            groups[c.path] = p.add_subparsers(dest=c.path.replace(" ", "_") + "_command", required=True,
                                              metavar="COMMAND")
            continue
        if c.args:
            c.args(p)
        p.set_defaults(func=c.run)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, raise_terminated)
    if args.mpi:  # the ranks, and every geofed process the command starts, read it there
        os.environ[mpi.ENV] = args.mpi
    try:
        return args.func(args)
    except UserError as e:
        print(f"geofed: error: {e}", file=sys.stderr)
        return 2
    except JobFailed as e:
        print(f"geofed: failed: {e}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt as e:
        print(f"geofed: {'terminated' if isinstance(e, Terminated) else 'interrupted'}; "
              "everything it had started was stopped", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
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
