"""Stopping a placed job: Ctrl-C and --timeout end with one line and leave nothing.

Each workload (MDFS, obstacle, a benchmark, the Gray-Scott workflow) runs on a copy
of icm-task (own name, 9 ms link); once one of its ranks runs, the test sends SIGINT
to geofed's process group as a terminal's Ctrl-C would, or SIGTERM to geofed alone as
`kill` or systemd would, or lets `--timeout` pass.
Afterwards: exit 130, 143 or 124, exactly one line from geofed on stderr and no MPI abort
banner, and no process of any job, no Hydra proxy or Open MPI daemon, no /dev/shm/mpich_*
or vader_segment file, no Hydra topology file (/tmp/hydra_hwloc_xmlfile_*), no Open MPI
session directory and no temporary geofed directory left. The same through the hostfile
path (this machine as the one host of each site). Every case runs under MPICH and under
Open MPI (`mpi_choice`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import GEOFED, needs_root, openmpi_files, openmpi_held
from geofed import federation
from geofed.launch import job
from geofed.testbed import core, host

pytestmark = [needs_root, pytest.mark.slow]

NAME = f"gftest-stop-{os.getpid() % 100000}"
INTERRUPTED = "geofed: interrupted; everything it had started was stopped"
TERMINATED = "geofed: terminated; everything it had started was stopped"

# Commands that run far longer than the test waits for them.
LONG = {
    "mdfs": ["mdfs", "run", "-p", "G1W1", "--dim", "3", "--discretizations", "3"],
    "obstacle": ["obstacle", "-p", "G1W1", "--scheme", "mpi", "--n", "80", "--tol", "1e-13"],
    "bench": ["bench", "mpi", "latency", "-p", "W1G1", "--sizes", "1", "--budget", "100",
              "--iterations", "100000000"],
    "workflow": ["workflow", "grayscott", "--L", "32", "--steps", "100000", "--plotgap", "1000"],
}
# A module each workload's ranks run, to know when the job is really under way.
RANK_MODULE = {"mdfs": b"geofed.workloads", "obstacle": b"geofed.workloads",
               "bench": b"geofed.workloads", "workflow": b"grayscott-simulation"}


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    d = tmp_path_factory.mktemp("fed")
    path = federation.derive(federation.load("icm-task"), d, NAME)
    core.up(federation.load(path))
    try:
        yield str(path)
    finally:
        core.down(NAME)
        assert core.leftovers(NAME) == []


def _environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def job_processes(mark: str) -> list[tuple[int, bytes]]:
    """Processes of geofed jobs that this test started (ranks, proxies, mpiexec): every
    one inherits the test's mark, so other work on the host does not count."""
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    mine = f"GEOFED_TEST_MARK={mark}".encode()
    return [(p, _cmdline(p)[:200]) for p in pids
            if mine in (env := _environ(p).split(b"\0")) and any(x.startswith(b"GEOFED_JOB=") for x in env)]


def in_use() -> set[str]:
    """MPICH shared-memory files that some live process maps, Hydra topology files that
    one holds open, Open MPI's files of live jobs (a running job's, not a leak)."""
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    return set().union(*(host.mapped_segments(p) | host.open_files(p) for p in pids)) | openmpi_held()


def snapshot() -> set[str]:
    return {f"/dev/shm/{f}" for f in os.listdir("/dev/shm") if f.startswith("mpich")} | openmpi_files() | \
        {str(p) for p in Path(job.HYDRA_TOPOLOGY_FILE).parent.glob(Path(job.HYDRA_TOPOLOGY_FILE).name + "*")}


def _mpi_ready(pid: int) -> bool:
    """The rank has initialised MPI: it maps MPICH's shared memory, which a kill leaves
    behind, or Open MPI's collectives (chosen in MPI_Init once the rank knows its peers: a
    rank alone on its node maps no shared memory)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read()
        return "/dev/shm/mpich" in maps or "mca_coll_" in maps
    except OSError:
        return False


def wait_for_rank(module: bytes, proc: subprocess.Popen, deadline_s: float = 120) -> None:
    """Until a rank of `proc`'s job running `module` has initialised MPI (polling, bounded by
    a deadline); a rank of other work on the host, with another mark, does not count."""
    deadline = time.monotonic() + deadline_s
    mine = f"GEOFED_TEST_MARK={proc.mark}".encode()
    while time.monotonic() < deadline and proc.poll() is None:
        for p in (int(d) for d in os.listdir("/proc") if d.isdigit()):
            cmd = _cmdline(p)
            if module in cmd and b"hydra_pmi_proxy" not in cmd and mine in _environ(p) and _mpi_ready(p):
                return
        time.sleep(0.1)
    raise AssertionError(f"no rank of {module.decode()} initialised MPI (geofed exited with {proc.poll()})")


def start(argv: list[str], cwd: Path, mpi_choice: str) -> subprocess.Popen:
    """geofed in a session of its own, like a shell's job (Ctrl-C goes to its process
    group), under the MPI chosen, with its temporary files in the test's directory and
    the test's mark."""
    (cwd / "tmp").mkdir()
    mark = uuid.uuid4().hex
    env = dict(os.environ, TMPDIR=str(cwd / "tmp"), GEOFED_TEST_MARK=mark, GEOFED_MPI=mpi_choice)
    proc = subprocess.Popen([GEOFED, *argv], cwd=cwd, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    proc.mark, proc.tmp = mark, cwd / "tmp"
    return proc


def assert_clean_end(proc: subprocess.Popen, before: set[str], status: int, last_line: str) -> str:
    out, err = proc.communicate(timeout=120)
    lines = [l for l in err.splitlines() if l.strip()]
    assert proc.returncode == status, (out[-2000:], err[-3000:])
    assert lines and lines[-1].startswith(last_line), err[-3000:]
    # Everything else on stderr is progress ("geofed: ..."), no abort banner, no traceback.
    assert all(l.startswith("geofed: ") for l in lines), err[-3000:]
    assert "Traceback" not in err and "BAD TERMINATION" not in err + out
    assert job_processes(proc.mark) == []
    leaked = snapshot() - before - in_use()
    assert leaked == set(), leaked
    assert list(proc.tmp.iterdir()) == []
    return lines[-1]


@pytest.mark.parametrize("workload", sorted(LONG))
def test_ctrl_c_stops_the_whole_job(workload, fed, tmp_path, mpi_choice):
    before = snapshot()
    proc = start([*LONG[workload], "-f", fed, "--out", str(tmp_path / "out")], tmp_path, mpi_choice)
    try:
        wait_for_rank(RANK_MODULE[workload], proc)
        os.killpg(proc.pid, signal.SIGINT)
        assert_clean_end(proc, before, 130, INTERRUPTED)
    finally:
        proc.kill()


def test_sigterm_to_geofed_alone_stops_the_whole_job(fed, tmp_path, mpi_choice):
    # Only geofed gets it: the launcher, its daemons and the ranks must be stopped by geofed.
    before = snapshot()
    proc = start([*LONG["mdfs"], "-f", fed, "--out", str(tmp_path / "out")], tmp_path, mpi_choice)
    try:
        wait_for_rank(RANK_MODULE["mdfs"], proc)
        proc.send_signal(signal.SIGTERM)
        assert_clean_end(proc, before, 143, TERMINATED)
    finally:
        proc.kill()


@pytest.mark.parametrize("workload", sorted(LONG))
def test_timeout_stops_the_whole_job(workload, fed, tmp_path, mpi_choice):
    before = snapshot()
    proc = start([*LONG[workload], "-f", fed, "--out", str(tmp_path / "out"), "--timeout", "6"], tmp_path,
                 mpi_choice)
    try:
        line = assert_clean_end(proc, before, 124, "geofed: failed: ")
    finally:
        proc.kill()
    assert "6 s" in line
    if workload != "workflow":  # the workflow's parts keep their logs in its run directory
        assert "log: geofed-out/logs/" in line
        (log,) = (tmp_path / "geofed-out" / "logs").iterdir()
        assert log.stat().st_size > 0


def test_a_tiny_timeout_leaves_no_proxy(fed, tmp_path, mpi_choice):
    # Stopped while the launcher is still starting Hydra's proxies (Open MPI's daemons) in the node namespaces.
    before = snapshot()
    proc = start(["run", "-f", fed, "-p", "G2W2", "--timeout", "0.05", "--", "sleep", "30"], tmp_path, mpi_choice)
    assert_clean_end(proc, before, 124, "geofed: failed: the job did not finish within --timeout 0.05 s")


def test_ctrl_c_through_the_hostfile_path(tmp_path, mpi_choice):
    # This machine is the one host of site W, and (by another name) of site G: Hydra
    # starts local proxies without ssh, as on a login node with two local slots.
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{socket.gethostname()} W\nlocalhost G\n")
    before = snapshot()
    proc = start([*LONG["mdfs"], "--hostfile", str(hostfile), "--out", str(tmp_path / "out")], tmp_path, mpi_choice)
    try:
        wait_for_rank(RANK_MODULE["mdfs"], proc)
        os.killpg(proc.pid, signal.SIGINT)
        assert_clean_end(proc, before, 130, INTERRUPTED)
    finally:
        proc.kill()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".geofed")] == []
