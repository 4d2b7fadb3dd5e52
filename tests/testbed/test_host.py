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


def test_a_process_cpu_time_counts_its_live_threads_to_the_nanosecond_and_a_gone_one_has_none():
    """A process whose two threads each spin 0.1 s of CPU, then wait, has used at least 0.2 s
    (schedstat, every thread; /proc/PID/stat's 10 ms ticks could not tell 0.2 from 0.19);
    once it is gone, 0."""
    import subprocess
    import sys
    spin = ("import threading, time, sys\n"
            "spun, done = threading.Barrier(3), threading.Event()\n"
            "def spin():\n"
            "    end = time.thread_time() + 0.1\n"
            "    while time.thread_time() < end: pass\n"
            "    spun.wait(); done.wait()\n"
            "for _ in range(2): threading.Thread(target=spin).start()\n"
            "spun.wait(); print('spun', flush=True); sys.stdin.read(); done.set()\n")
    child = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "spun\n"
        assert 0.2 <= host.cpu_s(child.pid) < 5.0
    finally:
        child.stdin.close()
        child.wait(10)
    assert host.cpu_s(child.pid) == 0.0
