"""Where the native (Rust) programs are: the setup installs them beside the venv's python."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from geofed.errors import UserError


def binary(name: str, fix: str = "run ./setup.sh to build rust/") -> str:
    """A program in $GEOFED_NATIVE_DIR when that is set (a build of one's own, such as
    rust/target/release, tried without installing it), else next to the venv's python
    (where the setup installs it) or on PATH; `fix` tells the user what to do when it is
    in none of them."""
    own = os.environ.get("GEOFED_NATIVE_DIR")
    if own and (Path(own) / name).is_file():
        return str(Path(own) / name)
    here = Path(sys.executable).parent / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    if found:
        return found
    raise UserError(f"{name}: native program not found next to {sys.executable} or on PATH; {fix}")


def library(name: str, source: Path | None = None) -> Path:
    """A shared library the setup builds into the venv's lib directory, or one in
    $GEOFED_NATIVE_DIR when that has it (a build of one's own, as for `binary`). With
    `source`, one older than its source is refused: it would run code that is no longer there."""
    own = os.environ.get("GEOFED_NATIVE_DIR")
    path = Path(own) / name if own and (Path(own) / name).is_file() else Path(sys.prefix) / "lib" / name
    if not path.is_file():
        raise UserError(f"{path}: not built; run ./setup.sh")
    if source is not None and source.is_file() and source.stat().st_mtime > path.stat().st_mtime:
        raise UserError(f"{path}: older than {source}; run ./setup.sh to rebuild it")
    return path
