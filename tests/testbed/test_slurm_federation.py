"""Slurm's own federation on the testbed, with real daemons: every site its own cluster
(slurmctld on its login node), slurmdbd before a MariaDB of its own, the clusters joined
with sacctmgr; sibling jobs run where there is room, never across two clusters; `geofed
submit` sends a job to its site's cluster; `testbed down` leaves nothing, MariaDB
included."""

import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import needs_root, no_leftovers, readable_federation, run_geofed, run_group, two_site_federation
from geofed.testbed import core, host, services, slurm
from geofed.testbed import slurm_federation as sf

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("slurmdbd") is None or shutil.which("mariadbd") is None,
                                 reason="slurmdbd or MariaDB not installed (./setup.sh)")]

NAME = f"gfsfed-{os.getpid()}"


@pytest.fixture(scope="module")
def fed():
    """Sites A (2 nodes, the storage site) and B (1 node), each its own cluster, joined in
    the Slurm federation NAME; taken down with `testbed down` alone."""
    dirs = [services.service_dir(NAME, s) for s in (sf.SERVICE, "slurm-siteA", "slurm-siteB")]
    daemons = []
    with readable_federation(two_site_federation(NAME, rtt_ms=9.0)) as fed:  # jobs run as the clusters' users
        try:
            core.up(fed)
            sf.up(fed, NAME, lambda m: None)
            daemons = [d["pid"] for d in services.read(NAME, sf.SERVICE)["daemons"].values()]
            yield fed
        finally:
            res = run_geofed("testbed", "down", str(fed.path))
    assert res.returncode == 0, res.stderr
    assert not any(d.exists() for d in dirs) and not any(host.alive(p) for p in daemons)  # MariaDB, slurmdbd
    assert no_leftovers(NAME) == []


def cluster(fed, site: str) -> slurm.Cluster:
    return next(c for c in slurm.separate(fed) if c.controller == site)


def client(fed, site: str, *argv, timeout=120):
    """A Slurm command as the user of `site`'s cluster, on its login node."""
    plan, c = core.make_plan(fed), cluster(fed, site)
    return run_group(slurm.client_argv(plan, c, list(argv)), timeout, env=dict(os.environ, **slurm.client_env(plan, c)))


def wait_for(what: str, cond, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while not (found := cond()):  # polling a condition with a deadline
        assert time.monotonic() < deadline, f"{what} after {timeout:g} s"
        time.sleep(0.2)
    return found


def test_sacctmgr_lists_both_clusters_in_the_federation(fed):
    res = client(fed, "B", "sacctmgr", "-n", "-P", "show", "federation", "format=federation,cluster")
    assert res.returncode == 0, res.stderr
    assert sorted(row.rstrip("|") for row in res.stdout.split()) == [f"{NAME}|geofed-sitea", f"{NAME}|geofed-siteb"]
    out = client(fed, "A", "scontrol", "show", "federation").stdout
    assert f"Federation: {NAME}" in out and "Sibling:    geofed-siteb:" in out and "Synced:Yes" in out
    again = run_geofed("ops", "slurm", "up", str(fed.path), "--federation", NAME)
    assert again.returncode == 2 and f"Slurm is already up on testbed {NAME}" in again.stderr


def test_a_job_submitted_at_a_full_site_runs_at_the_other(fed):
    full = client(fed, "A", "sbatch", "--parsable", "-N", "2", "-o", "/dev/null", "--wrap", "sleep 300")
    assert full.returncode == 0, full.stderr
    jobs = [full.stdout.strip().split(";")[0]]
    try:
        wait_for("A's nodes taken", lambda: client(fed, "A", "squeue", "-h", "-j", jobs[0], "-o", "%T %N").stdout.split()
                 == ["RUNNING", "A[1-2]"])
        home = slurm.home(core.make_plan(fed), cluster(fed, "A"))
        res = client(fed, "A", "sbatch", "--parsable", "-N", "1", "-o", f"{home}/sibling-%j.out",
                     "--wrap", "printenv GEOFED_SITE SLURM_CLUSTER_NAME; sleep 300")
        assert res.returncode == 0, res.stderr
        job = res.stdout.strip().split(";")[0]
        jobs.append(job)
        # Submitted at A, seen from either cluster with --federation, running at B.
        for site in ("A", "B"):
            # (-j would show A's own copy, revoked once B started the job)
            wait_for(f"job {job} running at B1 in squeue --federation at {site}", lambda site=site: f"{job} RUNNING B1"
                     in client(fed, site, "squeue", "--federation", "-h", "-o", "%i %T %N").stdout.splitlines())
        out = home / f"sibling-{job}.out"
        wait_for("the sibling's output", lambda: out.exists() and len(out.read_text().split()) == 2)
        assert out.read_text().split() == ["B", "geofed-siteb"]
    finally:
        client(fed, "A", "scancel", *jobs)
    for site in ("A", "B"):
        wait_for(f"{site}'s nodes idle", lambda site=site: set(client(fed, site, "sinfo", "-h", "-o", "%t").stdout.split())
                 == {"idle"})


def test_geofed_submit_sends_a_job_to_its_sites_cluster_and_never_spans(fed):
    res = run_geofed("submit", "-f", str(fed.path), "-p", "B1", "--", "printenv", "GEOFED_SITE")
    assert res.returncode == 0, res.stderr
    job, out = res.stdout.split()[2].rstrip(":"), Path(res.stdout.split()[-1])
    assert out.parent == slurm.home(core.make_plan(fed), cluster(fed, "B"))  # as B's user, at B
    wait_for(f"job {job} done", lambda: client(fed, "B", "squeue", "-h", "-j", job).stdout.strip() == ""
             and out.exists())
    assert out.read_text().split() == ["B"]
    res = run_geofed("submit", "-f", str(fed.path), "-p", "A1B1", "--span", "--", "hostname")
    assert res.returncode == 2 and "never span clusters" in res.stderr
