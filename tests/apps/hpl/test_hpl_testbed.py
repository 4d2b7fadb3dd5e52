"""A real HPL run across the emulated link passes its residual check and becomes a record."""

import json
import os

import pytest

from conftest import needs_root, no_leftovers, run_geofed
from geofed import federation
from geofed.testbed import core
from geofed.testbed.host import netns_list

pytestmark = [needs_root, pytest.mark.slow]
NAME = f"gftest-hpl-{os.getpid() % 100000}"


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    path = federation.derive(federation.load("icm-task"), tmp_path_factory.mktemp("fed"), NAME)
    core.up(federation.load(path))
    try:
        yield str(path)
    finally:
        core.down(NAME)
        assert no_leftovers(NAME) == []


def test_two_ranks_across_the_link_pass(fed, tmp_path):
    res = run_geofed("bench", "hpl", "-f", fed, "-p", "W1G1", "--n", "1000,1600", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "across the 9.004 ms link" in res.stdout
    (path,) = tmp_path.glob("bench.hpl-*.json")
    d = json.loads(path.read_text())["data"]
    assert [(r["n"], r["p"], r["q"], r["passed"]) for r in d["rows"]] == [(1000, 1, 2, True), (1600, 1, 2, True)]
    assert all(r["gflops"] > 0 and r["time_s"] > 0 and r["residual"] < 16 for r in d["rows"])
    assert d["ranks_per_site"] == {"W": 1, "G": 1} and d["link"]["rtt_ms"] == pytest.approx(9.004)
    assert d["passed"] is True


def test_sweep_makes_the_seed_tables(tmp_path):
    # Its own private copy of icm-task, brought up and taken down by the command.
    res = run_geofed("bench", "hpl-sweep", "--placements", "W1,W2,G1W1", "--n", "1000", "--peer",
                     "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    (path,) = tmp_path.glob("bench.hpl.sweep-*.json")
    d = json.loads(path.read_text())["data"]
    assert set(d["peaks_gflops"]) == {"W", "G"} and all(g > 0 for g in d["peaks_gflops"].values())
    rows = {r["placement"]: r for r in d["rows"]}
    assert rows["W1"]["speedup"] == 1.0 and rows["W1"]["p"] * rows["W1"]["q"] == 1
    assert rows["G1W1"]["sites"] == ["G", "W"] and rows["G1W1"]["peak_gflops"] == pytest.approx(
        d["peaks_gflops"]["W"] + d["peaks_gflops"]["G"])
    for r in d["rows"]:
        assert r["spf"] == pytest.approx(r["gflops"] / r["peak_gflops"]) and 0 < r["spf"] < 1.5
        assert r["peer_time_s"] > 0 and r["testbed_over_peer"] == pytest.approx(r["time_s"] / r["peer_time_s"])
    assert [ns for ns in netns_list() if ns.startswith("geofed-gfhpl-icm-task-")] == []
