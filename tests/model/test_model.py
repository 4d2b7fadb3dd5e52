"""The performance models on hand-computed cases, calibration, advice and the CLI's edges."""

import dataclasses
import json
import math

import pytest
from record_samples import sample

from geofed import federation, records
from geofed.errors import UserError
from geofed.launch.placement import parse
from geofed.model import advise, calibration, mdfs, mpi, network, obstacle, simgrid, transfer, whatif
from geofed.records.grayscott import GrayScottParams
from geofed.records.mdfs import MdfsSplitParams
from geofed.records.mpi import MpiAllreduceParams, MpiBandwidthParams, MpiLatencyParams
from geofed.records.obstacle import ObstacleParams
from geofed.records.transfer import TransferParams
from tests.conftest import GEOFED, run_geofed, run_group

FED = """
name = "model-test"
description = "two sites for the model tests"
storage = "A"
[local]
latency_us = 2.0
bandwidth_gbps = 8.0
[[site]]
code = "A"
nodes = 4
speed = 1.0
[[site]]
code = "B"
nodes = 4
speed = 0.5
[[link]]
sites = ["A", "B"]
rtt_ms = {rtt}
bandwidth_gbps = {gbps}
loss = {loss}
"""


@pytest.fixture
def fed(write_fed):
    return federation.load(write_fed(FED.format(rtt=10.004, gbps=0.8, loss=0.0)))


def cal_for(fed, **site_a) -> calibration.Calibration:
    """A calibration with a simple local curve: 20 us + size / 1 GB/s, window 4 MiB."""
    sizes = [1, 1024, 1 << 20]
    consts = {"mpi_sizes": sizes, "mpi_latency_us": [20 + s / 1e3 for s in sizes], "mpi_bw_MBps": 1000.0}
    consts.update(site_a)
    return calibration.Calibration(fed.name, {"A": consts}, tcp_window_bytes=4 << 20,
                                   speeds={s.code: s.speed for s in fed.sites})


def test_route_separates_the_link_from_the_local_path(fed):
    r = network.route(fed, "A", "B")
    assert r.one_way_s == pytest.approx(5.002e-3)
    assert r.extra_one_way_s == pytest.approx(5.0e-3)  # one-way minus the 2 us inside a site
    assert r.rate_Bps == pytest.approx(1e8)
    assert not network.route(fed, "A", "A").crosses_link


def test_a_nodes_interface_narrower_than_the_link_holds_each_message_but_flows_share_only_the_link(write_fed):
    fast = federation.load(write_fed(FED.format(rtt=10.004, gbps=20, loss=0.0), name="fast.toml"))
    r = network.route(fast, "A", "B")
    assert r.rate_Bps == pytest.approx(8e9 / 8) and r.links_rate_Bps == pytest.approx(20e9 / 8)
    # four pairs of nodes: each has its own 8 Gb/s interfaces, all four share the 20 Gb/s link
    assert r.share_Bps(1) == pytest.approx(8e9 / 8) and r.share_Bps(4) == pytest.approx(20e9 / 8 / 4)
    assert transfer.Transfer().predict(fast, cal_for(fast), "A1B1", parse("A1B1", fast).nodes(fast),
                                       TransferParams(1 << 30, 4)).total_s > (1 << 30) / (8e9 / 8)


PAYLOAD = 1448 / 1514  # a TCP frame's payload share of the wire


def test_route_as_tcp_messages_see_it_pays_the_crossing_and_the_headers(fed):
    cal = cal_for(fed)
    cal.crossing_us = 30.0
    r = network.route(fed, "A", "B", cal)
    assert r.extra_one_way_s == pytest.approx(5.0e-3 + 30e-6)
    assert r.rtt_s == pytest.approx(2 * (5.002e-3 + 30e-6))
    assert r.rate_Bps == pytest.approx(1e8 * PAYLOAD)
    cal.transport = "infiniband"
    assert network.route(fed, "A", "B", cal).rate_Bps == pytest.approx(1e8)
    assert network.route(fed, "A", "B", cal, transport="tcp").rate_Bps == pytest.approx(1e8 * PAYLOAD)
    inside = network.route(fed, "A", "A", cal)
    assert inside.one_way_s == pytest.approx(2e-6) and inside.extra_one_way_s == 0


def test_on_the_testbed_a_super_frame_crosses_the_local_path_and_the_link_in_turn(fed):
    cal = cal_for(fed)
    plain = {n: network.mpi_message_s(fed, cal, "A", "B", n) for n in (1, 1024, 1 << 20)}
    cal.crossing_frame_bytes = 65536
    # the first min(size, 64 KiB) of a message: its time on the local curve added in series
    assert network.mpi_message_s(fed, cal, "A", "B", 1) == pytest.approx(plain[1])
    assert network.mpi_message_s(fed, cal, "A", "B", 1024) - plain[1024] == pytest.approx(1023e-9)
    frame = cal.local_latency_s("A", 65536) - cal.local_latency_s("A", 1)
    assert frame > 65535e-9
    assert network.mpi_message_s(fed, cal, "A", "B", 1 << 20) - plain[1 << 20] == pytest.approx(frame)
    assert network.mpi_message_s(fed, cal, "A", "A", 1 << 20) == pytest.approx(cal.local_latency_s("A", 1 << 20))


def test_inter_site_message_adds_latency_and_the_slower_serialisation(fed):
    cal = cal_for(fed)
    rate = 1e8 * PAYLOAD
    # 1 byte: local 20.001 us + 5 ms of link
    assert network.mpi_message_s(fed, cal, "A", "B", 1) == pytest.approx(20.001e-6 + 5e-3 + 1 / rate)
    # 1 MiB: the link's 95.6 MB/s of TCP payload (10.97 ms) replaces the local 1 GB/s serialisation (1.05 ms)
    n = 1 << 20
    expected = 20e-6 + n / 1e9 + 5e-3 + (n / rate - (n - 1) / 1e9)
    assert network.mpi_message_s(fed, cal, "A", "B", n) == pytest.approx(expected, rel=1e-6)
    # inside a site: the measured curve itself
    assert network.mpi_message_s(fed, cal, "A", "A", 1024) == pytest.approx(21.024e-6)


def test_a_message_beyond_the_send_buffer_waits_a_round_trip_per_buffer(fed):
    cal = cal_for(fed)
    n = 8 << 20
    with_two = network.mpi_message_s(fed, cal, "A", "B", n)
    cal.tcp_window_bytes = 16 << 20
    assert with_two - network.mpi_message_s(fed, cal, "A", "B", n) == pytest.approx(2 * 2 * 5e-3)


def test_slow_start_rounds_and_mathis_rate(write_fed):
    assert network.slow_start_rounds(10 * 1460, 1e9) == 0
    assert network.slow_start_rounds(4 * 14600, 1e9) == 2  # 14.6 -> 29.2 -> 58.4 kB
    assert network.slow_start_rounds(1e9, 29200) == 1  # capped by the BDP
    lossy = federation.load(write_fed(FED.format(rtt=10.004, gbps=10.0, loss=0.01), "lossy.toml"))
    r = network.route(lossy, "A", "B")
    one = network.stream_rate_Bps(r, 1)
    assert one == pytest.approx(1448 / 10.004e-3 * math.sqrt(1.5) / 0.1)
    assert network.stream_rate_Bps(r, 4) == pytest.approx(4 * one)


def test_pingpong_and_bandwidth_models(fed):
    cal = cal_for(fed)
    nodes = parse("A1B1", fed).nodes(fed)
    lat = mpi.Latency().predict(fed, cal, "A1B1", nodes, MpiLatencyParams(size=1))
    assert lat.parts["local_comm"] == pytest.approx(20.001e-6)
    assert lat.parts["link_comm"] == pytest.approx(5e-3, rel=1e-5)
    args = MpiBandwidthParams(size=1 << 20, window=64)
    bw = mpi.Bandwidth()
    pred = bw.predict(fed, cal, "A1B1", nodes, args)
    # a window of 64 MiB at the link's 100 MB/s dominates: close to 100 MB/s
    assert 90 < bw.rate_MBps(pred, args) < 100


def test_a_credit_link_carries_its_credits_per_round_trip(write_fed):
    # 1 MB of credits over a 10 ms fibre round trip: 100 MB/s of a 10 Gb/s (1250 MB/s) link.
    text = FED.format(rtt=10.004, gbps=10.0, loss=0.0).replace("loss = 0.0", 'flow = "credit"\ncredits_bytes = 1000000')
    fed = federation.load(write_fed(text, "credit.toml"))
    loop_s = 10e-3 + 1514 * 8 / 10e9
    assert network.route(fed, "A", "B").rate_Bps == pytest.approx(1e6 / loop_s)
    args = MpiBandwidthParams(size=1 << 20, window=64)
    pred = mpi.Bandwidth().predict(fed, cal_for(fed), "A1B1", parse("A1B1", fed).nodes(fed), args)
    assert 90 < mpi.Bandwidth.rate_MBps(pred, args) < 100 * PAYLOAD


def test_a_window_of_small_messages_goes_at_the_local_per_message_pace(fed):
    cal = cal_for(fed, mpi_bw_sizes=[1, 1 << 20], mpi_bw_curve_MBps=[0.1, 1000.0])
    nodes = parse("A1B1", fed).nodes(fed)
    args = MpiBandwidthParams(size=1, window=64)
    pred = mpi.Bandwidth().predict(fed, cal, "A1B1", nodes, args)
    # 1 byte at 0.1 MB/s inside the site: 10 us a message, far slower than the link's pace
    one_way = network.mpi_message_s(fed, cal, "A", "B", 1)
    assert pred.total_s == pytest.approx(2 * one_way + 63 * 10e-6)
    # 1 MiB: the link's 95.6 MB/s sets the pace, as without a curve
    big = MpiBandwidthParams(size=1 << 20, window=64)
    without = cal_for(fed)
    assert mpi.Bandwidth().predict(fed, cal, "A1B1", nodes, big).total_s == \
        pytest.approx(mpi.Bandwidth().predict(fed, without, "A1B1", nodes, big).total_s)


def test_allreduce_pays_the_link_once_per_crossing_round(fed):
    cal = cal_for(fed)
    nodes = parse("A2B2", fed).nodes(fed)
    pred = mpi.Allreduce().predict(fed, cal, "A2B2", nodes, MpiAllreduceParams(size=8))
    # recursive doubling on 4 ranks: (0,1) inside A, then (0,2) across: one link crossing
    assert pred.parts["link_comm"] == pytest.approx(5e-3)
    assert pred.parts["local_comm"] == pytest.approx(2 * cal.local_latency_s("A", 8))
    inside = mpi.Allreduce().predict(fed, cal, "A4", parse("A4", fed).nodes(fed), MpiAllreduceParams(size=8))
    assert inside.parts["link_comm"] == 0


def test_mdfs_shares_by_speed_and_stages_across_the_link(fed):
    cal = cal_for(fed, mdfs_tuples=3_000_000, mdfs_tuple_us=1.0, mdfs_overhead_s=0.1,
                  mdfs_staging_nodes=[1, 2], mdfs_staging_s=[0.01, 0.02], mdfs_staging_bytes=1_000_000)
    nodes = parse("A1B1", fed).nodes(fed)
    pred = mdfs.Mdfs().predict(fed, cal, "A1B1", nodes, MdfsSplitParams(split="speed"))
    # speeds 1 : 0.5 -> 2e6 and 1e6 tuples; B (speed 0.5) borrows A's constants at twice the cost:
    # A 2e6 x 1 us + 0.1 s, B 1e6 x 2 us + 0.2 s: B is the slowest
    assert pred.parts["compute"] == pytest.approx(2.2)
    assert pred.link_bytes == 1_000_000
    even = mdfs.Mdfs().predict(fed, cal, "A1B1", nodes, MdfsSplitParams(split="even"))
    assert even.parts["compute"] == pytest.approx(0.2 + 1.5e6 * 2e-6)
    assert any("taken from site A" in n for n in cal.notes)


def test_synchronous_obstacle_pays_two_link_trips_per_iteration(fed):
    cal = cal_for(fed, obstacle_n=32, obstacle_iter_s=1e-3, obstacle_sync_iterations=400,
                  obstacle_sync_comm_s=2e-4, obstacle_async_iterations=450, obstacle_mpi_iterations=400,
                  obstacle_mpi_comm_s=1e-4)
    a2 = obstacle.Obstacle().predict(fed, cal, "A2", parse("A2", fed).nodes(fed), ObstacleParams(scheme="sync", n=None))
    assert a2.total_s == pytest.approx(400 * (1e-3 + 2e-4))
    across = obstacle.Obstacle().predict(fed, cal, "A1B1", parse("A1B1", fed).nodes(fed),
                                         ObstacleParams(scheme="sync", n=None))
    halo = 8 * 32 * 32 / (1e8 * PAYLOAD)
    assert across.parts["link_comm"] == pytest.approx(400 * (2 * 5e-3 + halo))
    assert across.parts["compute"] == pytest.approx(400 * 2e-3)  # B is half as fast


def synthetic_records(fed, tuple_us=0.25, iter_s=4e-4):
    """One-site records made from known constants, and an inter-site one with absurd values."""
    def rec(where, kind, **fields):
        return dataclasses.replace(records.make(kind, sample(kind, **fields), **records.federation_meta(fed)),
                                   path=where)
    sizes = [1, 1024, 65536]
    lat = {"benchmark": "latency", "class": "intra-site",
           "sizes": [{"size": s, "value": 99.0, "stats": {"p50": 30 + s / 500}} for s in sizes]}
    bw = {"benchmark": "bw", "class": "intra-site", "sizes": [{"size": s, "value": s / 100} for s in sizes]}
    one_site = rec("mpi", "bench.mpi", sites=["A"], placement="A2", results=[lat, bw])
    far = {"benchmark": "latency", "class": "inter-site", "sizes": [{"size": 1, "value": 1e6}]}
    across = rec("far", "bench.mpi", sites=["A", "B"], placement="A1B1", results=[far])
    row = lambda code, site, n, t: {"placement": code, "split": "speed", "nodes": n, "sites": [site],  # noqa: E731
                                    "compute_s": t + 0.05, "staging_s": 0.01 * n, "staging_bytes": 5000,
                                    "shares": [{"node": f"{site}{i + 1}", "tuples": 1_000_000 // n,
                                                "count_s": t} for i in range(n)]}
    sweep = rec("mdfs", "mdfs.sweep", storage="A", rows=[
        row("A1", "A", 1, 1_000_000 * tuple_us / 1e6), row("A2", "A", 2, 500_000 * tuple_us / 1e6),
        row("B1", "B", 1, 1_000_000 * 2 * tuple_us / 1e6)])
    obst = rec("obst", "bench.obstacle", n=32, solver=[
        {"placement": "A2", "across_link": False, "async_s": 500 * iter_s, "async_iterations": 500,
         "sync_s": 400 * (iter_s + 1e-4), "sync_iterations": 400, "mpi_s": 400 * iter_s * 1.1,
         "mpi_iterations": 400},
        {"placement": "A1B1", "across_link": True, "async_s": 9.0, "async_iterations": 9,
         "sync_s": 9.0, "sync_iterations": 9, "mpi_s": 9.0, "mpi_iterations": 9}])
    case = lambda L, ms, staging: {"L": L, "plotgap": 10, "bytes_per_output": 2 * L ** 3 * 8,  # noqa: E731
                                   "off": {"per_step_ms": ms}, "on": {"staging_ms": staging}}
    gs = rec("gs", "bench.grayscott", sim_site="B", analysis_site="B", sim_ranks=4, cases=[
        case(64, 8.0, 2 * 4.194304 / 10), case(32, 1.0, 2 * 0.524288 / 10)])
    gs_far = rec("gs_far", "bench.grayscott", sim_site="B", analysis_site="A", sim_ranks=4, cases=[case(64, 99.0, 99.0)])
    pair = lambda cls, rtt, floor: {"class": cls, "rtt_ms": {"median": rtt},  # noqa: E731
                                    "link": {"floor_rtt_ms": floor} if floor is not None else None}
    verify = rec("verify", "testbed.verify", host_cores=2, pairs=[
        dict(pair("intra-site", 0.020, None), host_cpu_ms_per_MB=1.2),
        dict(pair("intra-site", 0.024, None), host_cpu_ms_per_MB=1.6),
        dict(pair("inter-site", 10.1, 0.082), host_cpu_ms_per_MB=4.4)])
    return [one_site, across, sweep, obst, gs, gs_far, verify]


def test_calibration_recovers_known_constants_and_ignores_inter_site_runs(fed, tmp_path):
    cal = calibration.fit(fed, synthetic_records(fed))
    a, b = cal.sites["A"], cal.sites["B"]
    assert a["mpi_latency_us"] == pytest.approx([30 + s / 500 for s in (1, 1024, 65536)])
    assert a["mpi_bw_MBps"] == pytest.approx(655.4, abs=0.1)
    assert a["mdfs_tuple_us"] == pytest.approx(0.25)
    assert b["mdfs_tuple_us"] == pytest.approx(0.5)
    assert a["mdfs_overhead_s"] == pytest.approx(0.05)
    assert a["mdfs_staging_s"] == pytest.approx([0.01, 0.02])
    assert a["obstacle_iter_s"] == pytest.approx(4e-4)
    assert a["obstacle_sync_comm_s"] == pytest.approx(1e-4)
    assert b["grayscott_L"] == [32, 64] and b["grayscott_compute_ms"] == pytest.approx([1.0, 8.0])
    assert b["grayscott_stage_ms_per_mb"] == pytest.approx(2.0)
    assert "gs_far" not in cal.sources
    assert "far" not in cal.sources and "B" not in [s for s in cal.sites if "mpi_sizes" in cal.sites[s]]
    # the testbed's crossing: (floor 82 us - 22 us inside a site) / 2, from `testbed verify`
    assert cal.crossing_us == pytest.approx(30.0) and "verify" in cal.sources
    assert cal.crossing_frame_bytes == 65536
    # the emulator's CPU per byte: 4.4 ms/MB across the link less the median 1.4 inside a site
    assert cal.crossing_cpu_ns_per_byte == pytest.approx(3.0) and cal.host_cores == 2
    # the one-site bw curve: every size at 100 us a message (size / (size / 100) MB/s)
    assert a["mpi_bw_sizes"] == [1, 1024, 65536]
    assert [cal.local_gap_s("A", n) for n in (1, 300, 65536)] == pytest.approx([100e-6] * 3)
    back = calibration.load(cal.save(tmp_path / "c.toml"), fed)
    assert back.sites == cal.sites and back.tcp_window_bytes == cal.tcp_window_bytes and back.transport == "tcp"
    assert back.crossing_us == pytest.approx(30.0) and back.crossing_frame_bytes == 65536
    assert back.crossing_cpu_ns_per_byte == pytest.approx(3.0) and back.host_cores == 2
    cal.crossing_cpu_us_per_message = 35.0  # set by `bench apps` (its forwarding), or by hand
    assert calibration.load(cal.save(tmp_path / "c.toml"), fed).crossing_cpu_us_per_message == pytest.approx(35.0)
    cal.transport = "infiniband"
    assert calibration.load(cal.save(tmp_path / "c.toml"), fed).transport == "infiniband"
    (tmp_path / "c.toml").write_text((tmp_path / "c.toml").read_text().replace('"infiniband"', '"carrier pigeon"'))
    with pytest.raises(UserError, match="transport: expected one of tcp, infiniband"):
        calibration.load(tmp_path / "c.toml", fed)


def test_advice_flips_where_the_computed_threshold_says(fed):
    # 4 nodes: all at B (speed 0.5), or 2 at A (speed 1, the data's site) + 2 at B: the split
    # computes faster but must stage 2 GB across the link first
    fed = whatif.apply(fed, ["A.nodes=2"])
    cal = cal_for(fed, mdfs_tuples=20_000_000, mdfs_tuple_us=1.0, mdfs_overhead_s=0.1,
                  mdfs_staging_nodes=[1, 4], mdfs_staging_s=[0.01, 0.04], mdfs_staging_bytes=2_000_000_000)
    args = MdfsSplitParams(split="speed")
    model = mdfs.Mdfs()
    factor = advise.flip_factor(model, fed, cal, 4, args, "bandwidth")
    assert factor is not None and 1 < factor < 1000
    slower = whatif.apply(fed, [f"link.bandwidth={factor * 0.9}x"])
    faster = whatif.apply(fed, [f"link.bandwidth={factor * 1.1}x"])
    assert advise.rank(model, slower, cal, 4, args)[0].placement == "B4"
    assert advise.rank(model, faster, cal, 4, args)[0].sites == 2
    assert "keep it in B4" in advise.reason(advise.rank(model, fed, cal, 4, args), factor, None)
    assert f"flips at link bandwidth x{factor:.3g}" in advise.reason(advise.rank(model, fed, cal, 4, args), factor, None)


def test_what_if_changes_links_and_sites(fed):
    assert whatif.apply(fed, ["link.bandwidth=10x"]).links[0].bandwidth_gbps == pytest.approx(8.0)
    far = whatif.apply(fed, ["link.fibre_km=2000"]).links[0]
    assert far.propagation_ms == pytest.approx(10.0) and far.one_way_ms == pytest.approx(10.002)
    assert whatif.apply(fed, ["link.rtt_ms=1.004"]).links[0].one_way_ms == pytest.approx(0.502)
    assert whatif.apply(fed, ["B.speed=2x"]).site("B").speed == pytest.approx(1.0)
    for bad in ("link.colour=3", "link.bandwidth=nanx", "link.bandwidth=-1", "link.rtt_ms=0.001", "C.speed=2",
                "bandwidth", "link.loss=1"):
        with pytest.raises(UserError):
            whatif.apply(fed, [bad])


def test_simgrid_cm02_agrees_with_the_plain_model_on_a_small_message(fed):
    why = simgrid.available()
    if why:
        pytest.fail(f"SimGrid should be installed by ./setup.sh: {why}")
    cal = cal_for(fed)
    t = simgrid.simulate(fed, cal, "A", "B", [1], "pingpong", 1, "CM02")[1]
    assert t / 2 == pytest.approx(network.mpi_message_s(fed, cal, "A", "B", 1), rel=0.01)


@pytest.fixture
def calibrated(fed, tmp_path):
    cal = calibration.fit(fed, synthetic_records(fed))
    return cal.save(calibration.default_path(str(fed.path)))


@pytest.mark.parametrize("argv,message", [
    (["predict", "nosuch", "-f", "{fed}", "-p", "A1"], "invalid choice"),
    (["predict", "mdfs", "-f", "{fed}", "-p", "A9"], "site A has 4 nodes, 9 asked"),
    (["predict", "mdfs", "-f", "{fed}", "-p", "A1", "--calibration", "{tmp}/none.toml"], "no calibration"),
    (["advise", "mdfs", "-f", "{fed}", "--nodes", "0"], "positive integer"),
    (["advise", "mdfs", "-f", "{fed}", "--nodes", "99"], "has 8 nodes in all"),
    (["predict", "transfer", "-f", "{fed}", "-p", "A1B1", "--bytes", "nan"], "is not a size"),
    (["predict", "mdfs", "-f", "{fed}", "-p", "A1B1", "--what-if", "link.bandwidth=infx"], "finite"),
    (["model", "calibrate", "-f", "{fed}", "{tmp}/missing"], "no such file"),
])
def test_bad_input_is_one_line_and_exit_2(fed, calibrated, tmp_path, argv, message):
    argv = [a.format(fed=fed.path, tmp=tmp_path) for a in argv]
    done = run_geofed(*argv)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_predict_and_advise_from_the_command_line(fed, calibrated):
    done = run_geofed("predict", "mdfs", "-f", str(fed.path), "-p", "A2B2", "--json", check=True)
    pred = json.loads(done.stdout)
    assert pred["placement"] == "A2B2" and pred["total_s"] == pytest.approx(sum(pred["parts"].values()))
    done = run_geofed("advise", "obstacle", "--scheme", "sync", "-f", str(fed.path), "--nodes", "2", check=True)
    assert "advice: keep it in A2" in done.stdout


def test_grayscott_waits_only_when_the_consumers_take_longer_than_plotgap_steps(fed):
    from geofed.model import grayscott
    cal = cal_for(fed, grayscott_L=[32, 64], grayscott_compute_ms=[1.0, 8.0], grayscott_ranks=4,
                  grayscott_stage_ms_per_mb=1.0)
    nodes = parse("A1B1", fed).nodes(fed)
    model = grayscott.GrayScott()
    fast = model.predict(fed, cal, "A1B1", nodes, GrayScottParams(L=64, plotgap=10, sim_ranks=4, consumers=2))
    # 8 ms per step x 10 steps = 80 ms; two consumers pull 4.19 MB each: 2 x (10 ms + 43.9 ms) = 108 ms
    nbytes = grayscott.step_bytes(64)
    delivery = 2 * (10.004e-3 + nbytes / (1e8 * PAYLOAD))
    assert fast.parts["compute"] == pytest.approx(8e-3)
    assert fast.parts["staging"] == pytest.approx(nbytes / 1e6 * 1e-3 / 10)
    assert fast.parts["link_comm"] == pytest.approx((delivery - 80e-3) / 10)
    slow = model.predict(fed, cal, "A1B1", nodes, GrayScottParams(L=64, plotgap=20, sim_ranks=4, consumers=2))
    assert slow.parts["link_comm"] == 0  # 160 ms of stencil hides the delivery
    half = model.predict(fed, cal, "A1B1", nodes, GrayScottParams(L=48, plotgap=20, sim_ranks=8, consumers=2))
    assert half.parts["compute"] == pytest.approx((1 + 7 * (48 ** 3 - 32 ** 3) / (64 ** 3 - 32 ** 3)) / 2 * 1e-3)


def exchange_profile(directory, polls: tuple[float, float], iterations: int = 20, compute_s: float = 2e-3,
                     spin_s: float = 0.0) -> str:
    """An app.profile of two ranks at site A that post an 8-byte exchange with each other, wait
    for it (polling, with the intervals between polls summed in `polls`: sum, sum of squares;
    (0, 0) for a blocking wait; every wait polling `spin_s` before it slept), then compute
    `compute_s`, `iterations` times."""
    def rank(r):
        call = {"source": -1, "bytes": 8, "size": 0, "count": iterations, "inside_s": iterations * 1e-6,
                "mean_s": 1e-6, "sd_s": 0.0, "min_s": 1e-6, "max_s": 1e-6, "gap_s": 0.0, "overlap_s": 0.0,
                "overlapped": iterations, "poll_s": 0.0, "poll_sq": 0.0}
        patterns = [call | {"kind": "irecv", "peer": 1 - r, "gap_s": iterations * compute_s},
                    call | {"kind": "isend", "peer": 1 - r},
                    call | {"kind": "waitall", "peer": -1, "bytes": 0, "size": 2, "overlapped": 0,
                            "poll_s": polls[0] * iterations, "poll_sq": polls[1] * iterations,
                            "slept": iterations if polls[0] else 0, "spin_s": spin_s * iterations}]
        return {"rank": r, "host": "vm", "node": f"A{r + 1}", "total_s": iterations * compute_s,
                "compute_s": iterations * compute_s, "comm_s": 3 * iterations * 1e-6, "calls": 3 * iterations,
                "prefix": [], "iteration": [0, 1, 2], "iterations": iterations, "suffix": [], "patterns": patterns}
    rec = records.make("app.profile", {"program": ["exchange"], "placement": "A2", "site": "A",
                                       "ranks_per_node": 1, "total_s": iterations * compute_s,
                                       "ranks": [rank(0), rank(1)], "untracked_calls": 0})
    return str(records.save(rec, directory))


def test_a_polling_wait_sees_a_message_from_across_the_link_at_its_next_poll(fed, tmp_path):
    """A wait made by polling every 0.5 ms ends, when its message comes late, on average 0.25 ms
    (the mean residual of its intervals, sum(x^2) / (2 sum(x))) after the message arrived: every
    exchange across the link is late, none inside a site is."""
    from geofed.model import app
    every = 0.5e-3
    polled = exchange_profile(tmp_path / "polled", (every, every ** 2))
    blocking = exchange_profile(tmp_path / "blocking", (0.0, 0.0))
    cal = cal_for(fed)

    def total(profile, code):
        return app.MODELS[0].predict(fed, cal, code, parse(code, fed).nodes(fed),
                                     app.AppParams(profile=profile)).total_s
    assert total(polled, "A2") == pytest.approx(total(blocking, "A2"))
    extra = total(polled, "A1B1") - total(blocking, "A1B1")
    # one late wait per exchange on the critical path at least, both ranks' at most
    assert 20 * every / 2 * 0.99 <= extra <= 2 * 20 * every / 2 * 1.01, extra


def test_a_message_that_comes_while_the_wait_still_spins_is_seen_at_once(fed, tmp_path):
    """A wait that polls 20 ms before its first sleep catches a message 5 ms across the link at once."""
    every = 0.5e-3
    spinning = exchange_profile(tmp_path / "spinning", (every, every ** 2), spin_s=0.02)
    sleeping = exchange_profile(tmp_path / "sleeping", (every, every ** 2))
    blocking = exchange_profile(tmp_path / "blocking", (0.0, 0.0))
    cal = cal_for(fed)
    assert app_total(fed, cal, spinning, "A1B1") == pytest.approx(app_total(fed, cal, blocking, "A1B1"))
    assert app_total(fed, cal, sleeping, "A1B1") > app_total(fed, cal, blocking, "A1B1") + 20 * every / 2 * 0.99


def call(kind, peer, nbytes, gap, size=0):
    """One call of a hand-made profile, made once, 1 us inside, after `gap` of compute."""
    return {"kind": kind, "peer": peer, "source": -1, "bytes": nbytes, "size": size, "count": 1,
            "inside_s": 1e-6, "mean_s": 1e-6, "sd_s": 0.0, "min_s": 1e-6, "max_s": 1e-6, "gap_s": gap,
            "overlap_s": 0.0, "overlapped": 0, "poll_s": 0.0, "poll_sq": 0.0}


def calls_profile(directory, ranks: list[list[dict]], compute: float = 0.0) -> str:
    """An app.profile of len(ranks) ranks at site A, each making its calls once in order."""
    rec = records.make("app.profile", {"program": ["calls"], "placement": f"A{len(ranks)}", "site": "A",
                                       "ranks_per_node": 1, "total_s": compute, "untracked_calls": 0,
                                       "ranks": [{"rank": r, "host": "vm", "node": f"A{r + 1}", "total_s": compute,
                                                  "compute_s": sum(c["gap_s"] for c in calls), "comm_s": 1e-6,
                                                  "calls": len(calls), "prefix": list(range(len(calls))),
                                                  "iteration": [], "iterations": 0, "suffix": [], "patterns": calls}
                                                 for r, calls in enumerate(ranks)]})
    return str(records.save(rec, directory))


def test_what_the_profiled_site_does_not_explain_is_kept_in_the_share_of_the_run_its_work_has(fed, tmp_path):
    """A one-site run 50 ms longer than its simulation (ranks that waited for a core) keeps
    the 50 ms at its site; where the link stretches the run k times, it keeps 50 ms / k."""
    ranks = [[call("allreduce", -1, 8, 0.01, size=2)], [call("allreduce", -1, 8, 0.01, size=2)]]
    explained = calls_profile(tmp_path / "explained", ranks, compute=0.01)
    noisy = calls_profile(tmp_path / "noisy", ranks, compute=0.06)
    cal = cal_for(fed)
    site, across = app_total(fed, cal, explained, "A2"), app_total(fed, cal, explained, "A1B1")
    assert across > 1.4 * site  # the 5 ms crossing stretches the 10 ms run
    assert app_total(fed, cal, noisy, "A2") == pytest.approx(0.06, rel=1e-3)
    kept = app_total(fed, cal, noisy, "A1B1") - across
    assert kept == pytest.approx((0.06 - site) * site / across, rel=1e-3)


def app_total(fed, cal, profile, code) -> float:
    from geofed.model import app
    return app.MODELS[0].predict(fed, cal, code, parse(code, fed).nodes(fed), app.AppParams(profile=profile)).total_s


def test_a_blocking_send_holds_its_sender_while_the_connection_opens_its_window(fed, tmp_path):
    """Rank 0 sends 1 MB to rank 1 with MPI_Send, computes 100 ms, then sends 8 bytes: across
    the link the first send returns only once slow start has opened the window to 1 MB (the
    socket's buffer takes the message as the window opens), so the 8 bytes leave that much later."""
    big, compute = 1 << 20, 0.1
    profile = calls_profile(tmp_path, [[call("send", 1, big, 0.0), call("send", 1, 8, compute)],
                                       [call("recv", 0, big, 0.0), call("recv", 0, 8, 0.0)]], compute)
    cal = cal_for(fed)
    equal = whatif.apply(fed, ["B.speed=1"])
    r = network.route(equal, "A", "B", cal)
    warm = network.slow_start_rounds(big, r.share_Bps(1) * r.rtt_s) * r.rtt_s
    assert warm > 0.04  # 0.8 Gb/s x 10 ms: a window of 1 MB, six round trips from ten segments
    # the 8 bytes leave after the warm-up and the compute, and cross: more than a send not held
    assert app_total(equal, cal, profile, "A1B1") - app_total(equal, cal, profile, "A2") >= \
        (warm + r.extra_one_way_s) * 0.99


def test_a_communicator_split_is_priced_as_its_rounds_across_the_link(fed, tmp_path):
    """A split is MPICH's allgather of colours and keys, then two allreduces agreeing on a
    context id: with ranks 0 and 1 at A and 2 at B, four of its rounds cross the link (the
    allgather's two, each allreduce's exchange with rank 2), as a split of three ranks across
    icm-task's link took two round trips; at one site the link adds nothing."""
    from geofed.model import app
    assert app.rounds("comm_split", 3, 0, -1) == app.rounds("allgather", 3, app.COLOUR_KEY_BYTES, -1) + \
        mpi.allreduce_rounds(3, app.CONTEXT_MASK_BYTES) * 2
    assert app.rounds("comm_dup", 4, 0, -1) == mpi.allreduce_rounds(4, app.CONTEXT_MASK_BYTES) * 2
    cal = cal_for(fed)
    equal = whatif.apply(fed, ["B.speed=1"])
    split = calls_profile(tmp_path, [[call("comm_split", -1, 0, 0.0, size=3)]] * 3)
    r = network.route(equal, "A", "B", cal)
    assert app_total(equal, cal, split, "A2B1") - app_total(equal, cal, split, "A3") == \
        pytest.approx(4 * r.extra_one_way_s, rel=1e-3)


def test_on_the_testbed_a_message_across_waits_for_its_first_frame_and_its_forwarding_cpu(fed, tmp_path):
    """Rank 0 computes 10 ms, then sends three 40 KB messages to rank 1, which waits for them.
    The testbed's emulator takes a frame (up to 64 KiB) in whole before it serialises it on
    the link: the last message arrives one frame's local serialisation later (40 KB at the
    site's 8 Gb/s; the frames behind it overlap the link's). Its CPU per message and per
    byte across is charged as the share of two cores that the ranks' computing needs. At
    one site neither applies."""
    from dataclasses import replace
    n = 40000
    equal = whatif.apply(fed, ["B.speed=1"])
    profile = calls_profile(tmp_path, [[call("send", 1, n, 0.01), call("send", 1, n, 0.0), call("send", 1, n, 0.0)],
                                       [call("recv", 0, n, 0.0)] * 3], 0.01)
    plain = cal_for(fed)
    framed = replace(plain, crossing_frame_bytes=65536)
    forwarded = replace(plain, crossing_cpu_us_per_message=100.0, crossing_cpu_ns_per_byte=1.0, host_cores=2)
    for cal in (framed, forwarded):
        assert app_total(equal, cal, profile, "A2") == app_total(equal, plain, profile, "A2")
    base = app_total(equal, plain, profile, "A1B1")
    assert app_total(equal, framed, profile, "A1B1") - base == pytest.approx(n / 1e9, rel=0.02)
    cpu = 3 * 100e-6 + 3 * n * 1e-9  # the emulator's CPU for three messages of n bytes
    assert app_total(equal, forwarded, profile, "A1B1") - base == pytest.approx(cpu / 2 * min(1.0, 0.01 / base),
                                                                                 rel=0.02)


def test_predict_transfer_needs_no_calibration_and_holds_to_the_narrowest_hop(write_fed, tmp_path):
    # A planned link: no calibration file and no one-site records anywhere (cwd is empty).
    path = write_fed(FED.format(rtt=1.0, gbps=20, loss=0.0), name="planned.toml")
    done = run_group([GEOFED, "predict", "transfer", "-f", str(path), "-p", "A1B1", "--bytes", "1G",
                      "--streams", "4", "--json"], 120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    total = json.loads(done.stdout)["total_s"]
    wire = (1 << 30) / (8e9 / 8 * PAYLOAD)  # the nodes' 8 Gb/s interfaces, not the 20 Gb/s link
    assert wire < total < wire * 1.02
