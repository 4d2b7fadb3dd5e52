"""The utilisation experiment's parts without daemons: the job stream's shape and
reproducibility, Slurm's completion records read back, and the wait and utilisation
figures computed from them."""

import pytest

from geofed import federation
from geofed.errors import UserError
from geofed.ops import schedule


@pytest.fixture
def icm():
    return federation.load("icm-task")


def test_the_stream_has_seed_001s_shape_and_its_seed_makes_it(icm):
    jobs = schedule.job_stream(icm, seed=7, window_s=600, single_load=0.5, mpi_load=1.3)
    assert jobs == schedule.job_stream(icm, seed=7, window_s=600, single_load=0.5, mpi_load=1.3)
    assert jobs != schedule.job_stream(icm, seed=8, window_s=600, single_load=0.5, mpi_load=1.3)
    w = [j for j in jobs if j.site == "W"]
    g = [j for j in jobs if j.site == "G"]
    # The larger site (W, 5 nodes) submits single-node jobs; the smaller (G, 2) MPI jobs over its nodes.
    assert {j.nodes for j in w} == {1} and {j.nodes for j in g} == {2}
    assert all(0 <= j.arrival_s < 600 for j in jobs) and [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    # Offered load: arrivals x mean length / nodes, near what was asked (Poisson: within 25 %).
    offered_w = sum(j.seconds for j in w) / 600 / 5
    offered_g = sum(j.seconds * j.nodes for j in g) / 600 / 2
    assert offered_w == pytest.approx(0.5, rel=0.25) and offered_g == pytest.approx(1.3, rel=0.25)


def test_one_site_is_refused(write_fed):
    fed = federation.load(write_fed('name = "one"\n[[site]]\ncode = "A"\nnodes = 2\n'))
    with pytest.raises(UserError, match="needs two sites"):
        schedule.job_stream(fed, 1, 60, 0.5, 1.3)


def test_node_lists_expand_as_slurm_writes_them():
    assert schedule.expand_nodes("W[1-3,5],G2") == ["W1", "W2", "W3", "W5", "G2"]
    assert schedule.expand_nodes("G[1-2]") == ["G1", "G2"]
    assert schedule.expand_nodes("W4") == ["W4"]


def test_waits_and_utilisation_come_from_the_completion_log(icm):
    jobs = [schedule.Job("gf-W1", "W", 1, 10, 0), schedule.Job("gf-G1", "G", 2, 10, 0)]
    log = ("JobId=1 UserId=root(0) Name=gf-W1 JobState=COMPLETED Partition=all NodeList=W1 NodeCnt=1 "
           "StartTime=2026-11-25T10:00:00 EndTime=2026-11-25T10:00:10 SubmitTime=2026-11-25T10:00:00\n"
           "JobId=2 UserId=root(0) Name=gf-G1 JobState=COMPLETED Partition=all NodeList=W[2-3] NodeCnt=2 "
           "StartTime=2026-11-25T10:00:04 EndTime=2026-11-25T10:00:14 SubmitTime=2026-11-25T10:00:00\n"
           "JobId=3 Name=someone-else NodeList=W5 StartTime=2026-11-25T10:00:00 EndTime=2026-11-25T10:00:01 "
           "SubmitTime=2026-11-25T10:00:00\n")
    m = schedule.measure(icm, jobs, schedule.parse_jobcomp(log))
    assert m["mean_wait_s"] == pytest.approx(2.0) and m["mean_wait_s_G"] == pytest.approx(4.0)
    assert m["makespan_s"] == pytest.approx(14.0)
    assert m["spilled"] == 1  # G's job ran at W
    assert m["site_utilisation"]["W"] == pytest.approx(30 / (14 * 5)) and m["site_utilisation"]["G"] == 0
    assert m["utilisation"] == pytest.approx(30 / (14 * 7))
    with pytest.raises(RuntimeError, match="1 of 2 jobs are missing"):
        schedule.measure(icm, jobs, schedule.parse_jobcomp(log.splitlines()[0]))


def test_the_report_shows_both_modes_and_their_waits(icm, tmp_path):
    from geofed import records, report
    jobs = [schedule.Job("gf-W1", "W", 1, 10, 0)]
    def log(start):
        return (f"JobId=1 Name=gf-W1 JobState=COMPLETED NodeList=W1 StartTime=2026-11-25T10:00:{start:02d} "
                f"EndTime=2026-11-25T10:00:{start + 10:02d} SubmitTime=2026-11-25T10:00:00")
    data = {"seed": 5, "window_s": 60.0, "single_load": 0.5, "mpi_load": 1.3, "sites": {"W": 5, "G": 2},
            "stream": [{"name": "gf-W1"}],
            "modes": {"separate": schedule.measure(icm, jobs, schedule.parse_jobcomp(log(7))),
                      "federated": schedule.measure(icm, jobs, schedule.parse_jobcomp(log(1)))}}
    page = report.render([records.make("bench.schedule", data, federation="icm-task")], tmp_path).read_text()
    assert "seed 5" in page and "<td>separate</td><td>7.0</td>" in page and "<td>federated</td><td>1.0</td>" in page
    assert (tmp_path / "schedule-0.png").stat().st_size > 1000
    assert schedule.table(data).splitlines()[2].split()[:2] == ["separate", "7.0"]


def test_a_job_of_a_slurm_federation_counts_once_submitted_when_its_first_copy_was(icm):
    # Every sibling cluster logs its copy of a job; only the one that ran has nodes.
    jobs = [schedule.Job("gf-W1", "W", 1, 10, 0)]
    log = ("JobId=67108865 Name=gf-W1 JobState=COMPLETED NodeList=(null) NodeCnt=0 StartTime=2026-11-25T10:00:02 "
           "EndTime=2026-11-25T10:00:02 SubmitTime=2026-11-25T10:00:00\n"
           "JobId=67108865 Name=gf-W1 JobState=COMPLETED NodeList=G1 NodeCnt=1 StartTime=2026-11-25T10:00:02 "
           "EndTime=2026-11-25T10:00:12 SubmitTime=2026-11-25T10:00:01\n")
    m = schedule.measure(icm, jobs, schedule.parse_jobcomp(log))
    assert [(r["ran_at"], r["start"] - r["submit"]) for r in m["jobs"]] == [(["G"], 2.0)]
    assert m["spilled"] == 1
