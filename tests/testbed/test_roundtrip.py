"""The testbed for real: namespaces, the native link emulator, MPI across sites, cleanup.

Needs root. Every test leaves the host as it found it; `no_leftovers` checks that
nothing of ours (namespace, cgroup, /etc/netns entry, state, process) survives.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import GEOFED, needs_root, no_leftovers, run_geofed, two_site_federation
from geofed import federation
from geofed.testbed import core, host
from geofed.testbed.plan import make_plan

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow]

SMALL = two_site_federation("gftest-small", rtt_ms=4)


def emulator_pids(fed) -> list[int]:
    return [e["pid"] for e in core.read_state(make_plan(fed))["emulators"].values()]


@pytest.fixture
def small(write_fed):
    path = write_fed(SMALL, "small.toml")
    yield path
    core.down("gftest-small")


@pytest.fixture(scope="module")
def icm():
    fed = federation.load("icm-task")
    core.down(fed.name)
    res = run_geofed("testbed", "up", "icm-task")
    assert res.returncode == 0, res.stderr
    yield fed
    res = run_geofed("testbed", "down", "icm-task")
    assert res.returncode == 0
    assert no_leftovers("icm-task") == []


def test_mpi_job_across_two_sites_sees_the_configured_rtt(icm, tmp_path):
    out = tmp_path / "pp.json"
    res = run_geofed("run", "--placement", "W2G1", "--no-cpu-limit", "--timeout", "300", "--",
                     sys.executable, "-m", "geofed.bench.pingpong", "--out", str(out))
    assert res.returncode == 0, res.stderr
    rec = json.loads(out.read_text())
    pairs = {p["class"]: p for p in rec["data"]["pairs"]}
    model = 2 * icm.one_way_ms("W", "G")
    assert abs(pairs["inter-site"]["median_ms"] - model) <= 0.05 * model
    assert pairs["intra-site"]["median_ms"] < 1.0
    nodes = [r["node"] for r in rec["data"]["ranks"]]
    assert nodes == ["W1", "W2", "G1"]


def test_tcp_bulk_transfer_is_timed_to_its_last_acknowledgement(icm):
    from geofed.testbed import probe
    plan = make_plan(icm)
    nbytes = 8 << 20
    mbps = probe.throughput_mbps(plan.node("G1"), plan.node("W1"), streams=1, nbytes=nbytes)
    # Nothing is acknowledged before a round trip, and the link serialises at its rate:
    # a figure above this bound counted written bytes, not acknowledged ones.
    link = icm.links[0]
    bound = nbytes * 8 / 1e6 / (link.rtt_ms / 1e3 + nbytes * 8 / (link.bandwidth_gbps * 1e9))
    assert 0 < mbps < bound


def test_up_twice_is_harmless(icm):
    before = emulator_pids(icm)
    res = run_geofed("testbed", "up", "icm-task")
    assert res.returncode == 0 and "already up" in res.stderr
    assert emulator_pids(icm) == before and all(host.alive(p) for p in before)


def test_ranks_get_their_node_cpu_share_unless_told_not_to(icm):
    res = run_geofed("run", "--placement", "G1", "--", "cat", "/proc/self/cgroup")
    assert res.returncode == 0
    assert "geofed/icm-task/G1" in res.stdout
    res = run_geofed("run", "--placement", "G1", "--no-cpu-limit", "--", "cat", "/proc/self/cgroup")
    assert res.returncode == 0
    assert "geofed/icm-task/G1" not in res.stdout


def test_a_finished_job_shows_all_of_its_output(icm):
    # The copier used to stop showing as soon as mpiexec exited, cutting off what was
    # still in the pipe (seen: one line of /proc/self/cgroup's ten).
    res = run_geofed("run", "--placement", "G1", "--", "seq", "1", "200000")
    assert res.returncode == 0
    assert res.stdout.split() == [str(i) for i in range(1, 200001)]


def test_a_timed_out_job_leaves_no_rank_behind(icm):
    res = run_geofed("run", "--placement", "W1G1", "--timeout", "3", "--", "sleep", "600")
    assert res.returncode == 124 and "--timeout 3" in res.stderr
    plan = make_plan(icm)
    for node in ("W1", "G1"):
        left = [p for p in host.netns_pids(plan.node(node).netns) if "sleep" in open(f"/proc/{p}/cmdline").read()]
        assert left == []


def test_verify_passes_and_down_removes_everything(small, tmp_path):
    assert run_geofed("testbed", "up", str(small)).returncode == 0
    res = run_geofed("testbed", "verify", str(small), "--count", "100", "--seconds", "2", "--out", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all pairs within tolerance" in res.stdout
    data = json.loads(next(tmp_path.glob("testbed.verify-*.json")).read_text())["data"]
    cpu = {p["class"]: p["host_cpu_ms_per_MB"] for p in data["pairs"]}
    # the emulator's packet sockets and store-and-forward cost the host CPU a path inside a site does not
    assert 0 < cpu["intra-site"] < cpu["inter-site"] and data["host_cores"] == os.cpu_count()
    pids = emulator_pids(federation.load(small))
    assert run_geofed("testbed", "down", str(small)).returncode == 0
    assert no_leftovers("gftest-small") == []
    assert not any(host.alive(p) for p in pids)
    res = run_geofed("testbed", "status", str(small))
    assert res.returncode == 1 and "down" in res.stdout


def test_down_after_a_crash(small):
    fed = federation.load(small)
    core.up(fed)
    plan = make_plan(fed)
    # A crash: the emulator is killed and one namespace vanished behind our back.
    for pid in emulator_pids(fed):
        os.kill(pid, signal.SIGKILL)
    host.ip("netns", "del", plan.node("A2").netns)
    assert not core.is_up(plan)
    assert run_geofed("testbed", "down", str(small)).returncode == 0
    assert no_leftovers("gftest-small") == []


def test_up_over_leftovers_rebuilds(small):
    fed = federation.load(small)
    host.ip("netns", "add", make_plan(fed).node("A1").netns)  # a stray from an earlier crash
    res = run_geofed("testbed", "up", str(small))
    assert res.returncode == 0 and "half-built" in res.stderr
    assert core.is_up(make_plan(fed))


@pytest.mark.parametrize("stage", ["creating", "starting the link emulator"])
def test_ctrl_c_during_up_leaves_nothing(small, stage):
    proc = subprocess.Popen([GEOFED, "testbed", "up", str(small)], stderr=subprocess.PIPE, text=True)
    # Wait until up reports the stage (namespaces being made; the emulator starting
    # and its floor being measured), then interrupt it like a user would.
    for line in proc.stderr:
        if stage in line:
            break
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert no_leftovers("gftest-small") == []


def test_unknown_placement_leaves_the_testbed_alone(icm):
    res = run_geofed("run", "--placement", "W9", "--", "true")
    assert res.returncode == 2
    assert core.is_up(make_plan(icm))
