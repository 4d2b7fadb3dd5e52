from geofed import federation, runtime
from geofed.errors import UserError
from geofed.launch import job as launch
from geofed.launch.placement import parse

import pytest


@pytest.fixture(scope="module")
def icm():
    return federation.load("icm-task")


def test_testbed_command_runs_at_the_storage_site_and_forces_tcp(icm):
    j = launch.Job(icm, parse("G1W2", icm), ["python", "app.py"], ranks_per_node=2)
    cmd = launch.testbed_command(j)
    assert cmd.argv[:2] == ["nsenter", "--net=/run/netns/geofed-icm-task.site-W"]
    assert "-launcher-exec" in cmd.argv
    assert cmd.env["UCX_TLS"] == "tcp,self"
    assert cmd.env["GEOFED_TESTBED"] == "icm-task"
    assert cmd.env["GEOFED_PLACEMENT"] == "G1W2"
    i = cmd.argv.index("-hosts")
    assert cmd.argv[i + 1:] == ["198.18.2.1:2,198.18.1.1:2,198.18.1.2:2", "-n", "6", *j.rank_argv()]
    assert j.rank_argv()[-2:] == ["python", "app.py"]
    assert cmd.env["GEOFED_HOSTMAP"] == "198.18.2.1=G1,198.18.1.1=W1,198.18.1.2=W2"


def test_ranks_beyond_the_host_cores_wait_without_holding_a_core(icm, monkeypatch):
    monkeypatch.setattr(launch.os, "sched_getaffinity", lambda pid: {0, 1})
    fits = launch.testbed_command(launch.Job(icm, parse("G1W1", icm), ["a.out"]))
    assert not set(launch.OVERSUBSCRIBED_MPI_ENV) & set(fits.env)
    over = launch.testbed_command(launch.Job(icm, parse("G1W1", icm), ["a.out"], ranks_per_node=2))
    assert over.env["MPIR_CVAR_CH4_PROGRESS_THROTTLE"] == "1"
    assert over.env["MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT"] == "512"


def test_hostfile_maps_nth_host_of_a_site_to_node_n(icm, tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("# real cluster\nw001 W\nw002 W\ng01 G  # gdansk\n")
    j = launch.Job(icm, parse("W2G1", icm), ["a.out"])
    cmd = launch.hostfile_command(j, hf)
    assert cmd.argv[1:] == ["-hosts", "w001:1,w002:1,g01:1", "-n", "3", *j.rank_argv()]
    assert cmd.env["GEOFED_HOSTMAP"] == "w001=W1,w002=W2,g01=G1"


def test_hostfile_named_nodes_are_their_sites_nth_hosts(icm, tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("w001 W\nw002 W\nw003 W\ng01 G\ng02 G\n")
    j = launch.Job(icm, parse("W[3,1]G[2]", icm), ["a.out"])
    cmd = launch.hostfile_command(j, hf)
    assert cmd.argv[1:] == ["-hosts", "w003:1,w001:1,g02:1", "-n", "3", *j.rank_argv()]
    assert cmd.env["GEOFED_HOSTMAP"] == "w003=W3,w001=W1,g02=G2"
    assert cmd.env["GEOFED_PLACEMENT"] == "W[3,1]G[2]"


def test_testbed_runs_named_nodes_in_the_order_written(icm):
    cmd = launch.testbed_command(launch.Job(icm, parse("W[3]G[2]", icm), ["a.out"]))
    i = cmd.argv.index("-hosts")
    assert cmd.argv[i + 1:i + 2] == ["198.18.1.3:1,198.18.2.2:1"]
    assert cmd.env["GEOFED_HOSTMAP"] == "198.18.1.3=W3,198.18.2.2=G2"


def test_slurm_pins_ranks_in_placement_order(icm, tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("w001 W\nw002 W\ng01 G\n")
    cmd = launch.slurm_command(launch.Job(icm, parse("G1W1", icm), ["a.out"], ranks_per_node=2), hf, tmp_path)
    assert cmd.argv[0] == "srun" and "--distribution=arbitrary" in cmd.argv and "--ntasks=4" in cmd.argv
    assert list(cmd.files.values()) == ["g01\ng01\nw001\nw001\n"]
    assert cmd.env["GEOFED_HOSTMAP"] == "g01=G1,w001=W1"


@pytest.mark.parametrize("implementation", ["mpich", "openmpi"])
def test_a_record_names_the_launcher_the_job_was_started_with(icm, tmp_path, monkeypatch, implementation):
    """Inside an allocation the job is srun's with its PMI, whichever MPI's launcher exists."""
    from geofed.launch.mpi import Mpi
    found = Mpi(implementation, implementation, "1", "/usr/bin/mpirun", "libmpi.so")
    monkeypatch.setattr(launch.mpi, "current", lambda: found)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert found.meta(testbed=True)["mpi_launcher"] == "/usr/bin/mpirun"
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    hf = tmp_path / "hosts"
    hf.write_text("w001 W\n")
    argv = launch.slurm_command(launch.Job(icm, parse("W1", icm), ["a.out"]), hf, tmp_path).argv
    assert found.meta(testbed=True)["mpi_launcher"] == " ".join(argv[:2])
    assert argv[1] == {"mpich": "--mpi=pmi2", "openmpi": "--mpi=pmix"}[implementation]


@pytest.mark.parametrize("text,message", [
    ("w001\n", "hosts:1: expected 'HOST SITE'"),
    ("w001 X\n", "hosts:1: unknown site 'X'"),
    ("w001 W\nw001 W\n", "hosts:2: host w001 is listed twice"),
])
def test_bad_hostfiles(icm, tmp_path, text, message):
    hf = tmp_path / "hosts"
    hf.write_text(text)
    with pytest.raises(UserError, match=message):
        launch.parse_hostfile(hf, icm)


def test_hostfile_with_too_few_hosts(icm, tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("w001 W\n")
    with pytest.raises(UserError, match="lists 1 hosts at site W, node W2 asked"):
        launch.hostfile_command(launch.Job(icm, parse("W2", icm), ["a.out"]), hf)
    with pytest.raises(UserError, match="lists 1 hosts at site W, node W3 asked"):
        launch.hostfile_command(launch.Job(icm, parse("W[1,3]", icm), ["a.out"]), hf)


def test_runtime_reads_node_from_env_or_hostmap(monkeypatch):
    monkeypatch.setenv("GEOFED_NODE", "G2")
    assert runtime.node() == "G2" and runtime.site() == "G"
    monkeypatch.delenv("GEOFED_NODE")
    monkeypatch.delenv("GEOFED_SITE", raising=False)
    monkeypatch.setattr(runtime.socket, "gethostname", lambda: "w007.cluster")
    monkeypatch.setenv("GEOFED_HOSTMAP", "g01=G1,w007=W3")
    assert runtime.node() == "W3" and runtime.site() == "W"


def test_pair_classes():
    assert runtime.pair_class("W1", "W1") == "intra-node"
    assert runtime.pair_class("W1", "W2") == "intra-site"
    assert runtime.pair_class("W1", "G1") == "inter-site"


def test_hostfile_job_runs_for_real_on_this_host(icm, tmp_path):
    # The real-cluster path end to end, with this machine as the one host of site W
    # (Hydra starts a proxy on a host it recognises as local without ssh).
    import json
    import socket
    import sys

    from conftest import run_geofed
    hf = tmp_path / "hosts"
    hf.write_text(f"{socket.gethostname()} W\n")
    out = tmp_path / "pp.json"
    res = run_geofed("run", "-f", "icm-task", "--hostfile", str(hf), "-p", "W1", "--ranks-per-node", "2",
                     "--timeout", "120", "--", sys.executable, "-m", "geofed.bench.pingpong", "--out", str(out))
    assert res.returncode == 0, res.stderr
    ranks = json.loads(out.read_text())["data"]["ranks"]
    assert [(r["node"], r["site"]) for r in ranks] == [("W1", "W"), ("W1", "W")]

