"""`geofed profile`, `predict app`, `advise app` and `rehearse` on programs written here with a known
pattern: the profile holds exactly the calls, peers and bytes they made; the model's link part grows
with the link's round trip as it says; a rehearsal on the emulated link runs and is recorded."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GEOFED, needs_openmpi, needs_root, own_testbed, run_geofed, run_group
from geofed import federation, records
from geofed.bench.link import two_site_toml
from geofed.errors import UserError
from geofed.launch.placement import parse
from geofed.model import app, calibration

NAME = f"gftest-prof-{os.getpid() % 100000}"
ITERATIONS = 7
SIZES = (8, 1024, 65536)
RTT_MS = 4.0

# A ring: every rank sends to its right neighbour and receives from its left, three sizes,
# then an allreduce of four doubles; ITERATIONS times.
RING = f"""
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()
for _ in range({ITERATIONS}):
    for size in {SIZES}:
        comm.Sendrecv(np.zeros(size, np.uint8), (me + 1) % n, 1, np.empty(size, np.uint8), (me - 1) % n, 1)
    comm.Allreduce(np.ones(4), np.empty(4))
"""

# The same exchange in C with non-blocking calls (Irecv, Isend, Waitall), then a broadcast of
# 100 ints from rank 1 and a barrier; before it, once, a communicator split into odd and even
# ranks and a duplicate of the world's (communicator creation: a collective of its own).
HALO_C = f"""
#include <mpi.h>
int main(int argc, char **argv) {{
    static char out[4096], in[4096];
    int buf[100] = {{0}}, me, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm half, copy;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
    MPI_Comm_dup(MPI_COMM_WORLD, &copy);
    MPI_Comm_free(&half);
    MPI_Comm_free(&copy);
    for (int i = 0; i < {ITERATIONS}; i++) {{
        MPI_Request r[2];
        MPI_Irecv(in, 4096, MPI_CHAR, (me + n - 1) % n, 0, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(out, 4096, MPI_CHAR, (me + 1) % n, 0, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        MPI_Bcast(buf, 100, MPI_INT, 1, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }}
    MPI_Finalize();
    return 0;
}}
"""

@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    path = tmp_path_factory.mktemp("fed") / "fed.toml"
    path.write_text(two_site_toml(RTT_MS, 1.0, name=NAME, a_nodes=3, local_latency_us=2.0))
    with own_testbed(path, NAME) as fed_path:
        yield fed_path


def profile(fed, placement, out, *program) -> records.Record:
    res = run_geofed("profile", "-f", fed, "-p", placement, "--no-cpu-limit", "--out", str(out), "--", *program,
                     timeout=300)
    assert res.returncode == 0, res.stderr
    (path,) = Path(out).glob("app.profile-*.json")
    rec = records.read(path)
    assert rec.sanity().ok
    return rec


def patterns(rank: dict) -> set:
    return {(p["kind"], p["peer"], p["source"], p["bytes"], p["size"], p["count"]) for p in rank["patterns"]}


def ring_patterns(r: int, n: int) -> set:
    """What RING's rank r of n does: a sendrecv of each size to the right from the left, an allreduce."""
    return {("sendrecv", (r + 1) % n, (r - 1) % n, size, 0, ITERATIONS) for size in SIZES} | \
        {("allreduce", -1, -1, 32, n, ITERATIONS)}


@needs_root
@pytest.mark.root
def test_a_ring_profile_predicted_and_rehearsed(fed, tmp_path):
    (tmp_path / "ring.py").write_text(RING)
    rec = profile(fed, "A3", tmp_path / "profile", sys.executable, str(tmp_path / "ring.py"))
    d = rec.data
    assert (d.placement, d.site, d.ranks_per_node, len(d.ranks)) == ("A3", "A", 1, 3)
    for r, rank in enumerate(d.ranks):
        assert patterns(rank) == ring_patterns(r, 3)
        assert rank["calls"] == 4 * ITERATIONS and rank["iterations"] == ITERATIONS
        kinds = [(rank["patterns"][i]["kind"], rank["patterns"][i]["bytes"]) for i in rank["iteration"]]
        assert sorted(kinds) == sorted([("sendrecv", s) for s in SIZES] + [("allreduce", 32)])
        assert rank["prefix"] == [] and rank["suffix"] == []
        assert abs(rank["compute_s"] + rank["comm_s"] - rank["total_s"]) < 1e-9
    path = next((tmp_path / "profile").glob("*.json"))

    # Inside one site the link adds nothing; across it, the link's part grows with its round trip
    # (the messages are small: latency): by at least the allreduce's two crossings per iteration
    # (the third rank folds into rank 0, then gets the result) and at most by every crossing
    # message of an iteration (3 + 3 of the ring, 2 of the allreduce) on the critical path.
    fed_obj = federation.load(fed)
    one = app.MODELS[0].predict(fed_obj, calibration.found_or_empty(fed, fed_obj), "A3",
                                parse("A3", fed_obj).nodes(fed_obj), app.AppParams(profile=str(path)))
    assert one.parts["link_comm"] == 0 and one.interval[0] <= one.total_s <= one.interval[1]
    spans = {}
    for rtt in (RTT_MS, 2 * RTT_MS, 4 * RTT_MS):
        res = run_geofed("predict", "app", str(path), "-f", fed, "-p", "A2B1", "--json",
                         "--what-if", f"link.A-B.rtt_ms={rtt}")
        assert res.returncode == 0, res.stderr
        spans[rtt] = json.loads(res.stdout)
    link = [spans[rtt]["parts"]["link_comm"] for rtt in sorted(spans)]
    for (low, high), one_way in zip([(0, 1), (1, 2)], [RTT_MS / 2, RTT_MS]):
        assert 2 * ITERATIONS * one_way / 1e3 <= link[high] - link[low] <= 8 * ITERATIONS * one_way / 1e3, link
    assert spans[RTT_MS]["total_s"] > one.total_s

    res = run_geofed("advise", "app", str(path), "-f", fed)
    assert res.returncode == 0, res.stderr
    assert "advice: keep it in" in res.stdout and "slower across sites" in res.stdout

    res = run_geofed("rehearse", str(path), "-f", fed, "-p", "A2B1", "--out", str(tmp_path / "rehearsal"),
                     timeout=300)
    assert res.returncode == 0, res.stderr
    (rpath,) = (tmp_path / "rehearsal").glob("app.rehearsal-*.json")
    reh = records.read(rpath).data
    assert reh.placement == "A2B1" and reh.calls == 3 * 4 * ITERATIONS
    assert reh.predicted_s == pytest.approx(spans[RTT_MS]["total_s"], rel=1e-6)
    # the allreduce crosses the link twice per iteration: no replay is faster
    assert reh.measured_s >= 2 * ITERATIONS * RTT_MS / 2 / 1e3
    assert "rehearsal of" in res.stdout and f"{reh.calls} calls replayed" in res.stdout


@needs_root
@pytest.mark.root
def test_a_c_program_with_nonblocking_calls(fed, tmp_path):
    source = tmp_path / "halo.c"
    source.write_text(HALO_C)
    exe = tmp_path / "halo"
    subprocess.run([str(Path(sys.executable).parent / "mpicc"), "-O2", "-o", str(exe), str(source)], check=True)
    d = profile(fed, "A3", tmp_path / "profile", str(exe)).data
    for r, rank in enumerate(d.ranks):
        assert patterns(rank) == {("irecv", (r - 1) % 3, -1, 4096, 0, ITERATIONS),
                                  ("isend", (r + 1) % 3, -1, 4096, 0, ITERATIONS),
                                  ("waitall", -1, -1, 0, 2, ITERATIONS),
                                  ("bcast", 1, -1, 400, 3, ITERATIONS),
                                  ("barrier", -1, -1, 0, 3, ITERATIONS),
                                  ("comm_split", -1, -1, 0, 3, 1), ("comm_dup", -1, -1, 0, 3, 1)}
        assert all(p["overlapped"] == ITERATIONS for p in rank["patterns"] if p["kind"] in ("irecv", "isend"))
        assert len(rank["iteration"]) == 5 and rank["iterations"] == ITERATIONS
        assert [rank["patterns"][i]["kind"] for i in rank["prefix"]] == ["comm_split", "comm_dup"]
    # rehearsed across the link, the communicator creation too: every call is replayed
    res = run_geofed("rehearse", str(next((tmp_path / "profile").glob("*.json"))), "-f", fed, "-p", "A2B1",
                     "--out", str(tmp_path / "rehearsal"), timeout=300)
    assert res.returncode == 0, res.stderr
    (rpath,) = (tmp_path / "rehearsal").glob("app.rehearsal-*.json")
    assert records.read(rpath).data.calls == 3 * (2 + 5 * ITERATIONS)


# The ring's exchange, waited for by polling (MPI_Testall, sleeping between polls, as the
# Gray-Scott simulation waits), then 5 ms of compute.
POLLED = f"""
import time
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()
into, out = np.empty(512, np.uint8), np.zeros(512, np.uint8)
for _ in range({ITERATIONS}):
    reqs = [comm.Irecv(into, (me - 1) % n, 0), comm.Isend(out, (me + 1) % n, 0)]
    while not MPI.Request.Testall(reqs):
        time.sleep(0.0002)
    end = time.perf_counter() + 0.005
    while time.perf_counter() < end:
        pass
"""


@needs_root
@pytest.mark.root
def test_polling_until_done_is_a_wait(fed, tmp_path):
    """The polls of a Testall loop are one waitall of its requests, and the compute stays compute."""
    (tmp_path / "polled.py").write_text(POLLED)
    d = profile(fed, "A3", tmp_path / "profile", sys.executable, str(tmp_path / "polled.py")).data
    for r, rank in enumerate(d.ranks):
        assert patterns(rank) == {("irecv", (r - 1) % 3, -1, 512, 0, ITERATIONS),
                                  ("isend", (r + 1) % 3, -1, 512, 0, ITERATIONS),
                                  ("waitall", -1, -1, 0, 2, ITERATIONS)}
        assert rank["iterations"] == ITERATIONS and len(rank["iteration"]) == 3
        gaps = {p["kind"]: p["gap_s"] for p in rank["patterns"]}
        assert gaps["irecv"] >= (ITERATIONS - 1) * 0.005  # the compute before the next exchange
        # the polls are the wait: before it only the loop's own Python, less than the compute
        assert gaps["waitall"] < gaps["irecv"]
        waitall = next(p for p in rank["patterns"] if p["kind"] == "waitall")
        assert waitall["overlapped"] == 0 and all(p["overlapped"] == ITERATIONS for p in rank["patterns"]
                                                  if p["kind"] in ("irecv", "isend"))
        # the intervals between the polls lie inside the waits, and every one holds a 0.2 ms sleep
        assert 0 <= waitall["poll_s"] <= waitall["inside_s"]
        if waitall["poll_s"]:
            assert waitall["poll_sq"] / (2 * waitall["poll_s"]) >= 0.0001
        # how it polled: every interval holds a sleep, so no spin before the first; the waits
        # that polled more than once slept, each sleep at least the 0.2 ms asked for
        assert waitall["spin_s"] == 0
        assert (waitall["slept"] > 0) == (waitall["poll_s"] > 0)
        assert waitall["sleep_s"] == pytest.approx(waitall["poll_s"])
        assert waitall["sleep_s"] >= 0.0002 * waitall["sleeps"] >= 0.0002 * waitall["slept"]
        assert all(p["poll_s"] == p["poll_sq"] == p["slept"] == 0 for p in rank["patterns"] if p["kind"] != "waitall")


# Rank r computes r x 20 ms, then waits in a barrier by polling it asleep, as geofed's
# quiet barrier does (a rank done early leaves its core to the others); ITERATIONS times.
QUIET = f"""
import time
from mpi4py import MPI
comm = MPI.COMM_WORLD
for _ in range({ITERATIONS}):
    end = time.perf_counter() + 0.02 * comm.Get_rank()
    while time.perf_counter() < end:
        pass
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.0005)
"""


@needs_root
@pytest.mark.root
def test_a_barrier_polled_asleep_is_profiled_and_rehearsed_as_one(fed, tmp_path):
    """The nonblocking barrier and the wait its polls make; rehearsed, the early ranks wait
    for the last one's compute, asleep (before the profiler knew MPI_Ibarrier, the replay's
    wait had nothing to complete and rank 0 ran ahead)."""
    (tmp_path / "quiet.py").write_text(QUIET)
    d = profile(fed, "A3", tmp_path / "profile", sys.executable, str(tmp_path / "quiet.py")).data
    for rank in d.ranks:
        assert patterns(rank) == {("ibarrier", -1, -1, 0, 3, ITERATIONS), ("wait", -1, -1, 0, 1, ITERATIONS)}
    wait0 = next(p for p in d.ranks[0]["patterns"] if p["kind"] == "wait")
    # rank 0 waited for rank 2's compute (40 ms a round, less whatever held rank 0 up
    # before its wait: its own lag in seeing the barrier before, a wait for a core)
    assert wait0["slept"] > 0 and wait0["inside_s"] >= ITERATIONS * 0.04 / 2
    # rank 2's compute: 7 x 40 ms of wall time, its CPU time less by any wait for a core
    last = sum(p["gap_cpu_s"] for p in d.ranks[2]["patterns"])
    assert last >= ITERATIONS * 0.04 / 2
    (path,) = (tmp_path / "profile").glob("app.profile-*.json")
    res = run_geofed("rehearse", str(path), "-f", fed, "-p", "A3", "--out", str(tmp_path / "rehearsal"), timeout=300)
    assert res.returncode == 0, res.stderr
    (rehearsal,) = (tmp_path / "rehearsal").glob("app.rehearsal-*.json")
    r = records.read(rehearsal).data
    # (less what rank 0 may have been held up leaving the replay's start barrier, three ranks on two cores)
    assert r.rank_s[0] >= 0.9 * last, (r.rank_s, last)
    assert r.rank_cpu_s[0] < last / 2, (r.rank_cpu_s, last)


# Non-blocking collectives, each completed by its own wait: an allreduce of four doubles, a
# broadcast of 100 bytes from rank 1, a gather of rank r's r + 1 ints (a v form: its own block,
# 4 (r + 1) bytes), a one-int alltoall; ITERATIONS times.
NONBLOCKING = f"""
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()
counts = [r + 1 for r in range(n)]
for _ in range({ITERATIONS}):
    comm.Iallreduce(np.ones(4), np.empty(4)).Wait()
    comm.Ibcast(np.zeros(100, np.uint8), root=1).Wait()
    comm.Igatherv(np.zeros(me + 1, np.int32), [np.empty(sum(counts), np.int32), counts], root=0).Wait()
    comm.Ialltoall(np.zeros(n, np.int32), np.empty(n, np.int32)).Wait()
"""


@needs_root
@pytest.mark.root
def test_nonblocking_collectives_are_profiled_and_rehearsed(fed, tmp_path):
    (tmp_path / "nonblocking.py").write_text(NONBLOCKING)
    d = profile(fed, "A3", tmp_path / "profile", sys.executable, str(tmp_path / "nonblocking.py")).data
    for r, rank in enumerate(d.ranks):
        assert patterns(rank) == {("iallreduce", -1, -1, 32, 3, ITERATIONS), ("ibcast", 1, -1, 100, 3, ITERATIONS),
                                  ("igather", 0, -1, 4 * (r + 1), 3, ITERATIONS),
                                  ("ialltoall", -1, -1, 4, 3, ITERATIONS), ("wait", -1, -1, 0, 1, 4 * ITERATIONS)}
    (path,) = (tmp_path / "profile").glob("app.profile-*.json")
    res = run_geofed("rehearse", str(path), "-f", fed, "-p", "A3", "--out", str(tmp_path / "rehearsal"), timeout=300)
    assert res.returncode == 0, res.stderr
    (rehearsal,) = (tmp_path / "rehearsal").glob("app.rehearsal-*.json")
    assert records.read(rehearsal).data.calls == 3 * 8 * ITERATIONS  # every call made, none left out


def waiting_profile(directory, slept: int) -> str:
    """Two ranks at A: rank 1 computes 40 ms, then sends 8 bytes to rank 0, which has posted
    its receive and waits for it, 5 times; with `slept`, a wait made by polling every 5 ms
    asleep (as POLLED's), else a blocking one."""
    def call(kind, peer, gap=0.0, size=0, **polls):
        return {"kind": kind, "peer": peer, "source": -1, "bytes": 0 if kind == "waitall" else 8, "size": size,
                "count": 5, "inside_s": 5e-6, "mean_s": 1e-6, "sd_s": 0.0, "min_s": 1e-6, "max_s": 1e-6,
                "gap_s": gap, "gap_cpu_s": gap, "overlap_s": 0.0, "overlapped": 0, "poll_s": 0.0,
                "poll_sq": 0.0} | polls

    polls = {"poll_s": 0.2, "poll_sq": 0.2 * 0.005, "slept": 5, "spin_s": 0.0, "sleeps": 40, "sleep_s": 0.2}
    ranks = [[call("irecv", 1), call("waitall", -1, size=1, **(polls if slept else {}))],
             [call("isend", 0, gap=5 * 0.04), call("waitall", -1, size=1)]]
    rec = records.make("app.profile", {
        "program": ["waiting"], "placement": "A2", "site": "A", "ranks_per_node": 1, "total_s": 0.2,
        "untracked_calls": 0,
        "ranks": [{"rank": r, "host": "vm", "node": f"A{r + 1}", "total_s": 0.2, "compute_s": 0.2 * r,
                   "comm_s": 1e-5, "tail_cpu_s": 0.0, "calls": 10, "prefix": [], "iteration": [0, 1],
                   "iterations": 5, "suffix": [], "patterns": patterns} for r, patterns in enumerate(ranks)]})
    return str(records.save(rec, directory))


@needs_root
@pytest.mark.root
def test_a_wait_made_asleep_is_rehearsed_asleep(fed, tmp_path):
    """Rank 0 waits 5 x 40 ms for rank 1's compute: replayed as the program waited, polling
    every 5 ms asleep, it takes little CPU; replayed blocking, MPICH's wait polls on the core."""
    cpu = {}
    for slept in (1, 0):
        res = run_geofed("rehearse", waiting_profile(tmp_path / f"profile{slept}", slept), "-f", fed, "-p", "A2",
                         "--out", str(tmp_path / f"rehearsal{slept}"), timeout=300)
        assert res.returncode == 0, res.stderr
        (path,) = (tmp_path / f"rehearsal{slept}").glob("app.rehearsal-*.json")
        d = records.read(path).data
        assert d.rank_cpu_s[1] >= 0.19  # rank 1's compute, spun for its CPU time
        cpu[slept] = d.rank_cpu_s[0]
    assert cpu[1] < 0.05 <= 0.1 <= cpu[0], cpu


@needs_root
@pytest.mark.root
def test_the_replays_own_work_between_calls_is_part_of_the_compute_it_replays(fed, tmp_path):
    """5,000 sends to MPI_PROC_NULL, 20 us of compute before each: the replay's CPU time is the
    profile's 0.1 s of compute, its own Python between the calls (10-20 us a call) counted in it."""
    send = {"kind": "send", "peer": -1, "source": -1, "bytes": 8, "size": 0, "count": 5000, "inside_s": 0.005,
            "mean_s": 1e-6, "sd_s": 0.0, "min_s": 1e-6, "max_s": 1e-6, "gap_s": 0.1, "gap_cpu_s": 0.1,
            "overlap_s": 0.0, "overlapped": 0, "poll_s": 0.0, "poll_sq": 0.0}
    rank = {"host": "vm", "total_s": 0.105, "compute_s": 0.1, "comm_s": 0.005, "tail_cpu_s": 0.0, "calls": 5000,
            "prefix": [], "iteration": [0], "iterations": 5000, "suffix": [], "patterns": [send]}
    rec = records.make("app.profile", {"program": ["sends"], "placement": "A2", "site": "A", "ranks_per_node": 1,
                                       "total_s": 0.105, "untracked_calls": 0,
                                       "ranks": [rank | {"rank": r, "node": f"A{r + 1}"} for r in range(2)]})
    res = run_geofed("rehearse", str(records.save(rec, tmp_path / "profile")), "-f", fed, "-p", "A2",
                     "--out", str(tmp_path / "rehearsal"), timeout=300)
    assert res.returncode == 0, res.stderr
    (path,) = (tmp_path / "rehearsal").glob("app.rehearsal-*.json")
    d = records.read(path).data
    assert d.calls == 2 * 5000
    assert all(0.1 <= cpu < 0.115 for cpu in d.rank_cpu_s), d.rank_cpu_s


PICKLED = """
from mpi4py import MPI
comm = MPI.COMM_WORLD
for _ in range(5):
    if comm.Get_rank() == 0:
        comm.send(b"x" * 100, 1)
    else:
        comm.recv(source=0)
"""


@needs_root
@pytest.mark.root
def test_mpi4py_pickled_messages(fed, tmp_path):
    """comm.recv is MPI_Mprobe then MPI_Mrecv: one recv, of the bytes the send sent."""
    (tmp_path / "pickled.py").write_text(PICKLED)
    d = profile(fed, "A2", tmp_path / "profile", sys.executable, str(tmp_path / "pickled.py")).data
    (send,), (recv,) = d.ranks[0]["patterns"], d.ranks[1]["patterns"]
    assert (send["kind"], send["peer"], send["count"]) == ("send", 1, 5)
    assert (recv["kind"], recv["peer"], recv["count"], recv["bytes"]) == ("recv", 0, 5, send["bytes"])


# Before each barrier 20 ms asleep, before each allreduce 20 ms of the process's CPU time.
SLEEP_THEN_COMPUTE = f"""
import time
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
for _ in range({ITERATIONS}):
    time.sleep(0.02)
    comm.Barrier()
    end = time.process_time() + 0.02
    while time.process_time() < end:
        pass
    comm.Allreduce(np.ones(1), np.empty(1))
"""


@needs_root
@pytest.mark.root
def test_a_gaps_cpu_time_is_its_compute_not_its_wall_time(fed, tmp_path):
    """The CPU time of the gaps: a sleep's is none of its wall time, a compute's is what it used."""
    (tmp_path / "sleep.py").write_text(SLEEP_THEN_COMPUTE)
    d = profile(fed, "A3", tmp_path / "profile", sys.executable, str(tmp_path / "sleep.py")).data
    for rank in d.ranks:
        gaps = {p["kind"]: p for p in rank["patterns"]}
        asleep, computing = gaps["barrier"], gaps["allreduce"]
        assert asleep["gap_s"] >= ITERATIONS * 0.02 and asleep["gap_cpu_s"] < ITERATIONS * 0.02 / 4
        assert ITERATIONS * 0.02 <= computing["gap_cpu_s"] <= computing["gap_s"]
        assert 0 <= rank["tail_cpu_s"] <= rank["total_s"]


@needs_root
@pytest.mark.root
def test_a_failing_program_named_by_its_path_ends_in_one_line_with_its_log(fed, tmp_path):
    # The line and the log's name carry the program's path: its slashes once made the
    # log's file name a directory that did not exist, and the user got a traceback.
    (tmp_path / "fail.py").write_text("from mpi4py import MPI\nimport sys\nsys.exit(3 if MPI.COMM_WORLD.rank == 1 else 0)\n")
    done = run_group([GEOFED, "profile", "-f", fed, "-p", "A3", "--no-cpu-limit", "--out", str(tmp_path / "out"),
                      "--", sys.executable, str(tmp_path / "fail.py")], timeout=120, cwd=tmp_path)
    line = done.stderr.splitlines()[-1]
    assert done.returncode == 1 and line.startswith("geofed: failed: profile of ") and "Traceback" not in done.stderr, \
        done.stderr
    assert "exited with status 3" in line, line
    log = tmp_path / line.rsplit("; log: ", 1)[1]
    assert log.parent == tmp_path / "geofed-out" / "logs" and log.stat().st_size > 0
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_spanning_placement_is_refused(tmp_path):
    res = run_geofed("profile", "-f", "icm-task", "-p", "W1G1", "--", "true")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "a profile is taken at one site" in res.stderr



THREE_SITES = """
name = "gftest-three"
[[site]]
code = "M"
nodes = 1
[[site]]
code = "F"
nodes = 1
[[site]]
code = "H"
nodes = 1
[[link]]
sites = ["M", "F"]
rtt_ms = 4
bandwidth_gbps = 1
[[link]]
sites = ["F", "H"]
rtt_ms = 2
bandwidth_gbps = 1
"""


def test_what_if_changes_one_link_or_all(write_fed):
    from geofed.model import whatif
    fed = federation.load(write_fed(THREE_SITES))
    one = whatif.apply(fed, ["link.M-F.bandwidth=10x"])
    assert [l.bandwidth_gbps for l in one.links] == [10.0, 1.0]
    every = whatif.apply(fed, ["link.rtt_ms=8"])
    assert [l.rtt_ms for l in every.links] == pytest.approx([8.0, 8.0])
    with pytest.raises(UserError, match="has no link M-H; its links: M-F, F-H"):
        whatif.apply(fed, ["link.M-H.loss=0.1"])


def test_the_iteration_is_found_in_the_order_of_calls():
    from geofed.apps.profile import iteration
    order = [9, 8] + [1, 2, 3] * 5 + [1, 7]
    assert iteration(order, len(order)) == ([9, 8], [1, 2, 3], 5, [1, 7])
    # more calls than the library kept: the period goes on to the end
    kept = [5] + [1, 2] * 10
    assert iteration(kept, 1 + 2 * 50 + 1) == ([5], [1, 2], 50, [1])
    assert iteration([4, 5, 6], 3) == ([4, 5, 6], [], 0, [])


@needs_root
@needs_openmpi
@pytest.mark.root
def test_a_ring_profile_under_open_mpi(fed, tmp_path, monkeypatch):
    """Open MPI 4.1 has no MPI-4 large-count calls: the profiler built for it wraps the others,
    and the ring's profile is the same as under MPICH."""
    monkeypatch.setenv("GEOFED_MPI", "openmpi")
    (tmp_path / "ring.py").write_text(RING)
    rec = profile(fed, "A3", tmp_path / "profile", sys.executable, str(tmp_path / "ring.py"))
    assert [r for r, rank in enumerate(rec.data.ranks) if patterns(rank) != ring_patterns(r, 3)] == []
