"""Where the native (Rust) programs are: the setup installs them beside the venv's python."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from geofed.errors import UserError


def binary(name: str) -> str:
    here = Path(sys.executable).parent / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    if found:
        return found
    raise UserError(f"{name}: native program not found next to {sys.executable} or on PATH; run ./setup.sh to build rust/")


def library(name: str) -> Path:
    """A shared library the setup builds into the venv's lib directory."""
    path = Path(sys.prefix) / "lib" / name
    if not path.is_file():
        raise UserError(f"{path}: not built; run ./setup.sh")
    return path
