"""Real Slurm on the testbed (Debian's slurmctld/slurmd and MUNGE, as geofed's children):
the nodes and their sites as Slurm sees them, an MPI job through `geofed run` inside an
allocation, site confinement enforced by Slurm, and `down` leaving nothing behind."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import GEOFED, needs_root, no_leftovers, run_group, two_site_federation
from geofed import federation
from geofed.testbed import slurm
from geofed.testbed import core, host, services

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("slurmctld") is None, reason="Slurm not installed (./setup.sh)")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    name = f"gfslurm-{os.getpid()}"
    path = tmp_path_factory.mktemp("slurm") / "fed.toml"
    path.write_text(two_site_federation(name, rtt_ms=9.0, gbps=1.0))
    fed = federation.load(path)
    try:
        core.up(fed)
        slurm.up(fed)
        yield fed
    finally:
        slurm.down(name)
        core.down(name)
    assert no_leftovers(name) == []


def client(fed, *argv, timeout=120):
    plan, c = slurm.require_up(fed)
    return run_group(slurm.client_argv(plan, c, list(argv)), timeout, env=dict(os.environ, **slurm.client_env(plan, c)))


def ours(d) -> list[int]:
    """Every process that belongs to the Slurm under `d`: daemons, steps, tasks."""
    every = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    return host.pids_with_env(every, services.ENV_MARK, str(d)) + \
        host.pids_with_env(every, "SLURM_CONF", str(d / "slurm.conf"))


def test_sinfo_lists_every_node_with_its_site_and_own_feature(cluster):
    res = client(cluster, "sinfo", "-h", "-N", "-o", "%N %f %t")
    assert res.returncode == 0, res.stderr
    rows = {line.split()[0]: line.split()[1:] for line in res.stdout.splitlines()}
    assert {n: f for n, (f, _) in rows.items()} == {"A1": "site_A,node_A1", "A2": "site_A,node_A2",
                                                     "B1": "site_B,node_B1"}
    assert all(state == "idle" for _, state in rows.values())


def test_mpi_pingpong_in_an_allocation_crosses_the_link(cluster, tmp_path):
    out = tmp_path / "pp.json"
    res = client(cluster, "salloc", "-N", "2", "-C", "[site_A*1&site_B*1]", GEOFED, "run", "-f", str(cluster.path),
                 "-p", "A1B1", "--", os.path.join(os.path.dirname(GEOFED), "python"), "-m", "geofed.bench.pingpong",
                 "--seconds", "1", "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads(out.read_text())["data"]
    # The ranks ran on their nodes at both sites, as Slurm named them.
    assert sorted(r["node"] for r in data["ranks"]) == ["A1", "B1"]
    (pair,) = data["pairs"]
    assert pair["class"] == "inter-site"
    # Latency by its minimum (the machine is shared): within 5 % of the model.
    assert pair["min_ms"] == pytest.approx(pair["model_rtt_ms"], rel=0.05), pair


def test_a_job_stays_at_one_site_unless_it_asks_to_span(cluster):
    for _ in range(3):
        res = client(cluster, "srun", "-N", "2", "printenv", "SLURMD_NODENAME")
        assert res.returncode == 0, res.stderr
        nodes = res.stdout.split()
        assert len(nodes) == 2 and len({n[0] for n in nodes}) == 1, nodes
    # 3 nodes exist only across both sites: refused, and Slurm says why.
    res = client(cluster, "srun", "-N", "3", "--immediate=5", "true")
    assert res.returncode != 0 and "Requested node configuration is not available" in res.stderr
    res = client(cluster, "srun", "-N", "3", "-C", "[site_A*2&site_B*1]", "printenv", "SLURMD_NODENAME")
    assert res.returncode == 0 and sorted(res.stdout.split()) == ["A1", "A2", "B1"], res.stderr


def test_submit_keeps_a_job_at_one_site_and_spans_only_when_asked(cluster, tmp_path):
    from conftest import run_geofed
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A1B1", "--", "true")
    assert res.returncode == 2 and "--span" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    out = tmp_path / "job.out"
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A1B1", "--span", "--output", str(out), "--",
                     os.path.join(os.path.dirname(GEOFED), "python"), "-c",
                     "from geofed import runtime; print(runtime.node())")
    assert res.returncode == 0, res.stderr
    job = res.stdout.split()[2].rstrip(":")
    deadline = time.monotonic() + 120
    while client(cluster, "squeue", "-h", "-j", job).stdout.strip():  # poll until the job has left the queue
        assert time.monotonic() < deadline, "the submitted job did not finish"
        time.sleep(0.2)
    assert sorted(out.read_text().split()) == ["A1", "B1"]


def test_submit_of_a_named_node_runs_there(cluster, tmp_path):
    from conftest import run_geofed
    # On an idle cluster Slurm hands out A1 first; the node's own feature asks for A2.
    out = tmp_path / "job.out"
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A[2]", "--output", str(out), "--",
                     os.path.join(os.path.dirname(GEOFED), "python"), "-c",
                     "from geofed import runtime; print(runtime.node(), runtime.placement())")
    assert res.returncode == 0, res.stderr
    assert "(node_A2)" in res.stdout
    job = res.stdout.split()[2].rstrip(":")
    deadline = time.monotonic() + 120
    while client(cluster, "squeue", "-h", "-j", job).stdout.strip():  # poll until the job has left the queue
        assert time.monotonic() < deadline, "the submitted job did not finish"
        time.sleep(0.2)
    assert out.read_text().split() == ["A2", "A[2]"]


def small(tmp_path, tag: str):
    """A 2+1 node federation of its own for a test that breaks things."""
    path = tmp_path / "fed.toml"
    path.write_text(two_site_federation(f"gfslurm{tag}-{os.getpid()}", rtt_ms=1.0))
    return federation.load(path)


def test_down_after_a_crash_leaves_no_daemon_job_or_file(tmp_path):
    fed = small(tmp_path, "x")
    name = fed.name
    try:
        plan = core.up(fed)
        (c,) = slurm.up(fed)
        d = slurm.cluster_dir(plan, c)
        # A job running, and the controller killed under it.
        job = subprocess.Popen(slurm.client_argv(plan, c, ["srun", "-N", "1", "sleep", "300"]),
                               env=dict(os.environ, **slurm.client_env(plan, c)), start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not any(Path(f"/proc/{p}/comm").read_text().strip() == "sleep" for p in ours(d) if host.alive(p)):
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.1)
        os.kill(slurm.read_state(plan, c)["daemons"]["slurmctld"]["pid"], signal.SIGKILL)
        removed = slurm.down(name)
        job.wait(timeout=30)
        assert removed and ours(d) == [] and not d.exists()
    finally:
        slurm.down(name)
        core.down(name)
    assert no_leftovers(name) == []


def test_a_failed_up_leaves_nothing(tmp_path):
    fed = small(tmp_path, "f")
    name = fed.name
    try:
        plan = core.up(fed)
        login = plan.node("A1")
        # Something else holds the controller's port on the login node.
        squatter = host.spawn_ready(host.in_netns(login.netns, [
            os.path.join(os.path.dirname(GEOFED), "python"), "-c",
            "import socket,time\ns=socket.socket(); s.bind(('%s', %d)); s.listen(); print('ready', flush=True)\n"
            "time.sleep(600)" % (login.address, slurm.CTLD_PORT)]))
        try:
            with pytest.raises(host.HostError, match="port 6817 on node A1 .* is taken"):
                slurm.up(fed)
        finally:
            host.terminate([squatter.pid])
            squatter.wait()
        d = slurm.cluster_dir(plan, slurm.federated(fed))
        assert not d.exists() and ours(d) == []
    finally:
        core.down(name)
    assert no_leftovers(name) == []


def test_the_schedule_experiment_runs_one_stream_both_ways_and_no_job_spans(monkeypatch):
    from geofed.ops import schedule
    monkeypatch.setattr(schedule, "progress", lambda m: None)
    base = federation.load("icm-task")
    data = schedule.run(base, seed=3, window_s=12.0, single_load=0.5, mpi_load=1.3)
    names = sorted(j["name"] for j in data["stream"])
    for mode, m in data["modes"].items():
        assert sorted(r["name"] for r in m["jobs"]) == names, mode  # every job, from Slurm's own log
        assert all(len(r["ran_at"]) == 1 and r["state"] == "COMPLETED" for r in m["jobs"]), mode
        assert all(r["start"] >= r["submit"] and r["end"] > r["start"] for r in m["jobs"])
    assert data["modes"]["separate"]["spilled"] == 0  # separate clusters: every job at home
    assert no_leftovers("schedbench") == []
