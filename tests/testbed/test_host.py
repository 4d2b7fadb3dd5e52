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


def test_terminate_of_a_group_waits_for_every_member_not_only_its_leader():
    """A server's leader that exits on SIGTERM may leave a worker that ignores it: the
    group is stopped only when the worker is gone too (SIGKILL after the grace)."""
    import subprocess
    leader = subprocess.Popen(["bash", "-c", "(trap '' TERM; sleep 60) & echo $!; wait"], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    worker = int(leader.stdout.readline())
    assert host.group_members(leader.pid) == sorted([leader.pid, worker])
    host.terminate([leader.pid], grace=0.5, groups=True)
    leader.wait(5)
    assert not host.alive(worker) and host.group_members(leader.pid) == []
