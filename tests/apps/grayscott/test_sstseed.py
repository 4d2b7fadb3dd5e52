"""EVPath's seed fix (sstseed.c): processes that seed alike still draw different IDs."""

import subprocess
import sys

from geofed.apps.grayscott import stream

# What EVPath's CManager_create does: srand48(getpid() + time(NULL)), then lrand48()
# as the connection manager's ID. Here every process uses the same seed on purpose.
DRAW = "import ctypes; c = ctypes.CDLL(None); c.srand48(4242); print(c.lrand48())"


def ids(prefix: list[str], n: int = 4) -> list[str]:
    return [subprocess.run([*prefix, sys.executable, "-c", DRAW], capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(n)]


def test_same_seed_gives_the_same_id_without_the_fix():
    assert len(set(ids([]))) == 1


def test_the_fix_makes_every_process_draw_its_own_id():
    drawn = ids(stream.preload_argv())
    assert len(set(drawn)) == len(drawn)
