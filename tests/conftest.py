import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The Ctrl-C tests send SIGINT to what they start, as a terminal would. A suite started in
# the background by a shell without job control (`./test.sh &` in a script) has SIGINT
# ignored, an ignored signal stays ignored across exec, and every geofed it starts would
# then ignore the test's Ctrl-C (all 16 such tests failed so).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
GEOFED = str(Path(sys.executable).parent / "geofed")


def run_group(argv, timeout: float, **popen) -> subprocess.CompletedProcess:
    """subprocess.run for a command that starts children (mpiexec's ranks, geofed's
    jobs), with text output captured: on a timeout the whole process group is killed,
    not only its leader, so nothing it started outlives the test."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def run_ranks(n: int, argv, timeout: float, **popen) -> subprocess.CompletedProcess:
    """`mpiexec -n n argv` on this host, as the tests of a rank program start it. A rank
    that refuses a request ends the job with MPI_Abort, and the ranks and Hydra proxy it
    kills leave their shared-memory segments and topology file behind; geofed's runner
    removes those (launch.job.stop), and so does this, for what the run made, once the
    ranks are gone (mpiexec can return while a killed rank still maps its segment)."""
    from geofed.launch.job import remove_orphan_files
    from geofed.native import binary
    from geofed.testbed import host
    since, marker = time.time(), f"geofedtest-{os.getpid()}-{time.monotonic_ns()}"
    try:
        return run_group([binary("mpiexec"), "-n", str(n), *argv], timeout,
                         env={**os.environ, "GEOFED_JOB": marker}, **popen)
    finally:
        host.terminate(host.pids_with_env([int(d) for d in os.listdir("/proc") if d.isdigit()], "GEOFED_JOB", marker))
        remove_orphan_files(since)


def run_geofed(*args, check=False, timeout=600):
    """Run the installed CLI as a user would; returns the CompletedProcess."""
    done = run_group([GEOFED, *args], timeout)
    if check:
        done.check_returncode()
    return done


@pytest.fixture
def write_fed(tmp_path):
    """Write a federation TOML text to a file and return its path."""
    def write(text: str, name: str = "fed.toml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p
    return write


@contextmanager
def readable_federation(text: str):
    """The federation `text` from a file that every user reads (jobs and transfer ends run
    as the testbed's users; pytest's tmp_path is root's alone), removed afterwards."""
    from geofed import federation
    top = Path(tempfile.mkdtemp(prefix="geofed-test-fed-"))
    try:
        os.chmod(top, 0o755)
        (top / "fed.toml").write_text(text)
        yield federation.load(top / "fed.toml")
    finally:
        shutil.rmtree(top)


@contextmanager
def slurm_testbed(text: str):
    """The testbed of the federation `text` with its Slurm up, taken down afterwards,
    leaving nothing."""
    from geofed.testbed import core, slurm
    with readable_federation(text) as fed:
        try:
            core.up(fed)
            slurm.up(fed)
            yield fed
        finally:
            slurm.down(fed.name)
            core.down(fed.name)
    assert no_leftovers(fed.name) == []


def two_site_federation(name: str, rtt_ms: float, gbps: float = 1.0) -> str:
    """A small test federation: site A with 2 nodes, site B with 1, one link."""
    from geofed.bench.link import two_site_toml
    return two_site_toml(rtt_ms, gbps, name=name, a_nodes=2, local_latency_us=2.0)


# Two sites, each with its own directory (OpenLDAP at M, Samba AD at H), one node each.
TWO_DIRECTORY_SITES = """
name = "{name}"
[[site]]
code = "M"
nodes = 1
[site.directory]
kind = "ldap"
base = "dc=uni-mannheim,dc=de"
prefix = "ma"
offset = 100000
activation = "employeeType=bwgrid"
[[site]]
code = "H"
nodes = 1
[site.directory]
kind = "ad"
realm = "ad.uni-heidelberg.de"
prefix = "hd"
offset = 200000
activation = "employeeType=bwgrid"
[[link]]
sites = ["M", "H"]
fibre_km = 28.6
bandwidth_gbps = 1.0
"""


@contextmanager
def own_testbed(path: Path, name: str):
    """A test's own testbed of the federation file `path` (named `name`): up for the
    block, then down, and nothing of it left."""
    from geofed.testbed import core
    try:
        res = run_geofed("testbed", "up", str(path))
        assert res.returncode == 0, res.stderr
        yield str(path)
    finally:
        core.down(name)
        assert core.leftovers(name) == []


def have_testbed() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def no_leftovers(fed_name: str) -> list[str]:
    """Everything of this federation's testbed that still exists on the host."""
    from geofed.testbed import host
    found = [ns for ns in host.netns_list() if ns.startswith(f"geofed-{fed_name}.")]
    if host.cpu_cgroup_dir(f"geofed/{fed_name}").exists():
        found.append("cgroup")
    if os.path.isdir("/etc/netns"):
        found += [d for d in os.listdir("/etc/netns") if d.startswith(f"geofed-{fed_name}.")]
    if os.path.exists(f"/run/geofed/{fed_name}"):
        found.append("state dir")
    return found


needs_root = pytest.mark.skipif(not have_testbed(), reason="needs root and iproute2 (network namespaces)")
needs_openmpi = pytest.mark.skipif(not Path("/usr/bin/mpirun.openmpi").exists(),
                                   reason="Open MPI is not installed (GEOFED_MPI=openmpi ./setup.sh)")
# Both MPIs geofed runs (GEOFED_MPI, docs/launch.md): a test taking `mpi_choice` runs under each.
BOTH_MPIS = [pytest.param("mpich"), pytest.param("openmpi", marks=needs_openmpi)]


@pytest.fixture(params=BOTH_MPIS)
def mpi_choice(request) -> str:
    return request.param


def openmpi_files() -> set[str]:
    """Open MPI's shared-memory segments and geofed's Open MPI session directories on this host."""
    from geofed.launch.job import OPENMPI_SESSION_DIR
    return {str(p) for p in Path("/dev/shm").glob("vader_segment.*")} | \
        {str(p) for p in Path("/tmp").glob(Path(OPENMPI_SESSION_DIR).name + "*")}


def openmpi_held() -> set[str]:
    """Open MPI files of live jobs: segments some process maps, session directories of jobs
    some process still belongs to (GEOFED_JOB in its environment)."""
    from geofed.launch.job import OPENMPI_SESSION_DIR
    from geofed.testbed import host
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    mapped = set().union(*(host.mapped_segments(p) for p in pids))
    return mapped | {d for d in openmpi_files() if d.startswith(OPENMPI_SESSION_DIR)
                     and host.pids_with_env(pids, "GEOFED_JOB", d.removeprefix(OPENMPI_SESSION_DIR))}


def screenshot(page: Path, png: Path, width: int = 1300, height: int = 1800):
    """A PNG of an HTML page taken by headless Chromium (Debian's `chromium`), as an
    array of RGB(A) pixels; its profile lives beside the PNG and goes with the test."""
    import matplotlib.image
    res = run_group(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     f"--user-data-dir={png.parent / 'geofed-chromium-profile'}", f"--window-size={width},{height}",
                     f"--screenshot={png}", page.resolve().as_uri()], timeout=120)
    assert res.returncode == 0 and png.is_file(), res.stderr
    return matplotlib.image.imread(png)


def pixels_of(image, rgb: str, tolerance: float = 0.02) -> int:
    """How many pixels of an image have the colour #rrggbb."""
    import numpy as np
    want = np.array([int(rgb[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(image[..., :3] - want) <= tolerance).all(axis=-1).sum())


def wait_until(condition, deadline_s: float, what: str):
    """Poll an observable condition until it holds (its value) or the deadline passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline_s} s: {what}")
