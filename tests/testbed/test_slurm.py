"""Real Slurm on the testbed (Debian's slurmctld/slurmd and MUNGE, as geofed's children):
the nodes and their sites as Slurm sees them, an MPI job through `geofed run` inside an
allocation, site confinement enforced by Slurm whichever way a job asks for nodes, jobs
that know their site and run as the user who submitted them, and `down` leaving nothing
behind."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import GEOFED, needs_root, no_leftovers, run_group, slurm_testbed, two_site_federation
from geofed import federation
from geofed.testbed import slurm
from geofed.testbed import core, host, services

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("slurmctld") is None, reason="Slurm not installed (./setup.sh)")]


@pytest.fixture(scope="module")
def cluster():
    with slurm_testbed(two_site_federation(f"gfslurm-{os.getpid()}", rtt_ms=9.0, gbps=1.0)) as fed:
        yield fed


def client(fed, *argv, timeout=120):
    plan, c = slurm.require_up(fed)
    return run_group(slurm.client_argv(plan, c, list(argv)), timeout, env=dict(os.environ, **slurm.client_env(plan, c)))


def home(fed) -> Path:
    plan, c = slurm.require_up(fed)
    return slurm.home(plan, c)


def wait_done(fed, job: str) -> None:
    deadline = time.monotonic() + 120
    while client(fed, "squeue", "-h", "-j", job).stdout.strip():  # poll until the job has left the queue
        assert time.monotonic() < deadline, f"job {job} did not finish"
        time.sleep(0.2)


def ran_on(out: str) -> list[tuple[str, str]]:
    """(node, site) of every task, from their `printenv GEOFED_NODE GEOFED_SITE`."""
    words = out.split()
    return sorted(zip(words[0::2], words[1::2]))


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


def test_mpi_pingpong_in_an_allocation_crosses_the_link(cluster, mpi_choice):
    # srun starts the ranks: with PMI-2 under MPICH, PMIx under Open MPI
    out = home(cluster) / f"pp-{mpi_choice}.json"
    res = client(cluster, "env", f"GEOFED_MPI={mpi_choice}", "salloc", "-N", "2", "-C", "[site_A*1&site_B*1]", GEOFED,
                 "run", "-f", str(cluster.path), "-p", "A1B1", "--", os.path.join(os.path.dirname(GEOFED), "python"),
                 "-m", "geofed.bench.pingpong", "--seconds", "1", "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads(out.read_text())["data"]
    assert data["mpi_library"].startswith({"mpich": "MPICH", "openmpi": "Open MPI"}[mpi_choice])
    # The ranks ran on their nodes at both sites, as Slurm named them.
    assert sorted(r["node"] for r in data["ranks"]) == ["A1", "B1"]
    (pair,) = data["pairs"]
    assert pair["class"] == "inter-site"
    # Latency by its minimum (the machine is shared): within 5 % of the model.
    assert pair["min_ms"] == pytest.approx(pair["model_rtt_ms"], rel=0.05), pair


TASKS = ("printenv", "GEOFED_NODE", "GEOFED_SITE")


def test_a_job_naming_no_site_stays_at_one(cluster):
    for _ in range(3):
        res = client(cluster, "srun", "-N", "2", *TASKS)
        assert res.returncode == 0, res.stderr
        assert ran_on(res.stdout) == [("A1", "A"), ("A2", "A")]  # B has one node: only A holds two
    # 3 nodes exist only across both sites: refused, and Slurm says why.
    res = client(cluster, "srun", "-N", "3", "--immediate=5", "true")
    assert res.returncode != 0 and "Requested node configuration is not available" in res.stderr


REFUSED_ACROSS_SITES = "geofed: this job names sites A, B"


@pytest.mark.parametrize("argv, refusal", [
    # A node list across sites, from each client.
    (["srun", "-w", "A1,B1", *TASKS], REFUSED_ACROSS_SITES),
    (["srun", "-w", "A[1-2],B1", *TASKS], REFUSED_ACROSS_SITES),
    (["salloc", "-w", "A1,B1", "true"], REFUSED_ACROSS_SITES),
    (["sbatch", "-w", "A1,B1", "--wrap", "true"], REFUSED_ACROSS_SITES),
    (["srun", "-C", "site_A", "-w", "B1", *TASKS], REFUSED_ACROSS_SITES),
    # An OR of sites, or of nodes at two sites, becomes Slurm's matching OR: 3 nodes are at no one site.
    (["srun", "-N", "3", "-C", "site_A|site_B", "--immediate=5", *TASKS], "Requested node configuration"),
    (["srun", "-N", "2", "-C", "node_A1|node_B1", "--immediate=5", *TASKS], "Requested node configuration"),
    # Excluding A2 leaves two nodes only across the sites.
    (["srun", "-N", "2", "-x", "A2", "--immediate=5", *TASKS], "Requested node configuration"),
    # A heterogeneous job: its components at two sites, or at none named.
    (["srun", "-N", "1", "-C", "site_A", *TASKS, ":", "-N", "1", "-C", "site_B", *TASKS],
     "components of this heterogeneous job name sites A and B"),
    (["srun", "-w", "A1", *TASKS, ":", "-w", "B1", *TASKS], "components of this heterogeneous job name sites A and B"),
    (["srun", "-N", "1", *TASKS, ":", "-N", "1", *TASKS], "a heterogeneous job runs at one site"),
], ids=["srun -w", "srun -w range", "salloc -w", "sbatch -w", "-C a -w b", "-C a|b", "-C node OR", "--exclude", "hetjob -C",
        "hetjob -w", "hetjob unnamed"])
def test_no_way_puts_a_job_on_two_sites(cluster, argv, refusal):
    res = client(cluster, *argv)
    assert res.returncode != 0 and res.stdout == "", res.stdout
    assert refusal in res.stderr, res.stderr


@pytest.mark.parametrize("argv, nodes", [
    # A node list at one site: the job gets its other nodes there.
    (["srun", "-N", "2", "-w", "B1", "--immediate=5", *TASKS], None),
    (["srun", "-N", "2", "-w", "A2", *TASKS], [("A1", "A"), ("A2", "A")]),
    (["srun", "-N", "2", "-C", "site_A|site_B", *TASKS], [("A1", "A"), ("A2", "A")]),
    (["srun", "-N", "1", "-x", "A1,A2", *TASKS], [("B1", "B")]),
    (["srun", "-N", "1", "-C", "site_A", *TASKS, ":", "-w", "A2", *TASKS], [("A1", "A"), ("A2", "A")]),
], ids=["-w one node, more asked", "-w one node", "-C a|b", "--exclude", "hetjob at one site"])
def test_a_job_at_one_site_runs_there(cluster, argv, nodes):
    res = client(cluster, *argv)
    if nodes is None:  # B has one node: two there are refused, never made up from A
        assert res.returncode != 0 and "Requested node configuration" in res.stderr, res.stdout + res.stderr
    else:
        assert res.returncode == 0, res.stderr
        assert ran_on(res.stdout) == nodes


def test_a_pending_job_cannot_be_moved_across_sites(cluster):
    res = client(cluster, "sbatch", "--parsable", "--hold", "-w", "A1", "--wrap", "true")
    assert res.returncode == 0, res.stderr
    job = res.stdout.strip()
    try:
        res = client(cluster, "scontrol", "update", f"JobId={job}", "ReqNodeList=A1,B1", "NumNodes=2")
        assert res.returncode != 0
        shown = client(cluster, "scontrol", "show", "job", job).stdout
        assert "ReqNodeList=A1 " in shown and "Features=site_A " in shown, shown
    finally:
        client(cluster, "scancel", job)


def test_every_task_of_a_job_array_stays_at_one_site(cluster):
    res = client(cluster, "sbatch", "--parsable", "--array=0-3", "-N", "2", "-o", "array-%A-%a.out",
                 "--wrap", "srun " + " ".join(TASKS))
    assert res.returncode == 0, res.stderr
    job = res.stdout.strip()
    wait_done(cluster, job)
    for task in range(4):
        nodes = ran_on((home(cluster) / f"array-{job}-{task}.out").read_text())
        assert len(nodes) == 2 and len({site for _, site in nodes}) == 1, (task, nodes)


def test_a_job_spans_when_it_asks_with_counts(cluster):
    res = client(cluster, "srun", "-N", "3", "-C", "[site_A*2&site_B*1]", *TASKS)
    assert res.returncode == 0 and ran_on(res.stdout) == [("A1", "A"), ("A2", "A"), ("B1", "B")], res.stderr
    res = client(cluster, "srun", "-N", "2", "-C", "[node_A1*1&node_B1*1]", *TASKS)
    assert res.returncode == 0 and ran_on(res.stdout) == [("A1", "A"), ("B1", "B")], res.stderr


def test_a_plain_srun_tells_every_task_its_site_and_node(cluster):
    res = client(cluster, "srun", "-w", "B1", "printenv", "GEOFED_SITE")
    assert res.returncode == 0 and res.stdout == "B\n", res.stderr
    python = os.path.join(os.path.dirname(GEOFED), "python")
    res = client(cluster, "srun", "-N", "2", python, "-c", "from geofed import runtime; print(runtime.node(), runtime.site())")
    assert res.returncode == 0 and ran_on(res.stdout) == [("A1", "A"), ("A2", "A")], res.stderr


def test_a_job_runs_as_the_user_who_submitted_it(cluster):
    plan, c = slurm.require_up(cluster)
    user = slurm.user(cluster.name, c)
    assert user != "root"
    res = client(cluster, "srun", "-N", "1", "id", "-un")
    assert res.returncode == 0 and res.stdout == f"{user}\n", res.stderr
    res = client(cluster, "sbatch", "--parsable", "-o", "whoami-%j.out", "--wrap", "id -un")
    job = res.stdout.strip()
    wait_done(cluster, job)
    assert (home(cluster) / f"whoami-{job}.out").read_text() == f"{user}\n"


def submitted(res) -> tuple[str, Path]:
    """The job id and output file `geofed submit` printed."""
    assert res.returncode == 0, res.stderr
    words = res.stdout.split()
    return words[2].rstrip(":"), Path(words[-1])


def test_submit_keeps_a_job_at_one_site_and_spans_only_when_asked(cluster):
    from conftest import run_geofed
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A1B1", "--", "true")
    assert res.returncode == 2 and "--span" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A1B1", "--span", "--",
                     os.path.join(os.path.dirname(GEOFED), "python"), "-c",
                     "from geofed import runtime; print(runtime.node(), runtime.site())")
    job, out = submitted(res)
    # The output file as Slurm names it: in the user's home, the job's id filled in.
    assert out == home(cluster) / f"geofed-job-{job}.out"
    wait_done(cluster, job)
    assert ran_on(out.read_text()) == [("A1", "A"), ("B1", "B")]


def test_submit_of_a_named_node_runs_there(cluster):
    from conftest import run_geofed
    # On an idle cluster Slurm hands out A1 first; the node's own feature asks for A2.
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A[2]", "--", os.path.join(os.path.dirname(GEOFED), "python"),
                     "-c", "from geofed import runtime; print(runtime.node(), runtime.placement())")
    assert "(node_A2)" in res.stdout
    job, out = submitted(res)
    wait_done(cluster, job)
    assert out.read_text().split() == ["A2", "A[2]"]


def test_submit_without_a_federation_uses_the_testbed_whose_slurm_is_up(cluster):
    from conftest import run_geofed
    res = run_group([GEOFED, "submit", "-p", "B1", "--", "id", "-un"], 60,
                    env=dict(os.environ, GEOFED_TESTBED=cluster.name))
    job, out = submitted(res)
    wait_done(cluster, job)
    plan, c = slurm.require_up(cluster)
    assert out.read_text() == f"{slurm.user(cluster.name, c)}\n"
    # With no testbed named, this one, unless others have Slurm up too: then they are named.
    res = run_geofed("submit", "-p", "B1", "--", "true")
    assert res.returncode == 0 or (res.returncode == 2 and cluster.name in res.stderr and "choose one with -f"
                                   in res.stderr), res.stderr
    res = run_group([GEOFED, "submit", "-p", "B1", "--", "true"], 60, env=dict(os.environ, GEOFED_TESTBED="gfnone"))
    assert res.returncode == 2 and "no testbed here has Slurm up" in res.stderr


def test_submit_refuses_an_output_the_user_cannot_write(cluster, tmp_path):
    from conftest import run_geofed
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A1", "--output", str(tmp_path / "x.out"), "--", "true")
    assert res.returncode == 2 and f"cannot write to {tmp_path}" in res.stderr, res.stderr


def synthetic_profile(directory: Path, compute_s: float, iterations: int = 10) -> Path:
    """An app.profile of two ranks at site A, one per node, that compute `compute_s` and then
    exchange 8 bytes with each other, `iterations` times: across the link each exchange waits
    one way of the round trip, so the slowdown is about RTT / 2 / compute_s."""
    from geofed import records
    ranks = [{"rank": r, "host": "vm", "node": f"A{r + 1}", "total_s": iterations * compute_s,
              "compute_s": iterations * compute_s, "comm_s": iterations * 1e-5, "calls": iterations, "prefix": [],
              "iteration": [0], "iterations": iterations, "suffix": [],
              "patterns": [{"kind": "sendrecv", "peer": 1 - r, "source": 1 - r, "bytes": 8, "size": 0,
                            "count": iterations, "inside_s": iterations * 1e-5, "mean_s": 1e-5, "sd_s": 1e-6,
                            "min_s": 1e-5, "max_s": 1e-5, "gap_s": iterations * compute_s, "overlap_s": 0.0,
                            "overlapped": 0}]} for r in range(2)]
    rec = records.make("app.profile", {"program": ["exchange"], "placement": "A2", "site": "A", "ranks_per_node": 1,
                                       "total_s": iterations * compute_s, "ranks": ranks, "untracked_calls": 0})
    return records.save(rec, directory)


@pytest.mark.parametrize("slowdown, spans", [(5, True), (50, False)])
def test_submit_with_a_profile_spans_only_below_the_federations_threshold(cluster, tmp_path, slowdown, spans):
    """The link's round trip is 9 ms: an exchange after every 90 ms of compute is slowed by about
    5 %, after every 9 ms by about 50 %; the federation's threshold is the default, 10 %."""
    from conftest import run_geofed
    from geofed import records
    profile = synthetic_profile(tmp_path, compute_s=cluster.rtt_ms("A", "B") / 2e3 / (slowdown / 100))
    res = run_geofed("submit", "-f", str(cluster.path), "-p", "A1B1", "--profile", str(profile),
                     "--out", str(tmp_path / "rec"), "--", os.path.join(os.path.dirname(GEOFED), "python"), "-c",
                     "from geofed import runtime; print(runtime.node(), runtime.site())")
    job, out = submitted(res)
    (rec,) = records.load_dir(tmp_path / "rec")
    d = rec.data
    assert d.spans is spans and d.job == job and d.max_span_slowdown_percent == 10
    assert slowdown * 0.7 < d.slowdown_percent < slowdown * 1.3, d.slowdown_percent
    # The decision and its reason are the job's comment in Slurm, as the record has it.
    shown = client(cluster, "squeue", "-h", "-j", job, "-o", "%k").stdout.strip()
    assert shown in ("", d.comment[:len(shown)]) and d.comment.startswith(f"geofed: {'span' if spans else 'one site'},")
    wait_done(cluster, job)
    where = ran_on(out.read_text())
    if spans:
        assert (d.placement, where) == ("A1B1", [("A1", "A"), ("B1", "B")]), res.stderr
    else:
        # only A has two nodes: kept there
        assert (d.placement, d.constraint, where) == ("*2", "site_A", [("A1", "A"), ("A2", "A")]), res.stderr


def test_the_rule_keeps_a_span_predicted_too_slow_at_one_site(cluster):
    """However the job is submitted: the rule reads geofed's prediction in its comment."""
    comment = "geofed: span, predicted slowdown 50.00 % < 10 % on A1B1"
    res = client(cluster, "srun", "-N", "2", "-C", "[site_A*1&site_B*1]", f"--comment={comment}", *TASKS)
    assert res.returncode == 0 and ran_on(res.stdout) == [("A1", "A"), ("A2", "A")], res.stderr
    assert "kept at one site" in res.stderr
    res = client(cluster, "srun", "-N", "2", "-C", "[site_A*1&site_B*1]",
                 "--comment=geofed: span, predicted slowdown 9.99 % < 10 % on A1B1", *TASKS)
    assert res.returncode == 0 and ran_on(res.stdout) == [("A1", "A"), ("B1", "B")], res.stderr


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


def test_the_schedule_experiment_runs_one_stream_under_three_regimes_and_no_job_spans(monkeypatch):
    from geofed.ops import schedule
    monkeypatch.setattr(schedule, "progress", lambda m: None)
    # The bench's stream at half its time scale: job lengths halved, so arrivals come twice
    # as often (the same loads) and a window of 6 s draws the very jobs that 12 s would, at
    # half the times (8 jobs, 3 of them queueing for G's two nodes); the run takes half as long.
    monkeypatch.setattr(schedule, "SINGLE_S", tuple(s / 2 for s in schedule.SINGLE_S))
    monkeypatch.setattr(schedule, "MPI_S", tuple(s / 2 for s in schedule.MPI_S))
    base = federation.load("icm-task")
    data = schedule.run(base, seed=3, window_s=6.0, single_load=0.5, mpi_load=1.3)
    assert len(data["stream"]) == 8 and sum(j["site"] == "G" for j in data["stream"]) == 3
    names = sorted(j["name"] for j in data["stream"])
    assert list(data["modes"]) == ["separate", "slurm-federation", "federated"]
    for mode, m in data["modes"].items():
        assert sorted(r["name"] for r in m["jobs"]) == names, mode  # every job, from Slurm's own log
        assert all(len(r["ran_at"]) == 1 and r["state"] == "COMPLETED" for r in m["jobs"]), mode
        assert all(r["start"] >= r["submit"] and r["end"] > r["start"] for r in m["jobs"])
    assert data["modes"]["separate"]["spilled"] == 0  # separate clusters: every job at home
    assert no_leftovers("schedbench") == []
