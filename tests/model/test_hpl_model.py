"""The HPL model on hand-computed cases: compute from one-node runs, messages on the federation's link."""

import math
from argparse import Namespace

import pytest

from geofed import federation
from geofed.errors import UserError
from geofed.launch.placement import parse
from geofed.model import calibration, hpl, network

FED = """
name = "hpl-model-test"
description = "two sites for the HPL model tests"
storage = "A"
[local]
latency_us = 2.0
bandwidth_gbps = 8.0
[[site]]
code = "A"
nodes = 4
[[site]]
code = "B"
nodes = 4
[[link]]
sites = ["A", "B"]
rtt_ms = 10.004
bandwidth_gbps = {gbps}
"""
FLOP_NS = 0.025  # 40 GFLOPS per node


def setup(write_fed, gbps=0.8):
    fed = federation.load(write_fed(FED.format(gbps=gbps), name=f"f{gbps}.toml"))
    sizes = [1, 1024, 1 << 20]
    consts = {"mpi_sizes": sizes, "mpi_latency_us": [20 + s / 1e3 for s in sizes], "mpi_bw_MBps": 1000.0,
              "hpl_n": [1000, 4000], "hpl_flop_ns": [0.05, FLOP_NS]}
    cal = calibration.Calibration(fed.name, {"A": consts}, tcp_window_bytes=4 << 20,
                                  speeds={s.code: s.speed for s in fed.sites})
    return fed, cal


def predict(fed, cal, code, n=4000, nb=80, grid=None):
    return hpl.Hpl().predict(fed, cal, code, parse(code, fed).nodes(fed), Namespace(n=n, nb=nb, grid=grid))


def test_compute_is_hpl_flops_at_the_one_node_rate(write_fed):
    fed, cal = setup(write_fed)
    one = predict(fed, cal, "A1")
    assert one.parts["compute"] == pytest.approx((2 / 3 * 4000**3 + 1.5 * 4000**2) * FLOP_NS * 1e-9)
    assert one.parts["local_comm"] == one.parts["link_comm"] == 0
    two = predict(fed, cal, "A2")
    assert two.parts["compute"] == pytest.approx(one.parts["compute"] / 2)


def test_one_site_has_no_link_and_two_sites_pay_the_broadcast_across_it(write_fed):
    fed, cal = setup(write_fed)
    local, across = predict(fed, cal, "A2"), predict(fed, cal, "A1B1")
    assert local.parts["link_comm"] == 0 and local.parts["local_comm"] > 0
    # 1 x 2 grid: per panel one broadcast of m NB / P doubles and two backward-substitution
    # messages of NB doubles, all across the link
    expected = sum(network.mpi_message_s(fed, cal, "A", "B", (4000 - k * 80) * 80 * 8)
                   + 2 * network.mpi_message_s(fed, cal, "A", "B", 80 * 8) for k in range(50))
    assert across.parts["link_comm"] == pytest.approx(expected)
    assert across.parts["local_comm"] == 0 and across.total_s > local.total_s
    assert across.link_bytes == pytest.approx(sum((4000 - k * 80) * 80 * 8 + 2 * 80 * 8 for k in range(50)))


def test_a_2x2_grid_split_by_rows_crosses_the_link_along_columns(write_fed):
    fed, cal = setup(write_fed)
    p = predict(fed, cal, "A2B2")  # rows A1 A2 | B1 B2: broadcasts local, swaps and factorisation across
    assert p.parts["link_comm"] > 0 and p.parts["local_comm"] > 0


def test_a_faster_link_gains_less_than_in_proportion(write_fed):
    slow = predict(*setup(write_fed, gbps=0.8), "A1B1")
    fast = predict(*setup(write_fed, gbps=8.0), "A1B1")
    assert fast.parts["link_comm"] < slow.parts["link_comm"]
    assert fast.total_s > slow.total_s / 10  # latency and compute do not shrink with bandwidth


def test_grid_must_match_the_nodes(write_fed):
    fed, cal = setup(write_fed)
    with pytest.raises(UserError, match="--grid 2x2"):
        predict(fed, cal, "A1B1", grid="2x2")


def test_kruse_bound():
    assert hpl.kruse_speedup_bound(1) == 1.0
    assert hpl.kruse_speedup_bound(256) == pytest.approx(256 / math.log(256))


def test_calibration_takes_one_node_runs_only(write_fed):
    fed, _ = setup(write_fed)
    run = {"ranks": 1, "ranks_per_site": {"A": 1}, "rows": [
        {"n": 2000, "time_s": 0.4, "passed": True}, {"n": 1000, "time_s": 0.1, "passed": True},
        {"n": 3000, "time_s": 9.9, "passed": False}]}
    across = {"ranks": 2, "ranks_per_site": {"A": 1, "B": 1}, "rows": [{"n": 2000, "time_s": 5.0, "passed": True}]}
    recs = [("one.json", {"kind": "bench.hpl", "data": run}), ("two.json", {"kind": "bench.hpl", "data": across})]
    cal = calibration.fit(fed, recs)
    assert cal.sites["A"]["hpl_n"] == [1000, 2000]
    assert cal.sites["A"]["hpl_flop_ns"] == pytest.approx([0.1 / hpl.flops(1000) * 1e9, 0.4 / hpl.flops(2000) * 1e9],
                                                          rel=1e-4)  # kept to 6 decimals
    assert "B" not in cal.sites and cal.sources == ["one.json"]
