"""What geofed tells Slurm, checked without daemons: slurm.conf from the federation file,
the site-confinement rule, a placement's constraint, and srun's rank pinning inside an
allocation of the testbed's Slurm."""

import subprocess
from pathlib import Path

import pytest

from geofed import federation, runtime
from geofed.errors import UserError
from geofed.launch import job as launch
from geofed.launch.placement import parse
from geofed.testbed import slurm
from geofed.testbed.plan import make_plan


@pytest.fixture
def icm():
    return federation.load("icm-task")


def conf_lines(fed, cluster, key):
    text = slurm.slurm_conf(fed, make_plan(fed), cluster, Path("/run/x"), "thehost")
    return [line for line in text.splitlines() if line.startswith(key)]


def test_every_node_carries_its_site_and_own_features_cpus_and_address(icm):
    plan = make_plan(icm)
    nodes = conf_lines(icm, slurm.federated(icm), "NodeName=")
    assert len(nodes) == 7
    for line in nodes:
        kv = dict(w.split("=", 1) for w in line.split())
        assert kv["Features"] == f"site_{kv['NodeName'][0]},node_{kv['NodeName']}"
        assert kv["NodeAddr"] == plan.node(kv["NodeName"]).address
        assert kv["CPUs"] == "1"
    # Faster nodes are handed out first: W (speed 1.0) weighs less than G (0.92).
    weight = {dict(w.split("=", 1) for w in line.split())["NodeName"]: int(line.split("Weight=")[1].split()[0])
              for line in nodes}
    assert weight["W1"] < weight["G1"]
    (ctld,) = conf_lines(icm, slurm.federated(icm), "SlurmctldHost=")
    assert ctld == f"SlurmctldHost=thehost({plan.node('W1').address})"  # the storage site's login node


def test_a_partition_per_site_and_one_spanning_all_by_default(icm):
    parts = {line.split()[0].split("=")[1]: line for line in conf_lines(icm, slurm.federated(icm), "PartitionName=")}
    assert set(parts) == {"W", "G", "all"}
    assert "Nodes=W1,W2,W3,W4,W5" in parts["W"] and "Nodes=G1,G2" in parts["G"]
    assert "Default=YES" in parts["all"] and "Default=YES" not in parts["W"]
    # Separate clusters: one site each, its partition the default.
    for c in slurm.separate(icm):
        (only,) = conf_lines(icm, c, "PartitionName=")
        assert "Default=YES" in only and f"PartitionName={c.controller}" in only


def test_the_submit_rule_knows_the_sites_fastest_first_and_every_nodes_site(icm):
    lua = slurm.job_submit_lua(icm, slurm.federated(icm))
    assert 'local sites = "[site_W|site_G]"' in lua  # the faster site's nodes first
    assert '["W5"] = "W"' in lua and '["G1"] = "G"' in lua  # a node list's sites


def test_every_task_is_told_its_node_and_site(icm, tmp_path):
    prolog = slurm.task_prolog(slurm.federated(icm))
    assert "TaskProlog=/run/x/task_prolog" in conf_lines(icm, slurm.federated(icm), "TaskProlog=")
    # What Slurm does with it: run it on the task's node, export what it prints.
    script = tmp_path / "prolog"
    script.write_text(prolog)
    for node, site in (("G2", "G"), ("W4", "W")):
        out = subprocess.run(["sh", str(script)], env={"SLURMD_NODENAME": node}, capture_output=True, text=True).stdout
        assert sorted(out.splitlines()) == [f"export GEOFED_NODE={node}", f"export GEOFED_SITE={site}"]


def test_a_placement_becomes_slurms_constraint(icm):
    assert launch.slurm_constraint(parse("G1W2", icm)) == "[site_G*1&site_W*2]"
    assert launch.slurm_constraint(parse("W3", icm)) == "site_W"
    assert launch.slurm_constraint(parse("G0W2", icm)) == "site_W"
    # Named nodes by their own features, mixed with a site's count.
    assert launch.slurm_constraint(parse("W[3]", icm)) == "node_W3"
    assert launch.slurm_constraint(parse("W[1,3]", icm)) == "[node_W1*1&node_W3*1]"
    assert launch.slurm_constraint(parse("G2W[4]", icm)) == "[site_G*2&node_W4*1]"


def test_srun_pins_ranks_to_the_allocated_nodes_of_each_site(icm, tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "allocated_nodes", lambda: ["G2", "W3", "W4"])
    monkeypatch.setenv("GEOFED_TESTBED", "icm-task")
    cmd = launch.slurm_command(launch.Job(icm, parse("W2G1", icm), ["a.out"]), None, tmp_path)
    assert cmd.argv[:2] == ["srun", "--mpi=pmi2"] and "--ntasks=3" in cmd.argv
    assert list(cmd.files.values()) == ["W3\nW4\nG2\n"]
    assert cmd.env["UCX_TLS"] == "tcp,self"  # across namespaces, never shared memory
    # Every namespace has the host's name: ranks know their node by SLURMD_NODENAME.
    monkeypatch.setenv("GEOFED_HOSTMAP", cmd.env["GEOFED_HOSTMAP"])
    monkeypatch.delenv("GEOFED_NODE", raising=False)
    monkeypatch.setenv("SLURMD_NODENAME", "W4")
    assert runtime.node() == "W4" and runtime.site() == "W"


def test_an_allocation_without_the_placements_nodes_is_refused(icm, tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "allocated_nodes", lambda: ["W1", "W2"])
    with pytest.raises(UserError, match=r"needs 1 nodes at site G; the allocation has 0 there .*\[site_W\*1&site_G\*1\]"):
        launch.slurm_command(launch.Job(icm, parse("W1G1", icm), ["a.out"]), None, tmp_path)


def test_srun_runs_named_nodes_on_those_slurm_nodes(icm, tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "allocated_nodes", lambda: ["G1", "G2", "W1", "W3", "W4"])
    cmd = launch.slurm_command(launch.Job(icm, parse("W[4,3]G1", icm), ["a.out"], ranks_per_node=2), None, tmp_path)
    assert list(cmd.files.values()) == ["W4\nW4\nW3\nW3\nG1\nG1\n"]
    # The placement, not Slurm's CPU count per step, says how many ranks a node runs;
    # parts of one workflow share nodes.
    assert "--overcommit" in cmd.argv and "--overlap" in cmd.argv


def test_an_allocation_without_a_named_node_is_refused(icm, tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "allocated_nodes", lambda: ["W1", "W2", "W3"])
    with pytest.raises(UserError, match=r"names node W4; the allocation has W1,W2,W3; allocate with --constraint "
                                        r"'\[node_W2\*1&node_W4\*1\]'"):
        launch.slurm_command(launch.Job(icm, parse("W[2,4]", icm), ["a.out"]), None, tmp_path)


def test_a_member_of_a_slurm_federation_reports_to_slurmdbd_and_has_no_confinement_rule(icm):
    # Every cluster is one site there: no job can span, and the rule would pin a job's
    # sibling copies to the site it was submitted at; `all` is a partition every sibling has.
    acct = slurm.Accounting("198.18.1.1", 6819, Path("/nonexistent/munge.key"))
    conf = slurm.slurm_conf(icm, make_plan(icm), slurm.separate(icm)[1], Path("/d"), "thehost", acct).splitlines()
    assert {"AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=198.18.1.1",
            "AccountingStoragePort=6819", "AccountingStoragePass=/d/munge/munge.sock"} <= set(conf)
    assert not any(line.startswith("JobSubmitPlugins") for line in conf)
    parts = [line for line in conf if line.startswith("PartitionName=")]
    assert len(parts) == 2 and "PartitionName=all Nodes=ALL Default=YES" in parts[1]
