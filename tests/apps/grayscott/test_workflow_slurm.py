"""The Gray-Scott workflow inside an allocation of the testbed's Slurm: every part a job
step of that allocation (srun), on the nodes its placement names."""

import json
import os
import re
import shutil

import pytest

from conftest import GEOFED, needs_root, run_group, slurm_testbed
from geofed.testbed import core, slurm

pytestmark = [needs_root, pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("slurmctld") is None, reason="Slurm not installed (./setup.sh)")]
NAME = f"gftest-gs-slurm-{os.getpid()}"
# One core per node: the simulation's 2 ranks per G node are more than Slurm's CPUs
# there, and the three analysis parts share W1's one CPU.
FEDERATION = f"""
name = "{NAME}"
description = "the Gray-Scott workflow under Slurm"
storage = "W"
[local]
latency_us = 2.0
[[site]]
code = "W"
nodes = 1
[[site]]
code = "G"
nodes = 2
[[link]]
sites = ["W", "G"]
rtt_ms = 2.0
bandwidth_gbps = 1.0
"""


@pytest.fixture(scope="module")
def fed():
    with slurm_testbed(FEDERATION) as f:
        yield f


def test_the_workflow_runs_as_job_steps_of_an_allocation(fed):
    plan, cluster = slurm.require_up(fed)
    out = slurm.home(plan, cluster)  # the job runs as the cluster's user, who writes there
    argv = ["salloc", "-N", "3", "-C", "[site_G*2&site_W*1]", GEOFED, "workflow", "grayscott", "-f", str(fed.path),
            "--L", "16", "--steps", "20", "--plotgap", "10", "--out", str(out), "--timeout", "120"]
    before = core.link_tx_bytes(fed, "G", "W")
    res = run_group(slurm.client_argv(plan, cluster, argv), 240, env=dict(os.environ, **slurm.client_env(plan, cluster)))
    assert res.returncode == 0, res.stdout + res.stderr
    crossed = core.link_tx_bytes(fed, "G", "W") - before
    job = re.search(r"Granted job allocation (\d+)", res.stderr)[1]
    d = json.loads(next(out.glob("workflow.grayscott-*.json")).read_text())["data"]
    assert d["verify"]["ok"] and [r["step"] for r in d["steps"]] == [10, 20]
    parts = {p["name"]: p["nodes"] for p in d["parts"]}
    assert parts == {"simulation": ["G1", "G2"], "pdf": ["W1"], "gplot": ["W1"], "pdfplot": ["W1"]}
    # The simulation's 4 ranks found their nodes by the name slurmd gave them.
    assert sorted(r["node"] for r in d["simulation"]["where"]) == ["G1", "G1", "G2", "G2"]
    # Slurm's own word: each node's slurmd launched the steps of the parts placed there.
    d_slurm = slurm.cluster_dir(plan, cluster) / "d"
    steps = {n: set(re.findall(rf"launch task StepId={job}\.(\d+)", (d_slurm / f"{n}.log").read_text()))
             for n in ("G1", "G2", "W1")}
    assert len(steps["W1"]) == 3 and steps["G1"] == steps["G2"] and len(steps["G1"]) == 1
    assert not steps["G1"] & steps["W1"]
    # The steps crossed the emulated link (no shared memory between the sites' namespaces):
    # counted here, as root; the job, run as the cluster's user, cannot read the emulator.
    x = d["transfer"]
    assert x["link_bytes"] is None and crossed >= x["payload_bytes"] == 2 * 2 * 2 * 16 ** 3 * 8
