"""Bad input ends with one line naming the problem, exit status 2, and no state left."""

import os
import shutil
import subprocess

import pytest

from conftest import GEOFED, run_geofed
from geofed.testbed.host import netns_list
from geofed.testbed.plan import prefix


def assert_user_error(res, *fragments):
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("geofed: error: ")
    for f in fragments:
        assert f in lines[0]


def test_broken_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[site]\n')
    assert_user_error(run_geofed("federation", "show", str(bad)), str(bad), "invalid TOML")


def test_unknown_placement_letter():
    assert_user_error(run_geofed("run", "--placement", "X1W1", "--dry-run", "--", "true"), "unknown site letter X")


def test_too_many_nodes():
    assert_user_error(run_geofed("run", "--placement", "G3", "--dry-run", "--", "true"), "site G has 2 nodes, 3 asked")


def test_run_without_a_command():
    assert_user_error(run_geofed("run", "--placement", "G1"), "no command given")


def test_show_prints_the_link_model():
    res = run_geofed("federation", "show", "icm-task")
    assert res.returncode == 0
    assert "RTT 9.004 ms" in res.stdout and "BDP 4.5 MB" in res.stdout


def test_show_prints_a_credit_links_window_and_ceiling(tmp_path):
    fed = tmp_path / "credit.toml"
    fed.write_text('name = "cli-credit"\n[[site]]\ncode = "M"\nnodes = 1\n[[site]]\ncode = "H"\nnodes = 1\n'
                   '[[link]]\nsites = ["M", "H"]\nfibre_km = 28.6\nbandwidth_gbps = 1.86\nextender = "longbow-10km"\n')
    res = run_geofed("federation", "show", str(fed))
    assert res.returncode == 0, res.stderr
    # 10 km of credits (23 kB at 1.86 Gb/s) over 28.6 km: about 10/28.6 of the rate.
    assert "longbow-10km: Obsidian Longbow licensed for 10 km" in res.stdout
    assert "each way credits 0.02325 MB, ceiling 0.6359 of 1.86 Gb/s" in res.stdout
    fed.write_text(fed.read_text().replace('extender = "longbow-10km"', 'flow = "credit"'))
    assert_user_error(run_geofed("federation", "show", str(fed)), str(fed), "link[0]: flow = \"credit\" needs")


def test_dry_run_prints_the_launch():
    res = run_geofed("run", "--placement", "G1W1", "--dry-run", "--", "hostname")
    assert res.returncode == 0
    assert "UCX_TLS=tcp,self" in res.stdout and "-hosts 198.18.2.1:1,198.18.1.1:1" in res.stdout


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become another user")
@pytest.mark.parametrize("action", ["up", "down"])
def test_testbed_needs_root_and_leaves_nothing(action):
    def icm_task_namespaces():  # only this federation's: other work on the host makes its own
        return {n for n in netns_list() if n.startswith(prefix("icm-task"))}
    before = icm_task_namespaces()
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", GEOFED, "testbed", action,
                          "icm-task"], capture_output=True, text=True)
    assert_user_error(res, "needs root")
    assert icm_task_namespaces() == before


def test_every_command_of_the_table_builds_and_explains_itself(capsys):
    from geofed import cli
    commands = cli.COMMANDS + cli.registry_commands()
    assert len({c.path for c in commands}) == len(commands), "a command path twice"
    for c in commands:
        with pytest.raises(SystemExit) as done:
            cli.build_parser().parse_args([*c.path.split(), "--help"])
        assert done.value.code == 0, c.path
    assert "geofed bench exchange" in capsys.readouterr().out


def test_a_workload_with_a_command_of_its_own_names_a_row_of_the_table():
    from geofed import cli, workloads
    paths = {c.path for c in cli.COMMANDS}
    for w in workloads.all_workloads().values():
        assert w.command is None or w.command in paths, w.name
        assert w.command is not None or f"bench {w.name}" not in paths, w.name
