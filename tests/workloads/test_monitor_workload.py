"""`geofed bench monitor`: the accelerated schedule's quiet run on a testbed of its own,
its table and record; a bad request refused in one line."""

import json
import re

import pytest

from conftest import needs_root, run_geofed, two_site_federation


@pytest.mark.parametrize("args, error", [
    (["--minutes", "0"], "argument --minutes: expected a positive number, got '0'"),
    (["-f", "single-site"], "single-site.toml: no link to monitor"),
])
def test_a_bad_request_is_refused_in_one_line(tmp_path, args, error):
    res = run_geofed("bench", "monitor", *args, "--out", str(tmp_path))
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1 and error in res.stderr, res.stderr


@needs_root
def test_a_quiet_minute_raises_no_alert_and_counts_what_it_measured(tmp_path):
    fed = tmp_path / "gfmonq.toml"
    fed.write_text(two_site_federation("gfmonq", rtt_ms=10.0, gbps=1.0))
    res = run_geofed("bench", "monitor", "-f", str(fed), "--minutes", "1", "--gbps", "0.2",
                     "--keep", str(tmp_path / "run"), "--out", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"^A1-B1 +\d+ +\d+ +\d+ +0 +\d+ +0 +1 +0$", res.stdout, re.M), res.stdout
    (path,) = tmp_path.glob("workload.result-*.json")
    rec = json.loads(path.read_text())["data"]
    result = rec["result"]
    assert result["link_changes"] == {"bandwidth_gbps": 0.2} and result["events"] == []
    a1b1 = result["paths"]["A1-B1"]
    # 1000 datagrams a second each way, a period of 5 s; the first and last are partial
    assert 9 <= a1b1["probe_periods"] / 2 <= 12 and a1b1["datagrams"] == a1b1["probe_periods"] * 5000
    assert a1b1["mpi_tests"] >= 2 and a1b1["throughput_tests"] == 1  # due at once, then every 5 min
    assert rec["verdict"]["ok"] and rec["figures"]["alerts_per_hour"] == 0
    assert (tmp_path / "run" / "m.sqlite").is_file() and (tmp_path / "run" / "alerts.jsonl").read_text() == ""
