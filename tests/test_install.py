"""An installation made by ./setup.sh serves every user, not only root."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NOBODY = 65534


def traversable_by_others(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to act as another user")
def test_a_normal_user_runs_the_installed_geofed():
    venv_bin = Path(sys.executable).parent
    if not traversable_by_others(venv_bin.resolve()):
        pytest.skip(f"{venv_bin} lies under a directory other users cannot enter: the checkout's place, not geofed's")
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
                           str(venv_bin / "geofed"), "federation", "show", "icm-task"],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    assert "icm-task" in done.stdout and "W-G" in done.stdout
    real = Path(os.path.realpath(sys.executable))
    assert traversable_by_others(real), f"the venv's interpreter {real} is not reachable by other users"
