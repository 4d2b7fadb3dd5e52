import json

from record_samples import record, sample

from geofed import records, report


def verify_record(ok=True):
    pair = {"src": "W1", "dst": "G1", "class": "inter-site",
            "rtt_ms": {"configured": 9.004, "min": 9.01, "median": 9.03, "p99": 9.2, "samples": 200, "lost": 0, "ok": ok},
            "throughput_mbps": {"configured": 4000.0, "measured": 3812.0, "streams": 4, "ok": True},
            "host_cpu_ms_per_MB": 4.217}
    return records.make("testbed.verify", {"pairs": [pair], "host_cores": 2, "ok": ok}, federation="icm-task")


def pingpong_record():
    pairs = [{"a": "0@W1", "b": "1@W1", "class": "intra-node", "model_rtt_ms": 0.004, "min_ms": 0.02,
              "median_ms": 0.03, "p99_ms": 0.05, "iterations": 100},
             {"a": "0@W1", "b": "2@G1", "class": "inter-site", "model_rtt_ms": 9.004, "min_ms": 9.02,
              "median_ms": 9.05, "p99_ms": 9.3, "iterations": 100}]
    return records.make("job.pingpong", {"placement": "W1G1", "mpi_library": "MPICH 5", "message_bytes": 1,
                                         "ranks": [], "pairs": pairs})


def test_records_round_trip_through_a_directory(tmp_path):
    a = records.save(verify_record(), tmp_path)
    b = records.save(verify_record(), tmp_path)
    assert a != b  # same kind, same second: no record overwrites another
    (tmp_path / "unrelated.json").write_text(json.dumps({"x": 1}))
    loaded = records.load_dir(tmp_path)
    assert [r.kind for r in loaded] == ["testbed.verify", "testbed.verify"]


def test_report_has_a_section_per_kind_with_plots(tmp_path):
    recs = [verify_record(ok=False), pingpong_record(), record("job.btio")]
    page = report.render(recs, tmp_path).read_text()
    assert "Testbed verification" in page and "MPI job across a placement" in page
    assert "9.0300" in page and "FAIL" in page  # the measured median and the failed verdict
    assert "sanity: <b>FAILED</b> (pairs off their configuration: W1-&gt;G1)" in page  # one verdict line per record
    assert "host CPU [ms/MB]" in page and "4.22" in page
    assert "No section renders: job.btio" in page  # kinds without a section are listed, not dropped silently
    assert (tmp_path / "pingpong-0.png").stat().st_size > 1000
    assert page.index("Testbed verification") < page.index("MPI job across a placement")


def test_link_section_shows_each_way_against_its_configuration(tmp_path):
    way = {"from": "A", "propagation_us": 500.0, "jitter_us": 200.0, "loss": 0.01, "bandwidth_gbps": 1.0,
           "min_us": 516.2, "median_us": 629.5, "contribution_error": 0.017, "jitter_mean_us": 109.8,
           "jitter_expected_mean_us": 100.0, "jitter_sd_us": 58.9, "jitter_expected_sd_us": 57.7,
           "jitter_median_us": 104.1, "jitter_iqr_us": 101.5, "jitter_expected_iqr_us": 100.0,
           "measured_gbps": 0.94}
    back = {**way, "from": "B", "propagation_us": 1500.0, "bandwidth_gbps": 0.25, "measured_gbps": 0.239}
    ways = {"ways": [way, back], "round_trips": 3003, "lost": 88, "lost_fraction": 88 / 3003,
            "expected_lost_fraction": 0.0298, "lost_sd": 0.0031}
    page = report.render([records.make("bench.link", {"rtt": [], "throughput": [], "asymmetric": ways})],
                         tmp_path).read_text()
    assert "from B" in page and "1500.0" in page and "0.239 of 0.25" in page
    assert "104.1 (100.0)" in page and "101.5 (100.0)" in page and "88 of 3003" in page


def test_every_kind_renders_and_shows_its_sanity_the_same_way(tmp_path):
    from geofed.report import SECTIONS
    recs = [record(kind) for kind in sorted(records.KINDS)]
    bad = record("bench.btio", verified=False)
    page = report.render(recs + [bad], tmp_path).read_text()
    assert all(f"<h2>{s.title}</h2>" in page.replace("&#x27;", "'") for s in SECTIONS.values())
    checked = [r for r in recs if r.sanity() is not None]
    assert page.count("sanity: <b>ok</b>") == len(checked) and page.count("sanity: <b>FAILED</b>") == 1
    assert "a run read back wrong data" in page
    assert sample("bench.hpl")["rows"][0]["n"] == 1000 and "1000" in page


def test_content_a_section_cannot_read_is_refused_naming_the_file(tmp_path):
    import pytest

    path = records.save(record("bench.hpl", rows=[[]]), tmp_path)  # rows: a list, of nonsense
    with pytest.raises(records.RecordError, match=f"{path}: bench.hpl version 2: content this section cannot read"):
        report.render(records.load_dir(tmp_path), tmp_path / "out")
    assert not (tmp_path / "out").exists()
