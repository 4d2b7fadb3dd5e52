"""What every command does the same way: name a federation that may be gone, take the
command after `--`, and show and save the record a command produced."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from geofed import federation, records
from geofed.errors import UserError


def fed_or_name(spec: str) -> str:
    """The federation's name from a file, or the bare name when its file is gone."""
    try:
        return federation.load(spec).name
    except UserError:
        if federation.NAME_RE.match(spec):
            return spec
        raise


def down_command(what: str, down: Callable[[str], list[str]]) -> Callable[[argparse.Namespace], int]:
    """The command `... down FEDERATION`: `down` by the federation's name (its file may be
    gone), then what it removed."""
    def run(args) -> int:
        name = fed_or_name(args.federation)
        removed = down(name)
        print(f"{what} of {name} is down" + (f" (removed {'; '.join(removed)})" if removed else " (nothing was there)"))
        return 0
    return run


def command_argv(words: list[str], what: str, example: str) -> list[str]:
    """The command after `--`, which must be there."""
    argv = words[1:] if words[:1] == ["--"] else words
    if not argv:
        raise UserError(f"{what}: no command given; put it after --, like: {example}")
    return argv


def emit(rec, out: str | Path | None, table: str | None = None) -> Path | None:
    """Print the record's table, save the record in `out` (when given) and say where."""
    if table:
        print(table)
    if out is None:
        return None
    path = records.save(rec, out)
    print(f"record: {path}")
    return path
