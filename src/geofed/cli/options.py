"""The options many commands share, each defined once: the federation, the placement,
ranks per node, a real cluster's hostfile, the time limit and the record directory."""

from __future__ import annotations

import argparse

from geofed.validate import positive_float, positive_int

# Where `geofed demo` writes its records unless told otherwise; the models read its
# one-site runs there when there is no calibration file.
DEMO_OUT = "geofed-out/demo"


def federation(p: argparse.ArgumentParser, default: str | None = "icm-task", what: str = "") -> None:
    """-f/--federation; `default=None` makes it required."""
    text = what or "federation file or shipped name"
    p.add_argument("--federation", "-f", default=default, required=default is None,
                   help=text + (f" (default {default})" if default else ""))


def federation_positional(p: argparse.ArgumentParser) -> None:
    """The federation as the command's one operand (`testbed up icm-task`)."""
    p.add_argument("federation", help="federation file or shipped name (icm-task, ma-hd, single-site)")


def placement(p: argparse.ArgumentParser, required: bool = True, text: str = "") -> None:
    p.add_argument("--placement", "-p", required=required,
                   help=text or "nodes per site, like G2W3, or by name, like 'W[1,3]G[2]' (docs/launch.md)")


def ranks_per_node(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranks-per-node", "-n", type=positive_int, default=1, help="ranks per node (default 1)")


def hostfile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hostfile", help="real cluster: lines 'HOST SITE'; srun is used inside a Slurm allocation")


def timeout(p: argparse.ArgumentParser, default: float | None = 900, default_text: str = "") -> None:
    """--timeout; `default_text` says what applies when the default (None) is left to the command."""
    text = default_text or (f"{default:g}" if default else "")
    p.add_argument("--timeout", type=positive_float, default=default,
                   help="stop the job after this many seconds" + (f" (default {text})" if text else ""))


def out(p: argparse.ArgumentParser, default: str | None, what: str) -> None:
    """--out: where the command's record (`what`) goes; `default=None`: no record unless given."""
    p.add_argument("--out", default=default,
                   help=f"directory for {what}" + (f" (default {default})" if default else ""))


def job(p: argparse.ArgumentParser, timeout_default: float | None = 900, placement_text: str = "") -> None:
    """What every command that runs an MPI job on a placement takes."""
    federation(p)
    placement(p, text=placement_text)
    ranks_per_node(p)
    hostfile(p)
    timeout(p, timeout_default)


def command_after_dashes(p: argparse.ArgumentParser, name: str = "program") -> None:
    p.add_argument(name, nargs=argparse.REMAINDER, help="-- then the command and its arguments")
