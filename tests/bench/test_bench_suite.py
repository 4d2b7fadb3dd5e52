"""The suite's pure parts: sizes, the time budget, statistics, the link model, references."""

import dataclasses
import math
from pathlib import Path

import pytest
from record_samples import sample

from geofed import federation, records, validate
from geofed.bench import check, compare, model, suite
from geofed.errors import UserError
from geofed.stats import summary


def test_sizes_follow_osu_powers_of_two():
    assert validate.parse_sizes("1:4M") == [2 ** i for i in range(23)]
    assert validate.parse_sizes("3:20") == [3, 6, 12]
    assert validate.parse_sizes("64K,1,1K") == [1, 1024, 65536]


def link_run(a: str, b: str, lat: float, bw: float, when: str):
    """A bench.mpi run of one node pair of the three-site federation gfcheck-three."""
    ranks = [{"rank": i, "node": node, "site": node[0], "host": "vm"} for i, node in enumerate((a, b))]
    data = sample("bench.mpi", placement=a + b, ranks=ranks, sites=sorted({a[0], b[0]}), started=when, results=[
        {"benchmark": "latency", "class": "inter-site", "ranks": 2, "sizes": [{"size": 1, "value": lat}]},
        {"benchmark": "bw", "class": "inter-site", "ranks": 2, "sizes": [{"size": 4 << 20, "value": bw}]}])
    return dataclasses.replace(records.make("bench.mpi", data, federation="gfcheck-three"), created=when)


# Three links of three lengths (M-F short, M-S middle, F-S long): a class reference fits none of them.
LINK_REFS = """
["gfcheck-three"."M-F".latency]
tolerance = [-0.1, 0.1]
1 = 1000
["gfcheck-three"."M-S".latency]
tolerance = [-0.1, 0.1]
1 = 2500
["gfcheck-three"."F-S".latency]
tolerance = [-0.1, 0.1]
1 = 6000
["gfcheck-three".inter-site.bw]
tolerance = [-0.2, inf]
"4M" = 400
["gfcheck-three"."S1-F1".bw]
tolerance = [-0.2, inf]
"4M" = 150
"""


def test_references_per_link_pass_every_healthy_link_and_name_the_degraded_one(tmp_path):
    from conftest import run_geofed
    refs = tmp_path / "refs.toml"
    refs.write_text(LINK_REFS)
    runs = tmp_path / "runs"
    for rec in (link_run("M1", "F1", 1020.0, 450.0, "2026-11-26T10:00:00+00:00"),
                link_run("S1", "M1", 2480.0, 410.0, "2026-11-26T10:01:00+00:00"),
                link_run("F1", "S1", 6050.0, 160.0, "2026-11-26T10:02:00+00:00")):
        records.save(rec, runs)
    res = run_geofed("bench", "check", str(runs), "-r", str(refs))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "6 of 6 references met" in res.stdout  # each link and pair against its own

    # F-S's fibre is now 60 % longer; the older runs are still checked, each against its link
    records.save(link_run("F1", "S1", 9700.0, 155.0, "2026-11-26T11:00:00+00:00"), runs)
    res = run_geofed("bench", "check", str(runs), "-r", str(refs), "--out", str(tmp_path / "out"))
    assert res.returncode == 1
    (failed,) = [line for line in res.stdout.splitlines() if "too high" in line]
    assert failed.split()[1:5] == ["F-S", "F1-S1", "latency", "1"]
    assert "7 of 8 references met, 1 failed" in res.stdout
    (rec,) = records.load_dir(tmp_path / "out")
    by_run = {(Path(r["run"]).name, r["benchmark"]): (r["scope"], r["ok"]) for r in rec.data.rows}
    assert len(by_run) == 8 and sorted(set(by_run.values())) == [
        ("F-S", False), ("F-S", True), ("M-F", True), ("M-S", True), ("S1-F1", True), ("inter-site", True)]


def test_a_link_reference_no_run_measured_fails(tmp_path):
    refs = tmp_path / "refs.toml"
    refs.write_text(LINK_REFS)
    rows = check.check(check.load_references(refs), [link_run("M1", "F1", 1020.0, 450.0, "2026-11-26T10:00:00+00:00")])
    assert {(r["scope"], r["status"]) for r in rows if not r["ok"]} == {
        ("M-S", "not measured"), ("F-S", "not measured"), ("S1-F1", "not measured")}


@pytest.mark.parametrize("text,message", [
    ("4M:1", "range is inverted"),
    ("1:lots", "'lots' is not a size"),
    ("0", "'0' is not a size"),
    ("-1K", "'-1K' is not a size"),
    ("nanG", "is not a size"),
])
def test_bad_sizes(text, message):
    with pytest.raises(UserError, match=message):
        validate.parse_sizes(text)


@pytest.mark.parametrize("text,size", [
    ("64K", 65536), ("1.5G", 3 << 29), ("4MiB", 4 << 20), ("2GB", 2 << 30), ("512m", 512 << 20), ("1000", 1000),
])
def test_one_size_grammar(text, size):
    assert validate.parse_size(text) == size


def test_unknown_benchmark_and_groups():
    assert [b.name for b in suite.resolve(["p2p", "latency", "bcast"])] == ["latency", "bw", "bibw", "bcast"]
    with pytest.raises(UserError, match="unknown benchmark 'pingpong'"):
        suite.resolve(["pingpong"])
    with pytest.raises(UserError, match="latency needs at least 2 ranks; placement W1 gives 1"):
        suite.check_ranks(suite.resolve(["latency"]), 1, "placement W1")


def test_osu_counts_switch_above_8k():
    lat = suite.BENCHMARKS["latency"]
    assert lat.counts(8192) == (10000, 100) and lat.counts(8193) == (1000, 10)
    assert suite.BENCHMARKS["bw"].counts(1 << 20) == (20, 2)
    assert suite.BENCHMARKS["allreduce"].counts(4) == (1000, 100)


def test_budget_cuts_osu_counts_on_a_long_link():
    # 9 ms round trips: 0.5 s holds 55 of OSU's 10000 iterations.
    assert suite.plan(0.009, 0.5, 10000, 3) == 55
    # A LAN round trip of 30 us: OSU's count fits, the budget changes nothing.
    assert suite.plan(30e-6, 0.5, 10000, 3) == 10000
    # A window of 64 x 4 MiB at 4 Gb/s (0.55 s): the minimum still runs.
    assert suite.plan(0.55, 0.5, 20, 3) == 3
    # Warm-up may get nothing but the first iteration.
    assert suite.plan(0.55, 0.1, 1, 0) == 0


def test_statistics_of_samples():
    st = summary([float(x) for x in range(1, 101)])
    assert (st["min"], st["p50"], st["p90"], st["p99"]) == (1.0, 50.5, 90.0, 99.0)
    assert st["mean"] == 50.5 and math.isclose(st["std"], math.sqrt((100 ** 2 - 1) / 12))


def test_model_reproduces_seed_001_and_the_bdp():
    mahd = federation.load("ma-hd")
    m = model.pair_model(mahd, mahd.sites[0].code, mahd.sites[1].code)
    assert round(m["one_way_us"]) == 145 and round(m["propagation_us"]) == 143 and round(m["local_us"]) == 2
    icm = federation.load("icm-task")
    m = model.pair_model(icm, "W", "G")
    assert m["bandwidth_MBps"] == 500 and m["bdp_bytes"] == 4_502_000
    assert model.expected("latency", 1, m, 64) == pytest.approx(4502.002)
    # 64 x 4 MiB fill the link to 98 %, 64 x 1 KiB to 1.4 %
    assert model.expected("bw", 4 << 20, m, 64) / 500 == pytest.approx(0.983, abs=0.001)
    assert model.expected("bw", 1024, m, 64) / 500 == pytest.approx(0.0143, abs=0.0005)
    assert model.pair_model(None, "W", "G") is None


# ---------------------------------------------------------------- references


def run_record(fed="icm-task", lat=4520.0, bw=480.0):
    data = sample("bench.mpi", results=[
        {"benchmark": "latency", "class": "inter-site", "sizes": [{"size": 1, "value": lat}, {"size": 1024, "value": lat + 5}]},
        {"benchmark": "bw", "class": "inter-site", "sizes": [{"size": 4 << 20, "value": bw}]},
    ])
    return records.make("bench.mpi", data, federation=fed)


REFS = """
[icm-task.inter-site.latency]
tolerance = [-0.05, 0.30]
1 = 4502
"1K" = { value = 4510, tolerance = [-0.01, 0.01] }

[icm-task.inter-site.bw]
tolerance = [-0.2, inf]
"4M" = 490

[other-fed.inter-site.bw]
"4M" = 1
"""


def test_check_passes_within_tolerance(tmp_path):
    refs = tmp_path / "refs.toml"
    refs.write_text(REFS)
    rows = check.check(check.load_references(refs), [run_record()])
    assert [(r["benchmark"], r["size"], r["ok"]) for r in rows] == [
        ("latency", 1, True), ("latency", 1024, True), ("bw", 4 << 20, True)]  # other-fed does not apply


def test_check_fails_on_regression_and_on_a_missing_size(tmp_path):
    refs = tmp_path / "refs.toml"
    refs.write_text(REFS + '\n[icm-task.inter-site.bibw]\n"4M" = 900\n')
    rows = check.check(check.load_references(refs), [run_record(lat=6000.0, bw=300.0)])
    status = {(r["benchmark"], r["size"]): r["status"] for r in rows}
    assert status == {("latency", 1): "too high", ("latency", 1024): "too high", ("bw", 4 << 20): "too low",
                      ("bibw", 4 << 20): "not measured"}
    table = check.format_table(rows)
    assert "0 of 4 references met, 4 failed" in table


def test_check_cli_exit_status(tmp_path):
    from conftest import run_geofed
    refs = tmp_path / "refs.toml"
    refs.write_text(REFS)
    good, bad = tmp_path / "good", tmp_path / "bad"
    records.save(run_record(), good)
    records.save(run_record(bw=100.0), bad)
    res = run_geofed("bench", "check", str(good), "--references", str(refs), "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 of 3 references met" in res.stdout
    res = run_geofed("bench", "check", str(bad), "-r", str(refs))
    assert res.returncode == 1
    assert "too low" in res.stdout and "2 of 3 references met, 1 failed" in res.stdout
    assert run_geofed("bench", "check", str(good)).returncode == 2  # no references given


def test_made_references_pass_on_their_own_run(tmp_path):
    run = run_record()
    refs = tmp_path / "made.toml"
    refs.write_text(check.make_references([run]))
    rows = check.check(check.load_references(refs), [run])
    assert len(rows) == 3 and all(r["ok"] for r in rows)


@pytest.mark.parametrize("text,message", [
    ("[x.inter-site.nosuch]\n1 = 2\n", "unknown benchmark"),
    ("[x.somewhere.latency]\n1 = 2\n", "unknown scope"),
    ("[x.inter-site.latency]\ntolerance = [0.1, 0.2]\n1 = 2\n", "must contain 0"),
    ("[x.inter-site.latency]\n1 = -3\n", "positive number"),
    ("[x.inter-site.latency]\nbig = 3\n", "'big' is not a size"),
    ("[x\n", "invalid TOML"),
])
def test_bad_reference_files(tmp_path, text, message):
    refs = tmp_path / "refs.toml"
    refs.write_text(text)
    with pytest.raises(UserError, match=message):
        check.load_references(refs)


def test_records_round_trip_through_json(tmp_path):
    path = records.save(run_record(), tmp_path / "runs")
    assert records.dumps(check.load_runs([str(path)])[0]) == path.read_text()
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no bench.mpi records"):
        check.load_runs([str(tmp_path / "empty")])


def test_osu_text_is_parsed_and_judged(tmp_path):
    text = "# OSU MPI Latency Test v7.4\n# Size          Latency (us)\n1                       0.98\n8192   4.50\n"
    assert compare.parse_osu(text) == {1: 0.98, 8192: 4.5}
    assert compare.verdict("latency", 1, 1.0, 1.4) == "ok" and compare.verdict("latency", 1, 1.0, 1.6) == "differs"
    assert compare.verdict("latency", 16384, 1.0, 100.0) == ""  # only small messages are compared
    assert compare.verdict("latency", 1, 4510.0, 4512.7) == "ok"  # 0.06 % on a long link: relative slack
    assert compare.verdict("latency", 1, 4510.0, 4700.0) == "differs"
    assert compare.verdict("bw", 16384, 100.0, 91.0) == "ok" and compare.verdict("bw", 16384, 100.0, 89.0) == "differs"
    assert compare.verdict("bw", 8192, 100.0, 10.0) == ""
    with pytest.raises(UserError, match="no executable osu_latency"):
        compare.find_osu(str(tmp_path), "latency")


def test_osu_gets_the_iterations_geofed_cut_on_a_long_link():
    rows = [{"size": 1, "iterations": 110, "warmup": 12, "osu_iterations": 10000},
            {"size": 2, "iterations": 110, "warmup": 12, "osu_iterations": 10000},
            {"size": 4, "iterations": 96, "warmup": 10, "osu_iterations": 10000},
            {"size": 16384, "iterations": 100, "warmup": 10, "osu_iterations": 100}]
    assert compare.osu_counts(rows) == [(1, 2, ["-i", "110", "-x", "12"]), (4, 4, ["-i", "96", "-x", "10"]),
                                        (16384, 16384, [])]  # not cut: OSU's own counts
