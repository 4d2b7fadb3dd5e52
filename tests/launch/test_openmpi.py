"""Open MPI beside MPICH (GEOFED_MPI=openmpi) on a two-site testbed of its own: the
benchmark's bytes cross the emulated link, ranks follow the placement and know their
node, a failing rank ends the job in one line, and nothing of Open MPI is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (GEOFED, needs_openmpi, needs_root, openmpi_files, openmpi_held, own_testbed, run_group,
                      two_site_federation)
from geofed import federation, records
from geofed.launch import mpi
from geofed.testbed import core

NAME = f"gftest-ompi-{os.getpid() % 100000}"
OPENMPI = dict(os.environ, GEOFED_MPI="openmpi")

pytestmark = [needs_root, needs_openmpi]


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    path = tmp_path_factory.mktemp("fed") / f"{NAME}.toml"
    path.write_text(two_site_federation(NAME, rtt_ms=2.0))
    with own_testbed(path, NAME) as p:
        yield p


def openmpi_leftovers(before: set[str]) -> set[str]:
    """Open MPI files made since `before` that no live job holds, and keep so: a segment no
    process maps, a session directory whose job (its id ends the name) has no process left.
    Other engineers' jobs (a demo's) make theirs meanwhile; a leak stays (polled 5 s)."""
    found = openmpi_files() - before
    deadline = time.monotonic() + 5
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found &= openmpi_files() - openmpi_held()
    return found - openmpi_held()


def test_choice_is_detected_from_the_launcher(monkeypatch):
    monkeypatch.setenv("GEOFED_MPI", "openmpi")
    mpi.current.cache_clear()
    try:
        chosen = mpi.current()
        assert chosen.implementation == "openmpi"
        assert mpi.program("libgeofed_bench.so") == "libgeofed_bench.openmpi.so"
        assert chosen.version.startswith("4.") and Path(chosen.libmpi).name == "libmpi.so.40"
        monkeypatch.setenv("GEOFED_MPI", "lam")
        mpi.current.cache_clear()
        with pytest.raises(Exception, match="GEOFED_MPI='lam': the MPI is one of mpich, openmpi, path"):
            mpi.current()
    finally:
        mpi.current.cache_clear()


def test_bandwidth_crosses_the_emulated_link(fed, tmp_path):
    before = openmpi_files()
    loaded = federation.load(fed)
    sent_before = core.link_tx_bytes(loaded, "A", "B")
    done = subprocess.run([GEOFED, "bench", "mpi", "-f", fed, "-p", "A1B1", "--sizes", "4M", "--iterations", "4",
                           "--warmup", "1", "--window", "2", "--no-full", "bw", "--out", str(tmp_path)],
                          env=OPENMPI, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("geofed: MPI: Open MPI 4.") == 1, done.stderr
    crossed = core.link_tx_bytes(loaded, "A", "B") - sent_before
    rec = json.loads(next(tmp_path.glob("bench.mpi-*.json")).read_text())
    # Every round, warm-up or timed, sends a window of 2 messages of 4 MiB from A1 to B1.
    size = rec["data"]["results"][0]["sizes"][0]
    assert crossed >= (size["warmup"] + size["iterations"]) * 2 * 4 * 2**20, (crossed, size)
    assert rec["data"]["mpi_library"].startswith("Open MPI v4.")
    assert (rec["meta"]["mpi"], rec["meta"]["mpi_transport"]) == ("openmpi", mpi.TESTBED_TRANSPORT["openmpi"])
    assert openmpi_leftovers(before) == set()


PROGRAM = """
import os, sys
from mpi4py import MPI
comm = MPI.COMM_WORLD
# Rank 0 prints every rank's node and site, in rank order: ranks' own lines may interleave.
said = comm.gather(f'{os.environ["GEOFED_NODE"]} {os.environ["GEOFED_SITE"]}')
if comm.rank == 0:
    print("\\n".join(f"{r} {s}" for r, s in enumerate(said)), flush=True)
if sys.argv[1] == "raise" and comm.rank == 3:
    raise RuntimeError("the input deck is wrong")
comm.Barrier()
"""


def test_ranks_follow_the_placement_and_a_failure_ends_the_job_in_one_line(fed, tmp_path):
    before = openmpi_files()
    (tmp_path / "prog.py").write_text(PROGRAM)
    argv = [GEOFED, "run", "-f", fed, "-p", "A[2,1]B1", "-n", "2", "--timeout", "60", "--", "python", "prog.py"]
    done = subprocess.run(argv + ["ok"], cwd=tmp_path, env=OPENMPI, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["0 A2 A", "1 A2 A", "2 A1 A", "3 A1 A", "4 B1 B", "5 B1 B"]
    failed = subprocess.run(argv + ["raise"], cwd=tmp_path, env=OPENMPI, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1, failed.stderr
    said = [line for line in failed.stderr.splitlines() if line.startswith("geofed: ")]
    assert said[1:] == [failed.stderr.splitlines()[-1]]
    assert said[1].startswith("geofed: failed: run: rank 3 on node A1 exited with status 1 "
                              "(RuntimeError: the input deck is wrong); log: "), failed.stderr
    assert openmpi_leftovers(before) == set()


def test_hostfile_job_runs_under_open_mpi(fed, tmp_path):
    """A real cluster's path (`--hostfile`), with this machine as the one host of site A:
    Open MPI's mpirun, ranks told the MPI and finding their node through GEOFED_HOSTMAP."""
    before = openmpi_files()
    (tmp_path / "hosts").write_text(f"{os.uname().nodename} A\n")
    # one write per line: unbuffered, print() writes its pieces apart, and Open MPI forwards
    # each rank's writes as they come, so two ranks' pieces could interleave within a line
    (tmp_path / "prog.py").write_text("import os\nfrom mpi4py import MPI\nfrom geofed import runtime\n"
                                      "os.write(1, f\"{MPI.COMM_WORLD.rank} {runtime.node()} {os.environ['GEOFED_MPI']} "
                                      "{MPI.Get_library_version().split(',')[0]}\\n\".encode())\n")
    env = {k: v for k, v in OPENMPI.items() if k != "GEOFED_TESTBED"}
    done = subprocess.run([GEOFED, "run", "-f", fed, "--hostfile", "hosts", "-p", "A1", "-n", "2", "--timeout", "60",
                           "--", "python", "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["0 A1 openmpi Open MPI v4.1.4", "1 A1 openmpi Open MPI v4.1.4"]
    assert openmpi_leftovers(before) == set()


# geofed's MPI workloads at small sizes across the link, and the record kind each makes.
WORKLOADS = {
    "hpl": (["bench", "hpl", "--n", "400,600"], "bench.hpl"),
    "mdfs": (["mdfs", "run"], "mdfs.run"),
    "obstacle": (["obstacle", "--scheme", "mpi", "--n", "40"], "obstacle.run"),
}


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_workload_passes_its_sanity_check_under_open_mpi(workload, fed, tmp_path):
    """HPL's residual check, the obstacle solver's certified residual, MDFS's relevant
    variables and information gains equal to one process's (no MPI) on the same data."""
    before = openmpi_files()
    argv, kind = WORKLOADS[workload]
    done = run_group([GEOFED, *argv, "-f", fed, "-p", "A1B1", "--out", str(tmp_path / "ompi")], timeout=300,
                     env=OPENMPI)
    assert done.returncode == 0, done.stderr
    (rec,) = records.load_dir(tmp_path / "ompi")
    assert rec.kind == kind and (rec.meta["mpi"], rec.meta["mpi_transport"]) == (
        "openmpi", mpi.TESTBED_TRANSPORT["openmpi"])
    assert rec.data.placement == "A1B1"
    if workload == "mdfs":
        local = run_group([GEOFED, *argv, "--out", str(tmp_path / "local")], timeout=300)
        assert local.returncode == 0, local.stderr
        (alone,) = records.load_dir(tmp_path / "local")
        assert rec.data.relevant == alone.data.relevant
        assert rec.data.max_ig == pytest.approx(alone.data.max_ig, rel=1e-9)
    else:
        verdict = rec.sanity()
        assert verdict.ok, verdict.why
    assert openmpi_leftovers(before) == set()


def test_compare_refuses_an_osu_built_for_the_other_mpi(tmp_path, monkeypatch):
    """An OSU program built with Open MPI's mpicc links libmpi.so.40: `bench compare` under
    MPICH names the mismatch instead of starting ranks that cannot find each other."""
    from geofed.bench import compare
    from geofed.errors import UserError
    (tmp_path / "hello.c").write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); "
                                      "return MPI_Finalize(); }\n")
    (tmp_path / "bin").mkdir()
    built = subprocess.run(["/usr/bin/mpicc.openmpi", "-o", str(tmp_path / "bin" / "osu_latency"),
                            str(tmp_path / "hello.c")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    for choice, refused in (("openmpi", False), ("mpich", True)):
        monkeypatch.setenv("GEOFED_MPI", choice)
        mpi.current.cache_clear()
        try:
            if refused:
                with pytest.raises(UserError, match=r"osu_latency links libmpi\.so\.40, not the libmpi\.so\.12 of MPICH"):
                    compare.find_osu(str(tmp_path), "latency")
            else:
                assert compare.find_osu(str(tmp_path), "latency") == tmp_path / "bin" / "osu_latency"
        finally:
            mpi.current.cache_clear()


def test_no_job_progresses_its_tcp_only_every_10_ms(fed, monkeypatch):
    """ob1's TCP is driven by libevent, which Open MPI ticks at every progress call or, in
    some jobs, every 10 ms: a 1-byte round trip then takes ~10 ms whatever the link (here
    2 ms). About one job in three did so before the testbed set the tick rate; 8 jobs all
    passing by chance would be 4 %."""
    from geofed.bench import floor
    monkeypatch.setenv("GEOFED_MPI", "openmpi")
    mpi.current.cache_clear()
    try:
        loaded = federation.load(fed)
        one_way_us = [floor.mpi_latency_us(loaded, "A", "B", 20)["median"] for _ in range(8)]
    finally:
        mpi.current.cache_clear()
    # the link's 1 ms one way and the host's costs, far below a 10 ms tick's 5 ms
    assert max(one_way_us) < 3000, one_way_us
