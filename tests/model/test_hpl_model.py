"""The HPL model on hand-computed cases: compute from one-node runs, messages on the federation's link."""

import dataclasses
import math

import pytest
from record_samples import sample

from geofed import federation, records
from geofed.errors import UserError
from geofed.launch.placement import parse
from geofed.model import calibration, hpl, network
from geofed.records.hpl import HplParams, parse_grid

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


def predict(fed, cal, code, n=4000, nb=80, grid=None, depth=1, after=None):
    p, q = parse_grid(grid) if grid else (0, 0)
    return hpl.Hpl().predict(fed, cal, code, parse(code, fed).nodes(fed),
                             HplParams((after, n) if after else (n,), nb, p, q, depth=depth))


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
    # 1 x 2 grid: per panel one broadcast of m NB / P doubles, of which the time in flight
    # (the link's extra one-way latency) hides behind the previous panel's update (2 m^2
    # NB flops over 2 ranks), and one backward-substitution message of NB doubles (a 1 x Q
    # grid passes only the partial update along its row: HPL_pdtrsv), all across the link
    in_flight = network.route(fed, "A", "B", cal).extra_one_way_s
    def messages(depth=1):
        total, previous_update = 0.0, 0.0
        for k in range(50):
            m = 4000 - k * 80
            hidden = min(previous_update, in_flight) if depth else 0.0
            total += (network.mpi_message_s(fed, cal, "A", "B", m * 80 * 8) - hidden
                      + network.mpi_message_s(fed, cal, "A", "B", 80 * 8))
            previous_update = 2 * m * m * 80 / 2 * FLOP_NS * 1e-9
        return total
    expected = messages()
    # late panels' updates are shorter than the 5 ms in flight and hide only themselves
    hidden = sum(min(2 * (4000 - k * 80) ** 2 * 80 / 2 * FLOP_NS * 1e-9, in_flight) for k in range(49))
    assert in_flight == pytest.approx(0.005) and 30 * in_flight < hidden < 49 * in_flight
    assert messages(depth=0) - expected == pytest.approx(hidden)
    assert predict(fed, cal, "A1B1", depth=0).parts["link_comm"] - across.parts["link_comm"] == pytest.approx(hidden)
    # and slow start, once each way, for the first 2.56 MB broadcast: the window grows
    # from 14.6 kB to the 1.0 MB BDP (0.8 Gb/s x 10 ms) in 6 round trips
    slow_start = 2 * 6 * 0.010004
    assert across.parts["link_comm"] == pytest.approx(expected + slow_start)
    assert any("slow start" in n for n in across.notes)
    cal.transport = "infiniband"  # no slow start, no send-buffer round trips, no TCP headers
    assert messages() < expected
    assert predict(fed, cal, "A1B1").parts["link_comm"] == pytest.approx(messages())
    assert across.parts["local_comm"] == 0 and across.total_s > local.total_s
    assert across.link_bytes == pytest.approx(sum((4000 - k * 80) * 80 * 8 + 80 * 8 for k in range(50)))


def test_an_order_after_another_in_one_run_pays_only_the_doublings_beyond_its_window(write_fed):
    fed, cal = setup(write_fed)
    cold = predict(fed, cal, "A1B1")
    rtt = 0.010004
    # N = 1000 before: its first broadcast (640 kB) opened the window in 5 doublings,
    # N = 4000's (2.56 MB, capped by the 1.0 MB BDP) needs 6: one more round trip each way
    assert cold.parts["link_comm"] - predict(fed, cal, "A1B1", after=1000).parts["link_comm"] == \
        pytest.approx(2 * 5 * rtt)
    warm = predict(fed, cal, "A1B1", after=4000)
    assert cold.parts["link_comm"] - warm.parts["link_comm"] == pytest.approx(2 * 6 * rtt)
    assert not any("slow start" in n for n in warm.notes)
    assert warm.parts["compute"] == cold.parts["compute"]


def test_validation_predicts_each_order_of_a_run_after_the_one_before(write_fed):
    from geofed.model import validate
    fed, cal = setup(write_fed)
    rows = [{"n": n, "nb": 80, "p": 1, "q": 2, "time_s": 1.0, "passed": True} for n in (1000, 4000, 4000)]
    run = records.make("bench.hpl", sample("bench.hpl", placement="A1B1", ranks_per_node=1,
                                           ranks_per_site={"A": 1, "B": 1}, where="testbed",
                                           params={"ns": [1000, 4000, 4000], "depth": 1}, rows=rows)).data
    sites = {"A1": ["A"], "A1B1": ["A", "B"]}
    sweep = records.make("bench.hpl.sweep", sample("bench.hpl.sweep", ns=[1000, 4000], rows=[
        dict(r, placement=code, sites=sites[code]) for code in sites for r in rows[:2]])).data
    got = [r["params"]["after"] for r in validate._hpl_run_rows(fed, cal, run, "run.json")]
    assert got == [None, 1000, 4000]
    assert [r["params"]["after"] for r in validate._hpl_sweep_rows(fed, cal, sweep, "sweep.json")] == [None, 1000]


def test_a_2x2_grid_split_by_rows_crosses_the_link_along_columns(write_fed):
    fed, cal = setup(write_fed)
    p = predict(fed, cal, "A2B2")  # rows A1 A2 | B1 B2: broadcasts local, swaps and factorisation across
    assert p.parts["link_comm"] > 0 and p.parts["local_comm"] > 0


def test_the_emulators_cpu_delays_the_run_by_the_share_of_the_cores_the_ranks_compute_on(write_fed):
    fed, cal = setup(write_fed)
    before = {code: predict(fed, cal, code) for code in ("A1B1", "A2B2")}
    cal.crossing_cpu_ns_per_byte, cal.host_cores = 3.0, 2
    for code, ranks in (("A1B1", 2), ("A2B2", 4)):
        was, now = before[code], predict(fed, cal, code)
        # each crossing byte's 3 ns of host CPU, spread over both cores, where the ranks'
        # computation needs them: its share of the cores' time over the run
        share = ranks * was.parts["compute"] / (2 * was.total_s)
        assert 0 < share < 1
        assert now.parts["link_comm"] - was.parts["link_comm"] == pytest.approx(now.link_bytes * 3e-9 / 2 * share)
        assert now.parts["compute"] == was.parts["compute"] and any("emulator" in n for n in now.notes)
    cal.host_cores = 4  # a core left over takes the emulator
    assert predict(fed, cal, "A1B1").parts == before["A1B1"].parts


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
    run = sample("bench.hpl", ranks=1, ranks_per_site={"A": 1}, rows=[
        {"n": 2000, "time_s": 0.4, "passed": True}, {"n": 1000, "time_s": 0.1, "passed": True},
        {"n": 3000, "time_s": 9.9, "passed": False}])
    across = sample("bench.hpl", ranks=2, ranks_per_site={"A": 1, "B": 1},
                    rows=[{"n": 2000, "time_s": 5.0, "passed": True}])
    recs = [dataclasses.replace(records.make("bench.hpl", data), path=where)
            for where, data in (("one.json", run), ("two.json", across))]
    cal = calibration.fit(fed, recs)
    assert cal.sites["A"]["hpl_n"] == [1000, 2000]
    assert cal.sites["A"]["hpl_flop_ns"] == pytest.approx([0.1 / hpl.flops(1000) * 1e9, 0.4 / hpl.flops(2000) * 1e9],
                                                          rel=1e-4)  # kept to 6 decimals
    assert "B" not in cal.sites and cal.sources == ["one.json"]


def test_ranks_per_node_puts_several_ranks_on_a_node(write_fed):
    fed, cal = setup(write_fed)
    nodes = parse("A1B1", fed).nodes(fed)
    four = hpl.Hpl().predict(fed, cal, "A1B1", nodes, HplParams((4000,), 80, ranks_per_node=2))
    assert four.parts["compute"] == pytest.approx(predict(fed, cal, "A2B2").parts["compute"])
    assert "2x2 grid" in four.notes[0]


def test_the_shared_link_is_shared_but_each_message_keeps_its_local_path(write_fed):
    fed, cal = setup(write_fed, gbps=80.0)  # a link far faster than the 1000 MB/s local path
    one = network.mpi_message_s(fed, cal, "A", "B", 1 << 20)
    assert network.mpi_message_s(fed, cal, "A", "B", 1 << 20, flows=4) == pytest.approx(one)
    slow, _ = setup(write_fed, gbps=0.8)
    r = network.route(slow, "A", "B", cal)
    # the link serialises all four messages; the local floor and latency are paid once
    expected = cal.local_latency_s("A", 1) + r.extra_one_way_s + (4 << 20) / r.rate_Bps
    assert network.mpi_message_s(slow, cal, "A", "B", 1 << 20, flows=4) == pytest.approx(expected)


def seed_curve(fed, ranks, **what_if):
    cal = calibration.load(calibration.find("ma-hd-seed"), fed)
    return {r["ranks"]: r for r in hpl.speedup_curve(fed, cal, 40000, 80, 8, ranks)}


def test_seed_001_across_the_link_the_speedup_stops_growing_and_bandwidth_is_the_bottleneck():
    from geofed.model import whatif
    fed = federation.load("ma-hd-seed")
    ranks = [64, 256, 512, 1024, 2048]
    now = seed_curve(fed, ranks)
    two = {p: now[p]["two_sites"]["speedup"] for p in ranks}
    assert two[512] > two[256] > two[64] and two[2048] < two[512]  # slide 19: constant, then decreasing
    assert now[256]["one_site"]["speedup"] > 2.5 * two[256]  # slide 19: about 4x lower for p > 256
    assert "one_site" not in now[2048]  # a site holds 1120 cores
    link = now[2048]["two_sites"]["parts"]
    assert link["link_comm"] > 10 * link["compute"]
    gains = {}
    for f in (2, 10):
        faster = seed_curve(whatif.apply(fed, [f"link.bandwidth={f}x"]), ranks)
        gains[f] = faster[2048]["two_sites"]["speedup"] / two[2048] - 1
    assert 0.1 < gains[2] < gains[10] < 2  # slide 21: +25 % and +100 %


def test_a_shipped_calibration_is_found_unless_the_user_has_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert calibration.find("ma-hd-seed").parent.name == "calibration"
    (tmp_path / "ma-hd-seed.calibration.toml").write_text("federation = 'ma-hd-seed'\n")
    assert calibration.find("ma-hd-seed") == tmp_path.joinpath("ma-hd-seed.calibration.toml").relative_to(tmp_path)
    assert calibration.default_path("ma-hd-seed") == calibration.find("ma-hd-seed")
    assert not calibration.find("icm-task").exists()  # no calibration ships with it


def test_model_hpl_prints_the_table_and_writes_a_record(tmp_path):
    from tests.conftest import run_geofed
    done = run_geofed("model", "hpl", "-f", "ma-hd-seed", "--ranks-per-node", "8", "--ranks", "256,2048",
                      "--vary", "link.fibre_km=2.86", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "link.fibre_km=2.86" in done.stdout and "seed 001" in done.stdout
    rec = records.read(next(tmp_path.glob("model.hpl.scaling-*.json")))
    assert [r["ranks"] for r in rec.data.rows] == [256, 2048]
    gain = rec.data.rows[1]["variants"]["link.fibre_km=2.86"]["gain"]
    assert gain > 0
    from geofed import report
    page = report.render(records.load_dir(tmp_path), tmp_path / "report").read_text()
    assert f"({gain:+.0%})" in page and (tmp_path / "report" / "hpl-scaling-0.png").stat().st_size > 1000


@pytest.mark.parametrize("argv,message", [
    (["--ranks", "0"], "--ranks"),
    (["--vary", "link.bandwidth=fast"], "link.bandwidth"),
    (["-f", "single-site"], "one site only"),
])
def test_model_hpl_bad_input(argv, message, tmp_path):
    from tests.conftest import run_geofed
    base = ["model", "hpl", "--out", str(tmp_path)]
    done = run_geofed(*base, *(argv if "-f" in argv else ["-f", "ma-hd-seed", *argv]))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert not list(tmp_path.iterdir())
