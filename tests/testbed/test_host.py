"""The host's process and file helpers that need no root."""

import os
import time
from pathlib import Path

from geofed.testbed import host


def test_a_segment_no_process_holds_is_an_orphan_and_a_held_one_is_not(tmp_path):
    """What a rank killed while starting MPI leaves in /dev/shm: made since the job began,
    held by no process. One still open (a live job's) is not touched."""
    since = time.time() - 1
    orphan = Path(f"/dev/shm/mpich_shm_geofedtest_{os.getpid()}_orphan")
    held = Path(f"/dev/shm/mpich_shm_geofedtest_{os.getpid()}_held")
    orphan.write_bytes(b"x")
    held.write_bytes(b"x")
    try:
        with open(held, "rb"):
            found = host.orphan_segments(since)
        assert str(orphan) in found and str(held) not in found
        assert str(orphan) not in host.orphan_segments(time.time() + 60)  # made before the job: not its own
    finally:
        orphan.unlink(missing_ok=True)
        held.unlink(missing_ok=True)
